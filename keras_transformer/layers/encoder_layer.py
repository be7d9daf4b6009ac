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
    `sliding_window`, `key_dim`, `activation_dropout`, and
    `keras.layers.Layer`'s.

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

    def build(self, x_shape):
        super().build(x_shape)  # No memory: no encoder-decoder attention.

    def call(
        self,
        x,
        mask=None,
        training=None,
        return_attention_scores=False,
        attention_mask=None,
    ):
        # Multi-head self-attention
        x, scores = self.attention_sublayer(
            self.self_attention,
            self.self_attention_norm,
            x,
            query_mask=mask,
            value_mask=mask,
            attention_mask=attention_mask,
            return_attention_scores=return_attention_scores,
            training=training,
        )
        # Position-wise feed-forward
        x = self.feed_forward_sublayer(x, training)
        return (x, scores) if return_attention_scores else x

    def compute_output_shape(self, input_shape):
        return input_shape
