"""Multi-head attention, section 3.2.2 of the paper."""

import keras
from keras import ops

from keras_transformer.layers.masking import band_mask, causal_mask
from keras_transformer.layers.scaled_dot_product_attention import (
    scaled_dot_product_attention,
)


@keras.saving.register_keras_serializable(package="keras_transformer")
class MultiHeadAttention(keras.layers.MultiHeadAttention):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O.

    Each head is `Attention(Q W_i^Q, K W_i^K, V W_i^V)`. This is
    `keras.layers.MultiHeadAttention` (the same arguments, weights, masks and
    results: called without `cache`, a call is Keras's own), with what
    decoding a Transformer needs added, as keras-hub's
    `CachedMultiHeadAttention` adds it:

    - a key/value cache for incremental decoding (`cache`,
      `cache_update_index`, `compute_cache`, `empty_cache`);
    - `(B, H, T, S)` attention scores also symbolically in a Functional
      model, in cross-attention too (Keras reports `(B, H, T, T)`).

    The projections are Keras's `query`, `key`, `value` and
    `attention_output` `EinsumDense` sublayers, so `quantize("int8")`,
    `enable_lora` and dtype-policy maps work on them.

    Args:
        num_heads: `h`, number of attention heads.
        key_dim: `d_k`, size of each head's query and key (the paper:
            `d_model // num_heads`).
        value_dim: `d_v`, size of each head's value; defaults to `key_dim`.
        dropout: dropout rate on the attention weights.
        use_bias: whether the projections have biases.
        output_shape: size (or shape) of the output's last axes; defaults
            to the query's last axis.
        attention_axes: axes attention runs over, as in Keras; default: 1.
        sliding_window: restricted self-attention (Table 1, "restricted"):
            query `i` attends only to keys `j` with `|i - j| < sliding_window`
            (and `j <= i` as well with a causal mask), as in Keras. With a
            cache, positions count from `cache_update_index`.
        flash_attention: as in Keras.
        kernel_initializer: of the projections' kernels, as in Keras.
        bias_initializer: of the projections' biases, as in Keras.
        kernel_regularizer: of the projections' kernels, as in Keras.
        bias_regularizer: of the projections' biases, as in Keras.
        activity_regularizer: of the layer's output, as in Keras.
        kernel_constraint: of the projections' kernels, as in Keras.
        bias_constraint: of the projections' biases, as in Keras.
        use_gate: a sigmoid gate on each head's output, as in Keras (not
            with a cache).
        seed: of the attention dropout, as in Keras.
        **kwargs: passed to `keras.layers.Layer`.

    Call arguments:
        query: `(B, T, D)`.
        value: `(B, S, D_v)`.
        key: `(B, S, D_k)`; defaults to `value`.
        query_mask: `(B, T)` padding mask of the queries. Keras's layer
            takes it from the query's Keras mask (an explicit one changes
            nothing there; outputs at padded queries mean nothing either
            way); not used with `cache`.
        value_mask: `(B, S)` padding mask of the keys and values; filled in
            from `value`'s Keras mask.
        key_mask: `(B, S)` padding mask of the keys; filled in from `key`'s
            Keras mask.
        attention_mask: boolean `(B, T, S)`, `True` = may attend; also
            `(T, S)` for every sequence or `(B, H, T, S)` per head.
        return_attention_scores: also return the `(B, H, T, S)` weights.
        training: whether dropout is active.
        use_causal_mask: also forbid attending to later positions (with
            `cache_update_index`, query `i` is position
            `cache_update_index + i`).
        cache: `(keys, values)`, each `(B, H, L, K)` (heads first, the
            layout the attention reads, so a decoding step moves no cache),
            from `empty_cache` or `compute_cache`. Without
            `cache_update_index` the cache is used as is and `key`/`value`
            are not read: cross-attention over a precomputed memory
            (`value_mask` still masks its padding). With it, this call's
            keys and values are written into the cache at that index and
            attention reads all `L` slots: slots not written yet must be
            masked, by `use_causal_mask` or `attention_mask` (`value_mask`
            and `key_mask`, of this call's positions, are not used). A
            cached call is for decoding: no attention dropout.
        cache_update_index: position of `query[:, 0]` (and of this call's
            keys and values) in `cache`.

    Returns:
        `(B, T, *output_shape)`; with `return_attention_scores`, a tuple
        `(output, scores)`; with `cache`, the updated cache is appended.

    Example:

    >>> import numpy as np
    >>> mha = MultiHeadAttention(num_heads=2, key_dim=4)
    >>> x = np.zeros((1, 3, 8), "float32")
    >>> memory = np.zeros((1, 5, 8), "float32")
    >>> out, scores = mha(x, memory, return_attention_scores=True)
    >>> tuple(out.shape), tuple(scores.shape)
    ((1, 3, 8), (1, 2, 3, 5))
    >>> tuple(mha.query_dense.kernel.shape)  # (d_model, h, d_k)
    (8, 2, 4)

    Incremental decoding, one position per step:

    >>> cache = mha.empty_cache(batch_size=1, max_length=3)
    >>> step = x[:, :1]
    >>> out, cache = mha(step, step, use_causal_mask=True, cache=cache,
    ...                  cache_update_index=0)
    >>> tuple(cache[0].shape)  # (B, h, L, d_k)
    (1, 2, 3, 4)

    References:
        Vaswani et al. 2017, "Attention Is All You Need", section 3.2.2.
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        dropout=0.0,
        use_bias=True,
        output_shape=None,
        attention_axes=None,
        sliding_window=None,
        flash_attention=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        activity_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        use_gate=False,
        seed=None,
        **kwargs,
    ):
        super().__init__(
            num_heads,
            key_dim,
            value_dim=value_dim,
            dropout=dropout,
            use_bias=use_bias,
            output_shape=output_shape,
            attention_axes=attention_axes,
            sliding_window=sliding_window,
            flash_attention=flash_attention,
            kernel_initializer=kernel_initializer,
            bias_initializer=bias_initializer,
            kernel_regularizer=kernel_regularizer,
            bias_regularizer=bias_regularizer,
            activity_regularizer=activity_regularizer,
            kernel_constraint=kernel_constraint,
            bias_constraint=bias_constraint,
            use_gate=use_gate,
            seed=seed,
            **kwargs,
        )
        # Keras keeps these two private; the cached call needs them.
        self.sliding_window = sliding_window
        self.use_gate = use_gate

    def call(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        key_mask=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
        use_causal_mask=False,
        cache=None,
        cache_update_index=None,
    ):
        if cache is None:
            if cache_update_index is not None:
                raise ValueError(
                    "`cache_update_index` needs a `cache`. Received: "
                    f"cache=None, cache_update_index={cache_update_index}"
                )
            return super().call(
                query,
                value,
                key=key,
                query_mask=query_mask,
                value_mask=value_mask,
                key_mask=key_mask,
                attention_mask=attention_mask,
                return_attention_scores=return_attention_scores,
                training=training,
                use_causal_mask=use_causal_mask,
            )
        self._check_cache_call(query, training)
        # Q: (B, T, D) -> (B, T, H, K) -> heads first, (B, H, T, K)
        query = _heads_first(self.query_dense(_unmasked(query)))
        if cache_update_index is None:
            # Cross-attention: the memory's keys and values, (B, H, S, K).
            key, value = cache
        else:
            # Self-attention: this call's keys and values (B, H, T, K) go into
            # the cache at `cache_update_index`; attention reads all L slots.
            new_key = self.key_dense(_unmasked(value if key is None else key))
            new_value = self.value_dense(_unmasked(value))
            key = _write(cache[0], _heads_first(new_key), cache_update_index)
            value = _write(cache[1], _heads_first(new_value), cache_update_index)
            value_mask = key_mask = None  # Of this call's positions, not L.
        cache = (key, value)
        mask = self._cache_attention_mask(
            query,
            key,
            attention_mask,
            value_mask,
            key_mask,
            use_causal_mask,
            offset=0 if cache_update_index is None else cache_update_index,
        )
        # softmax(Q Kᵀ / √d_k) V per head: (B, H, T, K) x (B, H, L, K)
        output, scores = scaled_dot_product_attention(query, key, value, mask)
        # Concat(head_1, ..., head_h) W^O: (B, T, H, V) -> (B, T, D)
        output = self.output_dense(_heads_first(output))
        if return_attention_scores:
            return output, scores, cache
        return output, cache

    def _check_cache_call(self, query, training):
        if len(query.shape) != 3 or self.attention_axes != (1,) or self.use_gate:
            raise ValueError(
                "`cache` needs (B, T, D) inputs attending over axis 1, without "
                f"use_gate. Received: query.shape={tuple(query.shape)}, "
                f"attention_axes={self.attention_axes}, use_gate={self.use_gate}"
            )
        if training and self.dropout:
            raise ValueError(
                "A cache is for decoding: no attention dropout. Received: "
                f"training={training}, dropout={self.dropout}"
            )

    def _cache_attention_mask(
        self, query, key, attention_mask, value_mask, key_mask, use_causal_mask, offset
    ):
        """The masks of a cached call as one boolean mask, or `None`.

        Broadcastable to the `(B, H, T, S)` scores; query `i` is position
        `offset + i`.
        """
        masks = [
            ops.cast(padding, "bool")[:, None, :]  # (B, 1, S)
            for padding in (value_mask, key_mask)
            if padding is not None
        ]
        length, key_length = ops.shape(query)[2], ops.shape(key)[2]
        if use_causal_mask:
            masks.append(causal_mask(length, key_length, offset))  # (1, T, S)
        if self.sliding_window is not None:
            window = band_mask(length, key_length, self.sliding_window, offset)
            masks.append(window)  # (1, T, S)
        if attention_mask is not None:
            masks.append(ops.cast(attention_mask, "bool"))
        mask = None
        for other in masks:
            if len(other.shape) == 2:
                other = other[None]  # (T, S) -> (1, T, S)
            if len(other.shape) == 3:
                other = other[:, None]  # (B, 1, T, S): the same for every head.
            mask = other if mask is None else ops.logical_and(mask, other)
        return mask

    def compute_cache(self, value, key=None):
        """Keys and values of a memory, for cross-attention decoding.

        Args:
            value: `(B, S, D)` memory (the encoder output).
            key: `(B, S, D)`; defaults to `value`.

        Returns:
            `(keys, values)`, each `(B, H, S, K)`, to pass as `cache`.
        """
        key = value if key is None else key
        return (
            _heads_first(self.key_dense(_unmasked(key))),
            _heads_first(self.value_dense(_unmasked(value))),
        )

    def empty_cache(self, batch_size, max_length):
        """Zero `(keys, values)`, `(B, H, max_length, K)`, for self-attention."""
        return (
            ops.zeros(
                (batch_size, self.num_heads, max_length, self.key_dim),
                self.compute_dtype,
            ),
            ops.zeros(
                (batch_size, self.num_heads, max_length, self.value_dim),
                self.compute_dtype,
            ),
        )

    def enable_lora(
        self, rank, lora_alpha=None, projections=("query", "value"), **kwargs
    ):
        """LoRA (Hu et al. 2021) on `projections`; all projections frozen.

        The kernels and biases of the four projections stop training; the
        named ones get trainable low-rank updates that start at zero, so
        outputs are unchanged until training (Keras's `EinsumDense.enable_lora`).

        Args:
            rank: rank of the update.
            lora_alpha: its scale is `lora_alpha / rank`; default `rank`.
            projections: any of "query", "key", "value", "attention_output".
            **kwargs: passed to `EinsumDense.enable_lora` (initializers).
        """
        if not self.built:
            raise ValueError(f"Build layer '{self.name}' before enable_lora.")
        layers = {
            "query": self.query_dense,
            "key": self.key_dense,
            "value": self.value_dense,
            "attention_output": self.output_dense,
        }
        unknown = sorted(set(projections) - set(layers))
        if unknown:
            raise ValueError(
                f"`projections` must name {sorted(layers)}. Received: {unknown}"
            )
        for layer in layers.values():
            for variable in layer.weights:
                variable.trainable = False
        for name in projections:
            layers[name].enable_lora(rank, lora_alpha=lora_alpha, **kwargs)

    def compute_output_spec(self, *args, **kwargs):
        # Trace `call`, so the scores (B, H, T, S) and the cache get their
        # true symbolic shapes (Keras's own spec has T for S). Called outside
        # `__call__` the kernels are not autocast: every float output is in
        # the compute dtype, as in a call.
        spec = keras.Operation.compute_output_spec(self, *args, **kwargs)
        return keras.tree.map_structure(
            lambda x: (
                keras.KerasTensor(x.shape, self.compute_dtype)
                if "float" in x.dtype
                else x
            ),
            spec,
        )


def _unmasked(x):
    """`x` as a new tensor, without the Keras mask it may carry.

    The projections take no mask (Keras warns that they drop it); Keras's
    own call takes the masks off its inputs for the same reason.
    """
    return ops.copy(x)


def _heads_first(x):
    """`(B, T, H, K)` <-> `(B, H, T, K)`."""
    return ops.transpose(x, (0, 2, 1, 3))


def _write(cache, update, index):
    """`cache` (B, H, L, K) with `update` (B, H, t, K) at positions `index...`."""
    if update.shape[2] == 1:
        # One position, as in decoding: an elementwise select. TensorFlow ran
        # `slice_update` by compiling it with XLA for each new shape, which
        # took longer than the decoding step itself.
        at_index = ops.arange(ops.shape(cache)[2])[:, None] == index
        return ops.where(at_index, update, cache)  # (L, 1) selects slots.
    return ops.slice_update(cache, (0, 0, index, 0), update)
