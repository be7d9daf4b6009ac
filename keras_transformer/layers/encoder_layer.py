"""One layer of the encoder stack, section 3.1 of the paper."""

import keras

from keras_transformer.layers.multi_head_attention import MultiHeadAttention
from keras_transformer.layers.pointwise_feed_forward import PointwiseFeedForward
from keras_transformer.layers.residual import add_norm, head_dim, layer_norm, pre_norm
from keras_transformer.validation import check_positive_int, check_rate


@keras.saving.register_keras_serializable(package="keras_transformer")
class EncoderLayer(keras.layers.Layer):
    """Self-attention, then a feed-forward network, each a residual sublayer.

    Each sublayer's output is `LayerNorm(x + Dropout(Sublayer(x)))` (post-LN,
    as in the paper) or, with `norm_first=True`,
    `x + Dropout(Sublayer(LayerNorm(x)))` (pre-LN, which trains more stably in
    deep stacks).

    Args:
        num_heads: attention heads `h`.
        d_ff: inner size of the feed-forward network.
        dropout: residual dropout rate `P_drop` (0.1 in the base model).
        attention_dropout: dropout rate on the attention weights.
        activation: activation of the feed-forward network.
        norm_first: pre-LN instead of the paper's post-LN.
        layer_norm_epsilon: epsilon of the layer normalizations.
        kernel_initializer: initializer of every kernel (attention
            projections and feed-forward).
        bias_initializer: initializer of their biases.
        sliding_window: restricted self-attention (Table 1): each position
            attends only to positions less than `sliding_window` away.
        key_dim: d_k = d_v, the size of each attention head; default
            `d_model // num_heads` (Table 3, row B varies it alone).
        **kwargs: passed to `keras.layers.Layer`.

    Call arguments:
        x: `(B, S, D)`.
        mask: `(B, S)` padding mask, `True` = real token; defaults to the
            Keras mask of `x`.
        training: whether dropout is active.
        return_attention_scores: also return the `(B, H, S, S)` weights.
        attention_mask: boolean `(B, S, S)` (or `(S, S)`), `True` = may
            attend, as in `keras.layers.MultiHeadAttention`; combined with
            the padding mask.

    Returns:
        `(B, S, D)`, or `(outputs, scores)`.

    Example:

    >>> import numpy as np
    >>> layer = EncoderLayer(num_heads=2, d_ff=16)
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
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("num_heads", num_heads)
        check_positive_int("d_ff", d_ff)
        check_rate("dropout", dropout)
        check_rate("attention_dropout", attention_dropout)
        self.num_heads = num_heads
        self.d_ff = d_ff
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.activation = activation
        self.norm_first = norm_first
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        if sliding_window is not None:
            check_positive_int("sliding_window", sliding_window)
        self.sliding_window = sliding_window
        if key_dim is not None:
            check_positive_int("key_dim", key_dim)
        self.key_dim = key_dim
        self.supports_masking = True

    def build(self, input_shape):
        d_model = input_shape[-1]
        self.self_attention = MultiHeadAttention(
            self.num_heads,
            key_dim=self.key_dim or head_dim(d_model, self.num_heads),
            dropout=self.attention_dropout,
            sliding_window=self.sliding_window,
            kernel_initializer=self.kernel_initializer,
            bias_initializer=self.bias_initializer,
            dtype=self.dtype_policy,
            name="self_attention",
        )
        self.self_attention.build(input_shape, input_shape)
        self.feed_forward = PointwiseFeedForward(
            self.d_ff,
            activation=self.activation,
            kernel_initializer=self.kernel_initializer,
            bias_initializer=self.bias_initializer,
            dtype=self.dtype_policy,
            name="feed_forward",
        )
        self.feed_forward.build(input_shape)
        self.self_attention_norm, self.feed_forward_norm = (
            layer_norm(self, name, input_shape)
            for name in ("self_attention_norm", "feed_forward_norm")
        )
        self.residual_dropout = keras.layers.Dropout(
            self.dropout, dtype=self.dtype_policy, name="residual_dropout"
        )

    def call(
        self,
        x,
        mask=None,
        training=None,
        return_attention_scores=False,
        attention_mask=None,
    ):
        # Multi-head self-attention
        residual = x
        x = pre_norm(self, self.self_attention_norm, x)
        out = self.self_attention(
            x,
            x,
            query_mask=mask,
            value_mask=mask,
            attention_mask=attention_mask,
            return_attention_scores=return_attention_scores,
            training=training,
        )
        # Scores only when asked: without them a long restricted layer
        # computes only its band (MultiHeadAttention, sliding_window).
        x, scores = out if return_attention_scores else (out, None)
        x = add_norm(self, self.self_attention_norm, residual, x, training)
        # Position-wise feed-forward
        residual = x
        x = pre_norm(self, self.feed_forward_norm, x)
        x = self.feed_forward(x, training=training)
        x = add_norm(self, self.feed_forward_norm, residual, x, training)
        return (x, scores) if return_attention_scores else x

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
        )
        return config

    def compute_output_spec(self, *args, **kwargs):
        return keras.Operation.compute_output_spec(self, *args, **kwargs)

    def compute_output_shape(self, input_shape):
        return input_shape
