"""Models built from `keras_transformer.layers`."""

from keras_transformer.models.presets import PRESETS
from keras_transformer.models.rdrop import RDropTransformer
from keras_transformer.models.transformer import Transformer

__all__ = ["PRESETS", "RDropTransformer", "Transformer"]
