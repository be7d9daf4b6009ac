"""Models built from `keras_transformer.layers`."""

from keras_transformer.models.presets import PRESETS
from keras_transformer.models.transformer import Transformer

__all__ = ["PRESETS", "Transformer"]


# The package's other Keras classes, if this module was imported first.
from keras_transformer import _import_keras_classes  # noqa: E402

_import_keras_classes(done=__name__)
