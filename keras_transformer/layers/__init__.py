"""The Transformer's building blocks as Keras 3 layers."""

from keras_transformer.layers.decoder import Decoder
from keras_transformer.layers.decoder_layer import DecoderLayer
from keras_transformer.layers.encoder import Encoder
from keras_transformer.layers.encoder_layer import EncoderLayer
from keras_transformer.layers.masking import (
    band_mask,
    causal_mask,
    merge_masks,
    padding_mask,
)
from keras_transformer.layers.multi_head_attention import MultiHeadAttention
from keras_transformer.layers.pointwise_feed_forward import PointwiseFeedForward
from keras_transformer.layers.positional_encoding import (
    PositionalEncoding,
    positional_encoding,
)
from keras_transformer.layers.scaled_dot_product_attention import (
    scaled_dot_product_attention,
)
from keras_transformer.layers.shared_embedding import SharedEmbedding
from keras_transformer.layers.transformer_layer import TransformerLayer
from keras_transformer.layers.transformer_stack import TransformerStack

__all__ = [
    "Decoder",
    "DecoderLayer",
    "Encoder",
    "EncoderLayer",
    "MultiHeadAttention",
    "PointwiseFeedForward",
    "PositionalEncoding",
    "SharedEmbedding",
    "TransformerLayer",
    "TransformerStack",
    "band_mask",
    "causal_mask",
    "merge_masks",
    "padding_mask",
    "positional_encoding",
    "scaled_dot_product_attention",
]
