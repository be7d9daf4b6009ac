"""Models built from `keras_transformer.layers`: the Transformer, and the same
model trained with R-Drop."""

from keras_transformer.models.presets import PRESETS
from keras_transformer.models.rdrop import RDropTransformer
from keras_transformer.models.transformer import Transformer

__all__ = ["PRESETS", "RDropTransformer", "Transformer"]
