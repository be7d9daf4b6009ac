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

__version__ = "0.1.0"

_KERAS_CLASSES = ("layers", "losses", "metrics", "models", "schedules")


def _import_keras_classes() -> None:
    names = [f"{__name__}.{name}" for name in _KERAS_CLASSES]
    # Keras imported by one of them: that import registers what it loads
    # (importing the others now would find it half-initialized).
    if not any(name in sys.modules for name in names):
        for name in names:
            importlib.import_module(name)


class _AfterKerasImport(importlib.abc.MetaPathFinder):
    """Imports the Keras classes right after `keras` itself is imported.

    It stays in `sys.meta_path` until then: `importlib.util.find_spec`
    (which TensorFlow calls to see whether Keras is there) asks finders too,
    without importing.
    """

    def find_spec(self, name, path, target=None):
        if name != "keras":
            return None
        for finder in sys.meta_path:  # The spec the others would give.
            if finder is not self and hasattr(finder, "find_spec"):
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_register(module):
            exec_module(module)
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            _import_keras_classes()

        spec.loader.exec_module = exec_then_register
        return spec


if "keras" in sys.modules:
    _import_keras_classes()
else:
    sys.meta_path.insert(0, _AfterKerasImport())
