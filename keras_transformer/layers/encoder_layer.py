"""One layer of the encoder stack, section 3.1 of the paper."""

import keras

from keras_transformer.layers.transformer_layer import TransformerLayer


@keras.saving.register_keras_serializable(package="keras_transformer")
class EncoderLayer(TransformerLayer):
    """Self-attention, then a feed-forward network, each a residual sublayer.

    Each sublayer's output is `LayerNorm(x + Dropout(Sublayer(x)))` (post-LN,
    as in the paper) or, with `norm_first=True`,
    `x + Dropout(Sublayer(LayerNorm(x)))` (pre-LN).

    The arguments are those of `TransformerLayer`: `num_heads`, `d_ff`,
    `dropout`, `attention_dropout`, `activation`, `norm_first`,
    `layer_norm_epsilon`, `kernel_initializer`, `bias_initializer`,
    `sliding_window`, `key_dim`, and `keras.layers.Layer`'s.

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

    def build(self, input_shape):
        # Sublayers first, then norms: the order of the weights (and of the
        # optimizer's variables) in files of earlier versions.
        self.self_attention = self.make_attention(
            "self_attention", input_shape, input_shape, self.sliding_window
        )
        self.feed_forward = self.make_feed_forward(input_shape)
        self.self_attention_norm = self.make_norm("self_attention_norm", input_shape)
        self.feed_forward_norm = self.make_norm("feed_forward_norm", input_shape)
        self.residual_dropout = self.make_dropout("residual_dropout")

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
        x = self.pre_norm(self.self_attention_norm, x)
        x = self.self_attention(
            x,
            x,
            query_mask=mask,
            value_mask=mask,
            attention_mask=attention_mask,
            return_attention_scores=return_attention_scores,
            training=training,
        )
        x, scores = x if return_attention_scores else (x, None)
        x = self.add_norm(self.self_attention_norm, residual, x, training)
        # Position-wise feed-forward
        x = self.feed_forward_sublayer(x, training)
        return (x, scores) if return_attention_scores else x

    def compute_output_shape(self, input_shape):
        return input_shape
