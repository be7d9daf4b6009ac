"""What the encoder and decoder stacks share, section 3.1 of the paper."""

from keras_transformer.layers.initializers import clone_initializer
from keras_transformer.layers.positional_encoding import PositionalEncoding
from keras_transformer.layers.transformer_layer import TransformerLayer
from keras_transformer.validation import check_positive_int


class TransformerStack(TransformerLayer):
    """Base of `Encoder` and `Decoder`: positional encoding, dropout, N layers.

    `build` makes the positional encoding, the embedding dropout and
    `num_layers` layers of the subclass's `layer_class` (named `layer_i`,
    each with its own copy of the initializers), and, with
    `norm_first=True`, a final LayerNorm. The other arguments are those of
    `TransformerLayer`, passed to every layer.

    Args:
        num_layers: `N` (6 in the paper).
        num_heads: attention heads `h`.
        d_ff: inner size of the feed-forward networks.
        dropout: dropout rate on the embeddings and every sublayer.
        attention_dropout: dropout rate on the attention weights.
        max_length: longest sequence the positional encoding covers.
        learned_positions: learned positional embeddings instead of sinusoids.
        **kwargs: the other arguments of `TransformerLayer` (`activation`,
            `norm_first`, `layer_norm_epsilon`, `kernel_initializer`,
            `bias_initializer`, `sliding_window`, `key_dim`,
            `activation_dropout`) and of
            `keras.layers.Layer`.

    Example (`Encoder` is this with `EncoderLayer`):

    >>> import numpy as np
    >>> from keras_transformer.layers import Encoder
    >>> encoder = Encoder(num_layers=2, num_heads=2, d_ff=16)
    >>> tuple(encoder(np.zeros((1, 4, 8), "float32")).shape)
    (1, 4, 8)
    >>> len(encoder.layers), encoder.layers[0].name
    (2, 'layer_0')

    References:
        Vaswani et al. 2017, "Attention Is All You Need", sections 3.1, 3.5.
    """

    layer_class = None  # EncoderLayer or DecoderLayer

    def __init__(
        self,
        num_layers=6,
        num_heads=8,
        d_ff=2048,
        dropout=0.1,
        attention_dropout=0.0,
        max_length=2048,
        learned_positions=False,
        **kwargs,
    ):
        super().__init__(num_heads, d_ff, dropout, attention_dropout, **kwargs)
        check_positive_int("num_layers", num_layers)
        check_positive_int("max_length", max_length)
        self.num_layers = num_layers
        self.max_length = max_length
        self.learned_positions = learned_positions

    def build(self, input_shape, memory_shape=None):
        self.positional_encoding = PositionalEncoding(
            self.max_length,
            learned=self.learned_positions,
            dtype=self.dtype_policy,
            name="positional_encoding",
        )
        self.positional_encoding.build(input_shape)
        self.embedding_dropout = self.make_dropout("embedding_dropout")
        layer_config = TransformerLayer.get_config(self)
        for key in ("name", "trainable", "dtype"):
            layer_config.pop(key, None)
        # The decoder's layers also take the memory's shape (none: decoder-only).
        shapes = (input_shape,) if memory_shape is None else (input_shape, memory_shape)
        self.layers = []
        for i in range(self.num_layers):
            name = f"layer_{i}"
            layer = self.layer_class(
                **{
                    **layer_config,
                    "kernel_initializer": clone_initializer(
                        self.kernel_initializer, name
                    ),
                    "bias_initializer": clone_initializer(self.bias_initializer, name),
                },
                dtype=self.dtype_policy,
                name=name,
            )
            layer.build(*shapes)
            self.layers.append(layer)
        self.final_norm = None
        if self.norm_first:
            self.final_norm = self.make_norm("final_norm", input_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            num_layers=self.num_layers,
            max_length=self.max_length,
            learned_positions=self.learned_positions,
        )
        return config
