"""One layer of the decoder stack, section 3.1 of the paper."""

import keras

from keras_transformer.layers.transformer_layer import TransformerLayer


@keras.saving.register_keras_serializable(package="keras_transformer")
class DecoderLayer(TransformerLayer):
    """Masked self-attention, encoder-decoder attention, feed-forward.

    Each of the three sublayers is residual, with dropout and LayerNorm as in
    `EncoderLayer` (post-LN by default, pre-LN with `norm_first=True`). The
    self-attention is causal: position `t` sees target positions `<= t` only.

    Called without `memory` from the first call on (or built with
    `memory_shape=None`), the layer is a decoder-only (GPT-style) block:
    causal self-attention and the feed-forward network, no cross-attention.

    For incremental decoding pass `cache=(self_cache, cross_cache)` and
    `cache_index=t`: `x` holds the new position(s) only, the self-attention
    keys/values are written into `self_cache` at `t`, and the cross-attention
    uses the precomputed `cross_cache` (see `compute_cross_cache`).

    The arguments are those of `TransformerLayer`: `num_heads`, `d_ff`,
    `dropout`, `attention_dropout`, `activation`, `norm_first`,
    `layer_norm_epsilon`, `kernel_initializer`, `bias_initializer`,
    `sliding_window` (self-attention only; the cross-attention sees the whole
    memory), `key_dim`, `activation_dropout`, and `keras.layers.Layer`'s.

    Call arguments:
        x: `(B, T, D)` target embeddings.
        memory: `(B, S, D)` encoder output; `None` for a decoder-only
            layer.
        x_mask: `(B, T)` target padding mask; defaults to `x`'s Keras mask.
        memory_mask: `(B, S)` source padding mask; defaults to `memory`'s
            Keras mask.
        cache: `(self_cache, cross_cache)`, each a `(keys, values)` pair of
            `(B, L, H, K)` tensors, or `None`.
        cache_index: position of `x[:, 0]` when decoding with `cache`.
        training: whether dropout is active.
        return_attention_scores: also return the attention weights, not
            with `cache`.

    Returns:
        `(B, T, D)`; with `return_attention_scores`, `(outputs, scores)`,
        scores a dict with the `"self_attention"` `(B, H, T, T)` and (unless
        decoder-only) `"cross_attention"` `(B, H, T, S)` weights; with
        `cache`, `(outputs, updated cache)`.

    Example:

    >>> import numpy as np
    >>> x, memory = np.zeros((2, 4, 8), "float32"), np.zeros((2, 6, 8), "float32")
    >>> _, scores = DecoderLayer(2, 16)(x, memory, return_attention_scores=True)
    >>> {kind: tuple(w.shape) for kind, w in scores.items()}
    {'self_attention': (2, 2, 4, 4), 'cross_attention': (2, 2, 4, 6)}

    A decoder-only block is the same layer called without a memory:

    >>> block = DecoderLayer(num_heads=2, d_ff=16)
    >>> tuple(block(x).shape), block.cross_attention is None
    ((2, 4, 8), True)

    References:
        Vaswani et al. 2017, "Attention Is All You Need", sections 3.1, 3.2.3.
    """

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
        _check_call(
            self.cross_attention is not None, memory, cache, return_attention_scores
        )
        self_cache, cross_cache = (None, None) if cache is None else cache
        scores = {}
        # Masked multi-head self-attention (with a cache, `x` starts at
        # position `cache_index`: its keys and values go into the cache)
        x, extra = self.attention_sublayer(
            self.self_attention,
            self.self_attention_norm,
            x,
            value_mask=x_mask,
            use_causal_mask=True,
            return_attention_scores=return_attention_scores,
            training=training,
            cache=self_cache,
            cache_update_index=cache_index,
        )
        if cache is not None:
            self_cache = extra
        elif return_attention_scores:
            scores["self_attention"] = extra
        # Multi-head encoder-decoder attention (its cache stays as it is)
        if self.cross_attention is not None:
            x, extra = self.attention_sublayer(
                self.cross_attention,
                self.cross_attention_norm,
                x,
                memory,
                value_mask=memory_mask,
                return_attention_scores=return_attention_scores,
                training=training,
                cache=cross_cache,
            )
            if cache is None and return_attention_scores:
                scores["cross_attention"] = extra
        # Position-wise feed-forward
        x = self.feed_forward_sublayer(x, training)
        if cache is not None:
            return x, (self_cache, cross_cache)
        return (x, scores) if return_attention_scores else x

    def compute_cross_cache(self, memory):
        """Cross-attention keys and values of `memory`, once per sentence.

        `None` for a decoder-only layer (built without a memory).
        """
        if self.cross_attention is None:
            return None
        return self.cross_attention.compute_cache(memory)

    def empty_self_cache(self, batch_size, max_length):
        """Zero self-attention keys and values for `max_length` positions."""
        return self.self_attention.empty_cache(batch_size, max_length)

    def compute_output_shape(self, x_shape, memory_shape=None):
        return x_shape


def _check_call(has_cross_attention, memory, cache, return_attention_scores):
    """The layer was built for the kind of call it gets (memory or none)."""
    given = memory is not None or (cache is not None and cache[1] is not None)
    if given and not has_cross_attention:
        raise ValueError(
            "This layer was built without a memory (decoder-only, no "
            "cross-attention); call it without `memory`."
        )
    if has_cross_attention and not given:
        raise ValueError(
            "This layer has cross-attention: `memory` (or a cache with its "
            "cross-attention keys and values) is required. Build a new "
            "layer by calling it without `memory` for a decoder-only block."
        )
    if cache is not None and return_attention_scores:
        raise ValueError(
            "Pass `cache` or `return_attention_scores`, not both: the weights "
            "of a decoded output come from one pass over it without a cache."
        )
