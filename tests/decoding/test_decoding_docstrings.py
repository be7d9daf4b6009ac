"""Runs every docstring example of keras_transformer.decoding."""

import doctest
import importlib

import pytest

# By name: the package re-exports functions named like their modules.
MODULES = [
    importlib.import_module(f"keras_transformer.decoding.{name}")
    for name in ("beam_search", "greedy", "search_utils", "translator")
]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_docstring_examples(module):
    result = doctest.testmod(
        module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    )
    assert result.attempted > 0, f"{module.__name__} has no examples"
    assert result.failed == 0
