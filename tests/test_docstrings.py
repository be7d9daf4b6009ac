"""Runs the docstring Examples of every module of `keras_transformer`."""

import doctest
import importlib
import inspect
import io
import pkgutil

import pytest

import keras_transformer
import keras_transformer.layers

OPTIONS = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS

# Modules whose Examples run an optional extra: skipped without it (the
# modules themselves import without it).
EXTRAS = {"keras_transformer.jobs.export_ctranslate2": "ctranslate2"}


def module_names():
    """`keras_transformer` and all its submodules, as `walk_packages` lists them.

    `walk_packages` imports subpackages to list their contents; a subpackage
    that fails to import is still listed (its own test then fails) and
    `onerror` keeps that failure from stopping collection.
    """
    walk = pkgutil.walk_packages(
        keras_transformer.__path__, prefix="keras_transformer.", onerror=lambda _: None
    )
    names = sorted(info.name for info in walk)
    # `__main__` runs the command line when imported; it holds no Examples.
    return ["keras_transformer", *(n for n in names if not n.endswith(".__main__"))]


@pytest.mark.parametrize("module_name", module_names())
def test_docstring_examples(module_name):
    module = importlib.import_module(module_name)  # An import error fails here.
    if module_name in EXTRAS:
        pytest.importorskip(
            EXTRAS[module_name],
            reason=f"its Examples need the optional {EXTRAS[module_name]} extra",
        )
    runner = doctest.DocTestRunner(optionflags=OPTIONS)
    report = io.StringIO()
    for test in doctest.DocTestFinder().find(module, module_name):
        runner.run(test, out=report.write)
    results = runner.summarize(verbose=False)
    assert results.failed == 0, report.getvalue()


@pytest.mark.parametrize("name", keras_transformer.layers.__all__)
def test_every_public_layer_api_has_an_example(name):
    obj = getattr(keras_transformer.layers, name)
    tests = doctest.DocTestFinder(recurse=False).find(obj, name)
    assert sum(len(t.examples) for t in tests) > 0, f"{name} has no Example"
    assert "Example" in inspect.getdoc(obj)
