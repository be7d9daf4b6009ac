"""The Transformer of "Attention Is All You Need" as Keras 3 layers.

Subpackages: `layers`, `models`, `data`, `schedules`, `losses`, `metrics`,
`training`, `decoding`, `visualization`; `jobs` (one module per command)
and `cli`, the command line.

Importing the top level stays light (no Keras, no TensorFlow) and still
registers the Keras classes for `keras.models.load_model`: they are
imported as soon as Keras is (at once if it already is), so a `.keras` file
loads after `import keras_transformer` alone. On the JAX and PyTorch
backends they import no TensorFlow.

Importing the package sets no environment variable. The `keras-transformer`
command sets `TF_CPU_ALLOCATOR_USE_BFC=true` for its own process (see
`cli.main`); set it yourself before TensorFlow creates its first tensor to
get the same pooled CPU allocator in your programs (docs/training.md).
"""

import importlib
import importlib.abc
import sys
import threading
import warnings

__version__ = "0.1.0"

_KERAS_CLASSES = tuple(
    f"{__name__}.{name}"
    for name in ("layers", "losses", "metrics", "models", "schedules")
)


def _import_keras_classes(done: str = "") -> None:
    """Imports the modules of Keras classes that are not imported yet.

    Not while one of them (or `xla`, which they use) is half-imported: its
    names would be missing. Each calls this as its last line (`done`, its
    own name), so the last of them to finish imports the rest.
    """
    for name in (*_KERAS_CLASSES, f"{__name__}.xla"):
        module = sys.modules.get(name)
        # importlib marks a module's spec `_initializing` while its code runs
        # (private; tests/test_package.py fails loudly if that changes).
        if name != done and getattr(module, "__spec__", None) is not None:
            if getattr(module.__spec__, "_initializing", False):
                return
    for name in _KERAS_CLASSES:
        if name not in sys.modules:
            importlib.import_module(name)


class _AfterKerasImport(importlib.abc.MetaPathFinder):
    """Imports the Keras classes right after `keras` itself is imported.

    It stays in `sys.meta_path` until then: `importlib.util.find_spec`
    (which TensorFlow calls to see whether Keras is there) asks finders too,
    without importing.
    """

    def __init__(self):
        self._asking = threading.local()

    def find_spec(self, name, path, target=None):
        if name != "keras" or getattr(self._asking, "now", False):
            return None
        self._asking.now = True  # The other finders may ask the meta path.
        try:
            spec = next(
                (
                    spec
                    for finder in sys.meta_path
                    if finder is not self and hasattr(finder, "find_spec")
                    for spec in [finder.find_spec(name, path, target)]
                    if spec is not None
                ),
                None,
            )
        finally:
            self._asking.now = False
        if spec is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_register(module):
            exec_module(module)
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            try:
                _import_keras_classes()
            except Exception as error:  # Keras itself imported fine.
                warnings.warn(
                    f"keras_transformer could not register its Keras classes: {error}",
                    stacklevel=2,
                )

        spec.loader.exec_module = exec_then_register
        return spec


sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "_AfterKerasImport"]
if "keras" in sys.modules:
    _import_keras_classes()
else:
    sys.meta_path.insert(0, _AfterKerasImport())
