"""The encoder stack, section 3.1 of the paper."""

import keras

from keras_transformer.layers.encoder_layer import EncoderLayer
from keras_transformer.layers.transformer_stack import TransformerStack


@keras.saving.register_keras_serializable(package="keras_transformer")
class Encoder(TransformerStack):
    """Positional encoding, dropout, then `N` identical `EncoderLayer`s.

    The input is a sequence of embeddings (e.g. from `SharedEmbedding`, whose
    Keras mask marks the padding), so one embedding matrix can be shared with
    the decoder. With `norm_first=True` a final LayerNorm follows the stack.

    The arguments are those of `TransformerStack`: `num_layers`, `num_heads`,
    `d_ff`, `dropout`, `attention_dropout`, `max_length`, `learned_positions`,
    and, for every layer, the other arguments of `TransformerLayer`.

    Call arguments:
        x: `(B, S, D)` embeddings.
        mask: `(B, S)` padding mask; defaults to the Keras mask of `x`.
        training: whether dropout is active.
        return_attention_scores: also return a list with each layer's
            `(B, H, S, S)` self-attention weights.
        attention_mask: boolean `(B, S, S)` (or `(S, S)`), `True` = may
            attend, for every layer; combined with the padding mask.

    Returns:
        `(B, S, D)`, or `(outputs, scores)`.

    Example:

    >>> import numpy as np
    >>> from keras_transformer.layers import SharedEmbedding
    >>> ids = np.array([[5, 6, 7, 0]])
    >>> x = SharedEmbedding(vocab_size=10, d_model=8)(ids)
    >>> memory = Encoder(num_layers=2, num_heads=2, d_ff=16)(x)
    >>> tuple(memory.shape)
    (1, 4, 8)

    References:
        Vaswani et al. 2017, "Attention Is All You Need", sections 3.1, 5.4.
    """

    layer_class = EncoderLayer

    def build(self, input_shape):
        super().build(input_shape)

    def call(
        self,
        x,
        mask=None,
        training=None,
        return_attention_scores=False,
        attention_mask=None,
    ):
        x = self.positional_encoding(x)
        x = self.embedding_dropout(x, training=training)
        scores = []
        for layer in self.layers:
            out = layer(
                x,
                mask=mask,
                attention_mask=attention_mask,
                training=training,
                return_attention_scores=return_attention_scores,
            )
            x = out[0] if return_attention_scores else out
            if return_attention_scores:
                scores.append(out[1])
        if self.final_norm is not None:
            x = self.final_norm(x)
        return (x, scores) if return_attention_scores else x

    def compute_output_shape(self, input_shape):
        return input_shape
