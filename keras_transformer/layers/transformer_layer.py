"""What the layers of the encoder and decoder stacks share, section 3.1."""

import keras

from keras_transformer.layers.initializers import clone_initializer
from keras_transformer.layers.multi_head_attention import MultiHeadAttention
from keras_transformer.layers.pointwise_feed_forward import PointwiseFeedForward
from keras_transformer.validation import check_positive_int, check_rate


class TransformerLayer(keras.layers.Layer):
    """Base of `EncoderLayer` and `DecoderLayer`: residual sublayers.

    Each sublayer's output is `LayerNorm(x + Dropout(Sublayer(x)))` (post-LN,
    as in the paper) or, with `norm_first=True`,
    `x + Dropout(Sublayer(LayerNorm(x)))` (pre-LN, which trains more stably
    in deep stacks). `build` makes the sublayers of Figure 1: self-attention,
    encoder-decoder attention when given the memory's shape, and the
    feed-forward network, each with its LayerNorm and every one with its own
    copy of the initializers. Subclasses compose them in `call` with
    `attention_sublayer` and `feed_forward_sublayer`; a layer of other
    sublayers builds them with `make_attention`, `make_feed_forward` and
    `make_norm` and composes them with `pre_norm` and `add_norm`.

    Args:
        num_heads: attention heads `h`.
        d_ff: inner size of the feed-forward network.
        dropout: residual dropout rate `P_drop` (0.1 in the base model).
        attention_dropout: dropout rate on the attention weights.
        activation: activation of the feed-forward network.
        norm_first: pre-LN instead of the paper's post-LN.
        layer_norm_epsilon: epsilon of the layer normalizations.
        kernel_initializer: initializer of the attention projections' and
            the feed-forward network's kernels (a copy for each).
        bias_initializer: initializer of their biases (a copy for each).
        sliding_window: restricted self-attention (Table 1): each position
            attends only to positions less than `sliding_window` away.
        key_dim: d_k = d_v, the size of each attention head; default
            `d_model // num_heads` (Table 3, row B varies it alone).
        activation_dropout: dropout rate inside the feed-forward network,
            after its activation (0 in the paper; fairseq's
            `--activation-dropout`).
        **kwargs: passed to `keras.layers.Layer`.

    Example (a layer of one residual feed-forward sublayer):

    >>> import numpy as np
    >>> class FeedForwardLayer(TransformerLayer):
    ...     def build(self, shape):
    ...         self.feed_forward = self.make_feed_forward(shape)
    ...         self.feed_forward_norm = self.make_norm("feed_forward_norm", shape)
    ...         self.residual_dropout = self.make_dropout("residual_dropout")
    ...     def call(self, x, training=None):
    ...         return self.feed_forward_sublayer(x, training)
    >>> layer = FeedForwardLayer(num_heads=2, d_ff=16)
    >>> tuple(layer(np.zeros((2, 5, 8), "float32")).shape)
    (2, 5, 8)

    References:
        Vaswani et al. 2017, "Attention Is All You Need", sections 3.1, 5.4.
    """

    def __init__(
        self,
        num_heads,
        d_ff,
        dropout=0.1,
        attention_dropout=0.0,
        activation="relu",
        norm_first=False,
        layer_norm_epsilon=1e-6,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        sliding_window=None,
        key_dim=None,
        activation_dropout=0.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("num_heads", num_heads)
        check_positive_int("d_ff", d_ff)
        check_rate("dropout", dropout)
        check_rate("attention_dropout", attention_dropout)
        check_rate("activation_dropout", activation_dropout)
        if sliding_window is not None:
            check_positive_int("sliding_window", sliding_window)
        if key_dim is not None:
            check_positive_int("key_dim", key_dim)
        self.num_heads = num_heads
        self.d_ff = d_ff
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.activation = activation
        self.norm_first = norm_first
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.sliding_window = sliding_window
        self.key_dim = key_dim
        self.activation_dropout = activation_dropout
        self.supports_masking = True

    def build(self, x_shape, memory_shape=None):
        """The sublayers of Figure 1, each with its LayerNorm.

        Self-attention, encoder-decoder attention when `memory_shape` is
        given (the decoder's), and the feed-forward network; one residual
        dropout for all.
        """
        # Sublayers first, then norms: the order of the weights (and of the
        # optimizer's variables) in files of earlier versions.
        self.self_attention = self.make_attention(
            "self_attention", x_shape, x_shape, self.sliding_window
        )
        self.cross_attention = self.cross_attention_norm = None
        if memory_shape is not None:
            self.cross_attention = self.make_attention(
                "cross_attention", x_shape, memory_shape
            )
        self.feed_forward = self.make_feed_forward(x_shape)
        self.self_attention_norm = self.make_norm("self_attention_norm", x_shape)
        if memory_shape is not None:
            self.cross_attention_norm = self.make_norm("cross_attention_norm", x_shape)
        self.feed_forward_norm = self.make_norm("feed_forward_norm", x_shape)
        self.residual_dropout = self.make_dropout("residual_dropout")

    def make_attention(self, name, query_shape, value_shape, sliding_window=None):
        """A built `MultiHeadAttention` sublayer called `name`."""
        d_model = query_shape[-1]
        key_dim = self.key_dim
        if key_dim is None:
            if d_model % self.num_heads:
                raise ValueError(
                    "d_model must be divisible by num_heads. "
                    f"Received: d_model={d_model}, num_heads={self.num_heads}"
                )
            key_dim = d_model // self.num_heads
        layer = MultiHeadAttention(
            self.num_heads,
            key_dim=key_dim,
            dropout=self.attention_dropout,
            sliding_window=sliding_window,
            kernel_initializer=clone_initializer(self.kernel_initializer, name),
            bias_initializer=clone_initializer(self.bias_initializer, name),
            dtype=self.dtype_policy,
            name=name,
        )
        layer.build(query_shape, value_shape)
        return layer

    def make_feed_forward(self, input_shape):
        """The built `PointwiseFeedForward` sublayer, `feed_forward`."""
        layer = PointwiseFeedForward(
            self.d_ff,
            dropout=self.activation_dropout,
            activation=self.activation,
            kernel_initializer=clone_initializer(self.kernel_initializer, "ffn"),
            bias_initializer=clone_initializer(self.bias_initializer, "ffn"),
            dtype=self.dtype_policy,
            name="feed_forward",
        )
        layer.build(input_shape)
        return layer

    def make_norm(self, name, input_shape):
        """A built `LayerNormalization` sublayer called `name`."""
        layer = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name
        )
        layer.build(input_shape)
        return layer

    def make_dropout(self, name):
        """A `Dropout` sublayer called `name`, at rate `dropout`."""
        return keras.layers.Dropout(self.dropout, dtype=self.dtype_policy, name=name)

    def pre_norm(self, norm, x):
        """Pre-LN normalizes the sublayer's input; post-LN leaves it."""
        return norm(x) if self.norm_first else x

    def add_norm(self, norm, residual, x, training):
        """Dropout, residual add and, for post-LN, LayerNorm(x + Sublayer(x))."""
        x = residual + self.residual_dropout(x, training=training)
        return x if self.norm_first else norm(x)

    def attention_sublayer(
        self, attention, norm, x, memory=None, training=None, **kwargs
    ):
        """A residual attention sublayer (section 3.2.3).

        Self-attention when `memory` is `None`, encoder-decoder attention
        otherwise; `kwargs` go to the `MultiHeadAttention` call (masks,
        `return_attention_scores`, `cache`).

        Returns:
            `(outputs, extra)`: `extra` is the attention's second output
            (its weights, or its updated cache), `None` when it has none.
        """
        residual = x
        x = self.pre_norm(norm, x)
        x = attention(x, x if memory is None else memory, training=training, **kwargs)
        has_extra = (
            kwargs.get("return_attention_scores") or kwargs.get("cache") is not None
        )
        x, extra = x if has_extra else (x, None)
        return self.add_norm(norm, residual, x, training), extra

    def feed_forward_sublayer(self, x, training):
        """The residual position-wise feed-forward sublayer (section 3.3).

        It uses the `feed_forward`, `feed_forward_norm` and `residual_dropout`
        sublayers that the subclass's `build` made.
        """
        residual = x
        x = self.pre_norm(self.feed_forward_norm, x)
        x = self.feed_forward(x, training=training)
        return self.add_norm(self.feed_forward_norm, residual, x, training)

    def get_config(self):
        config = super().get_config()
        config.update(
            num_heads=self.num_heads,
            d_ff=self.d_ff,
            dropout=self.dropout,
            attention_dropout=self.attention_dropout,
            activation=self.activation,
            norm_first=self.norm_first,
            layer_norm_epsilon=self.layer_norm_epsilon,
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
            bias_initializer=keras.initializers.serialize(self.bias_initializer),
            sliding_window=self.sliding_window,
            key_dim=self.key_dim,
            activation_dropout=self.activation_dropout,
        )
        return config

    def compute_output_spec(self, x, *args, **kwargs):
        if kwargs.get("return_attention_scores") or kwargs.get("cache") is not None:
            # Trace `call`: the scores and the cache have their own shapes.
            return keras.Operation.compute_output_spec(self, x, *args, **kwargs)
        # Without tracing: PyTorch would trace an unknown length as 83
        # positions, past a short positional table.
        return keras.KerasTensor(x.shape, dtype=self.compute_dtype)
