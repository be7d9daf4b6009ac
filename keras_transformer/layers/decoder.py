"""The decoder stack, section 3.1 of the paper."""

import keras
from keras import ops

from keras_transformer.layers.decoder_layer import DecoderLayer
from keras_transformer.layers.transformer_stack import TransformerStack


@keras.saving.register_keras_serializable(package="keras_transformer")
class Decoder(TransformerStack):
    """Positional encoding, dropout, then `N` identical `DecoderLayer`s.

    The input is a sequence of target embeddings (e.g. from the same
    `SharedEmbedding` as the encoder's), the output the hidden states that
    `SharedEmbedding(..., reverse=True)` turns into logits. With
    `norm_first=True` a final LayerNorm follows the stack.

    Called without `memory` from the first call on, the stack is a
    decoder-only (GPT-style) language model body: causal self-attention and
    feed-forward layers, no cross-attention.

    For incremental decoding, `init_cache(memory, max_length)` gives one
    `(self_cache, cross_cache)` pair per layer; each call with `cache` and
    `cache_index=t` then processes the new position(s) only.

    The arguments are those of `TransformerStack`: `num_layers`, `num_heads`,
    `d_ff`, `dropout`, `attention_dropout`, `max_length`, `learned_positions`,
    and, for every layer, the other arguments of `TransformerLayer`.

    Call arguments:
        x: `(B, T, D)` target embeddings.
        memory: `(B, S, D)` encoder output; `None` for a decoder-only
            stack.
        x_mask: `(B, T)` target padding mask; defaults to `x`'s Keras mask.
        memory_mask: `(B, S)` source padding mask; defaults to `memory`'s
            Keras mask.
        cache: list of per-layer caches from `init_cache`, or `None`.
        cache_index: position of `x[:, 0]` when decoding with `cache`.
        training: whether dropout is active.
        return_attention_scores: also return
            `{"self_attention": [...], "cross_attention": [...]}`, one
            `(B, H, T, T)` / `(B, H, T, S)` tensor per layer (no
            `"cross_attention"` decoder-only); not with `cache`.

    Returns:
        `(B, T, D)`; with `return_attention_scores`, `(outputs, scores)`;
        with `cache`, `(outputs, updated cache)`.

    Example:

    >>> import numpy as np
    >>> from keras_transformer.layers import SharedEmbedding
    >>> embedding = SharedEmbedding(vocab_size=10, d_model=8)
    >>> memory = embedding(np.array([[5, 6, 7, 0]]))
    >>> x = embedding(np.array([[2, 8, 9]]))
    >>> y = Decoder(num_layers=2, num_heads=2, d_ff=16)(x, memory)
    >>> tuple(embedding(y, reverse=True).shape)
    (1, 3, 10)

    References:
        Vaswani et al. 2017, "Attention Is All You Need", sections 3.1, 5.4.
    """

    layer_class = DecoderLayer

    def build(self, x_shape, memory_shape=None):
        # Without a memory shape: a decoder-only stack, no cross-attention.
        super().build(x_shape, memory_shape)

    def call(
        self,
        x,
        memory=None,
        x_mask=None,
        memory_mask=None,
        cache=None,
        cache_index=None,
        training=None,
        return_attention_scores=False,
    ):
        start = 0 if cache is None else cache_index
        x = self.positional_encoding(x, start_index=start)
        x = self.embedding_dropout(x, training=training)
        scores, new_cache = {}, []
        for i, layer in enumerate(self.layers):
            x = layer(
                x,
                memory,
                x_mask=x_mask,
                memory_mask=memory_mask,
                cache=None if cache is None else cache[i],
                cache_index=cache_index,
                training=training,
                return_attention_scores=return_attention_scores,
            )
            if cache is not None:
                x, layer_cache = x
                new_cache.append(layer_cache)
            elif return_attention_scores:
                x, layer_scores = x
                for kind, weights in layer_scores.items():
                    scores.setdefault(kind, []).append(weights)
        if self.final_norm is not None:
            x = self.final_norm(x)
        if cache is not None:
            return x, new_cache
        return (x, scores) if return_attention_scores else x

    def init_cache(self, memory, max_length, batch_size=None):
        """Per-layer `(self_cache, cross_cache)` for incremental decoding.

        Args:
            memory: `(B, S, D)` encoder output; `None` for a decoder-only
                stack, whose cross caches are `None`.
            max_length: number of target positions to reserve.
            batch_size: `B`; needed only without `memory`.

        Returns:
            A list of `num_layers` pairs of `(keys, values)` tensors.
        """
        has_cross_attention = self.layers[0].cross_attention is not None
        if has_cross_attention and memory is None:
            raise ValueError(
                "This decoder has cross-attention: init_cache needs `memory`"
            )
        if memory is not None and not has_cross_attention:
            raise ValueError(
                "This decoder is decoder-only (built without a memory): "
                "call init_cache(None, max_length, batch_size=...)"
            )
        if batch_size is None:
            if memory is None:
                raise ValueError("init_cache needs `batch_size` when `memory` is None")
            batch_size = ops.shape(memory)[0]
        return [
            (
                layer.empty_self_cache(batch_size, max_length),
                layer.compute_cross_cache(memory),
            )
            for layer in self.layers
        ]

    def compute_output_shape(self, x_shape, memory_shape=None):
        return x_shape
