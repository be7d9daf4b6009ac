"""Multi-head attention, section 3.2.2 of the paper."""

import math

import keras
from keras import ops

from keras_transformer.layers.masking import band_mask, causal_mask
from keras_transformer.layers.residual import dense, leading_shape
from keras_transformer.layers.restricted_attention import restricted_attention
from keras_transformer.layers.scaled_dot_product_attention import (
    check_broadcastable,
    scaled_dot_product_attention,
)
from keras_transformer.validation import check_positive_int, check_rate
from keras_transformer.xla import xla_compiled


@keras.saving.register_keras_serializable(package="keras_transformer")
class MultiHeadAttention(keras.layers.MultiHeadAttention):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O.

    Each head is `Attention(Q W_i^Q, K W_i^K, V W_i^V)`. A subclass of
    `keras.layers.MultiHeadAttention`: the same arguments, weights (the
    `query`, `key`, `value` and `attention_output` `EinsumDense` sublayers,
    so `quantize("int8")`, `enable_lora` and dtype-policy maps work on
    them) and results, with what a Transformer needs added:

    - `key_dim` may be left out: `d_model // num_heads`, as in the paper;
    - a key/value cache for incremental decoding (`cache`,
      `cache_update_index`, `compute_cache`, `empty_cache`);
    - `(B, H, T, S)` attention scores also symbolically, in
      cross-attention too;
    - speed: one matmul for the Q, K and V projections of self-attention,
      XLA-compiled heads in training calls without attention dropout on
      TensorFlow (`keras_transformer.xla`), and only the band of a long
      `sliding_window` attention computed (`restricted_attention`).

    Those apply to `(B, T, D)` inputs attending over axis 1; with other
    `attention_axes`, `use_gate`, or an overridden `_compute_attention`,
    calls are Keras's own.

    Args:
        num_heads: `h`, number of attention heads.
        key_dim: `d_k`, size of each head's query and key; defaults to
            `d_model // num_heads`, where `d_model` is the query's last axis.
        value_dim: `d_v`, size of each head's value; defaults to `key_dim`.
        dropout: dropout rate on the attention weights.
        use_bias: whether the projections have biases.
        output_shape: size (or shape) of the output's last axes; defaults
            to the query's last axis.
        attention_axes: axes attention runs over, as in Keras; default: 1.
        sliding_window: restricted self-attention (Table 1, "restricted"):
            query `i` attends only to keys `j` with `|i - j| < sliding_window`
            (and `j <= i` as well with a causal mask), as in Keras. Positions
            count from the cache index in incremental decoding. On inputs of
            at least 32 windows whose length is known when traced (and
            without a cache, an `attention_mask`, attention dropout or
            returned scores) only the band is computed.
        flash_attention: as in Keras.
        kernel_initializer: of the projections' kernels, as in Keras.
        bias_initializer: of the projections' biases, as in Keras.
        kernel_regularizer: of the projections' kernels, as in Keras.
        bias_regularizer: of the projections' biases, as in Keras.
        activity_regularizer: of the layer's output, as in Keras.
        kernel_constraint: of the projections' kernels, as in Keras.
        bias_constraint: of the projections' biases, as in Keras.
        use_gate: a sigmoid gate on each head's output, as in Keras.
        seed: of the attention dropout, as in Keras.
        output_dim: the name of `output_shape` (an integer) in earlier
            versions of this library; still accepted.
        **kwargs: passed to `keras.layers.Layer`.

    Call arguments:
        query: `(B, T, D)`.
        value: `(B, S, D_v)`.
        key: `(B, S, D_k)`; defaults to `value`.
        attention_mask: boolean `(B, T, S)`, `True` = may attend; also
            `(T, S)` for every sequence or `(B, H, T, S)` per head.
        use_causal_mask: also forbid attending to later positions.
        return_attention_scores: also return the `(B, H, T, S)` weights.
        training: whether dropout is active.
        cache: `(keys, values)`, each `(B, H, L, K)` (heads first, the
            layout attention reads), of earlier positions.
            With `cache_update_index`, this call's keys and values are written
            into the cache at that index and attention reads the whole cache
            (mask unwritten slots with `attention_mask`). Without it the cache
            is used as is: cross-attention over a precomputed memory.
        cache_update_index: integer position where this call's keys and values
            go in `cache`.
        query_mask, value_mask, key_mask: `(B, T)` / `(B, S)` padding masks;
            filled in from the inputs' Keras masks.

    Returns:
        `(B, T, *output_shape)`; with `return_attention_scores`, a tuple
        `(output, scores)`; with `cache`, the updated cache is appended.

    Example:

    >>> import numpy as np
    >>> mha = MultiHeadAttention(num_heads=2)
    >>> x = np.zeros((1, 3, 8), "float32")
    >>> memory = np.zeros((1, 5, 8), "float32")
    >>> out, scores = mha(x, memory, return_attention_scores=True)
    >>> tuple(out.shape), tuple(scores.shape)
    ((1, 3, 8), (1, 2, 3, 5))
    >>> tuple(mha.query_dense.kernel.shape)  # (d_model, h, d_k)
    (8, 2, 4)

    References:
        Vaswani et al. 2017, "Attention Is All You Need", section 3.2.2.
    """

    def __init__(
        self,
        num_heads,
        key_dim=None,
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
        output_dim=None,
        **kwargs,
    ):
        check_positive_int("num_heads", num_heads)
        if output_dim is not None:
            check_positive_int("output_dim", output_dim)
            if output_shape is not None:
                raise ValueError(
                    "Pass `output_shape` or its old name `output_dim`, not both. "
                    f"Received: output_shape={output_shape}, output_dim={output_dim}"
                )
            output_shape = output_dim
        check_rate("dropout", dropout)
        if sliding_window is not None:
            check_positive_int("sliding_window", sliding_window)
        super().__init__(
            num_heads,
            1 if key_dim is None else key_dim,  # Known at build otherwise.
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
        self._arguments = {"key_dim": key_dim, "value_dim": value_dim}
        if key_dim is None:
            self._key_dim, self._value_dim = None, value_dim

    @property
    def sliding_window(self):
        return self._sliding_window

    def build(self, query_shape, value_shape=None, key_shape=None):
        value_shape = query_shape if value_shape is None else value_shape
        key_shape = value_shape if key_shape is None else key_shape
        _check_key_value(value_shape, key_shape)
        for name, shape in (
            ("query", query_shape),
            ("value", value_shape),
            ("key", key_shape),
        ):
            if len(shape) < 3:
                raise ValueError(
                    f"`{name}` must have rank 3 or more (batch_size, seq_len, "
                    f"..., dim). Received: {name}.shape={tuple(shape)}"
                )
        if self._key_dim is None:
            d_model = query_shape[-1]
            if d_model % self.num_heads:
                raise ValueError(
                    "d_model must be divisible by num_heads. "
                    f"Received: d_model={d_model}, num_heads={self.num_heads}"
                )
            self._key_dim = d_model // self.num_heads
            self._value_dim = self._value_dim or self._key_dim
            self._inverse_sqrt_key_dim = 1.0 / math.sqrt(self._key_dim)
        super().build(tuple(query_shape), tuple(value_shape), tuple(key_shape))

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
        if not self._own_path(query):
            if cache is not None:
                raise ValueError(
                    "`cache` needs (B, T, D) inputs attending over axis 1, "
                    "without use_gate or a custom _compute_attention. Received: "
                    f"query.shape={tuple(query.shape)}, "
                    f"attention_axes={self.attention_axes}"
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
        key_mask = value_mask if key_mask is None else key_mask
        # Project: (B, T, D) -> (B, T, H, K); keys/values (B, S, H, K), or
        # heads first (B, H, S, K) from and into a cache.
        if cache is not None and cache_update_index is None:
            q = self._project(self._query_dense, query)
            k, v = cache  # Precomputed memory (cross-attention).
        else:
            q, k, v = self._project_qkv(query, key, value)
            if cache is not None:
                k = _write(cache[0], heads_first(k), cache_update_index)
                v = _write(cache[1], heads_first(v), cache_update_index)
                key_mask = None  # Cached slots are masked by `attention_mask`.
        key_length = ops.shape(k)[1 if cache is None else 2]
        scores_shape = (q.shape[0], q.shape[1], k.shape[1 if cache is None else 2])
        mask = _heads_mask(attention_mask, scores_shape, self.num_heads)
        offset = 0 if cache_update_index is None else cache_update_index
        if use_causal_mask:
            causal = causal_mask(ops.shape(q)[1], key_length, offset)[:, None]
            mask = causal if mask is None else ops.logical_and(mask, causal)
        if self.sliding_window is not None:
            window = band_mask(
                ops.shape(q)[1], key_length, self.sliding_window, offset
            )[:, None]
            mask = window if mask is None else ops.logical_and(mask, window)
        if key_mask is not None:
            # (B, S) -> (B, 1, 1, S): padded keys, for every head and query.
            padded = ops.cast(key_mask, "bool")[:, None, None, :]
            mask = padded if mask is None else ops.logical_and(mask, padded)
        if query_mask is not None and cache is None:
            # (B, T) -> (B, 1, T, 1): padded queries attend to nothing, as in
            # Keras (their rows give zeros, Keras's softmax leaves them as if
            # unmasked: either way outputs at padding mean nothing).
            padded = ops.cast(query_mask, "bool")[:, None, :, None]
            mask = padded if mask is None else ops.logical_and(mask, padded)
        if self._blocked_window(q, k, cache, attention_mask, training) and not (
            return_attention_scores
        ):
            # Restricted attention on long inputs: only the band is computed.
            output = heads_first(
                restricted_attention(
                    heads_first(q),
                    heads_first(k),
                    heads_first(v),
                    self.sliding_window,
                    causal=use_causal_mask,
                    key_mask=key_mask,
                )
            )
            if query_mask is not None:
                output = output * ops.cast(query_mask, output.dtype)[:, :, None, None]
        elif training and not self.dropout:
            # Training without attention dropout: the same computation,
            # compiled by XLA (it fuses the head transposes and runs the many
            # small batch matmuls faster; with the compiled loss, the
            # benchmark's step took 1001 instead of 1210 ms,
            # docs/benchmarks.md). Only where shapes are static: XLA
            # compiles per shape. Decoding keeps the plain ops.
            output, scores = _compiled_attend(q, k, v, mask)
        else:
            if cache is None:
                k, v = heads_first(k), heads_first(v)
            output, scores = _attend_heads(
                q,
                k,
                v,
                mask,
                dropout=lambda w: self._dropout_layer(w, training=training),
            )
        # Concat heads and W^O: (B, T, H, V) -> (B, T, H * V) -> (B, T, D)
        output = self._project(self._output_dense, output, input_rank=2)
        results = (output,)
        if return_attention_scores:
            results += (scores,)
        if cache is not None:
            results += ((k, v),)
        return results[0] if len(results) == 1 else results

    def _own_path(self, query):
        """Whether this call is ours: (B, T, D) attending over axis 1."""
        return (
            len(query.shape) == 3
            and tuple(self.attention_axes or (1,)) == (1,)
            and not self._use_gate
            and type(self)._compute_attention
            is keras.layers.MultiHeadAttention._compute_attention
        )

    def _blocked_window(self, q, k, cache, attention_mask, training):
        """Whether `restricted_attention` computes this call, in O(n * r).

        For a sliding window, without a cache, an `attention_mask` or
        attention dropout, on inputs of one static length of at least 32
        windows: shorter, the full scores cost less than the blocks (with
        r = 16 on 2 CPU cores the blocks were 2x slower at n = 64 and paid
        from n = 512 on, 5.8x faster at 4096; benchmarks/restricted_attention.py).
        """
        length = q.shape[1]
        return (
            self.sliding_window is not None
            and cache is None
            and attention_mask is None
            and not (training and self.dropout)
            and length is not None
            and length == k.shape[1]
            and length >= 32 * self.sliding_window
        )

    def compute_cache(self, value, key=None):
        """Keys and values of `value` for cross-attention decoding.

        Args:
            value: `(B, S, D)` memory (the encoder output).
            key: `(B, S, D)`; defaults to `value`.

        Returns:
            `(keys, values)`, each `(B, H, S, K)`, to pass as `cache`.
        """
        if key is None and self._plain():
            k, v = _dense_split(value, self._key_dense, self._value_dense)
        else:
            k = self._project(self._key_dense, value if key is None else key)
            v = self._project(self._value_dense, value)
        # In the compute dtype, as calls of the layer see their inputs (the
        # projections of a float32 memory by float32 kernels are float32).
        return tuple(heads_first(ops.cast(t, self.compute_dtype)) for t in (k, v))

    def empty_cache(self, batch_size, max_length):
        """Zero `(keys, values)`, `(B, H, max_length, K)`, for self-attention."""
        k_shape = (batch_size, self.num_heads, max_length, self._key_dim)
        v_shape = (batch_size, self.num_heads, max_length, self._value_dim)
        return (
            ops.zeros(k_shape, self.compute_dtype),
            ops.zeros(v_shape, self.compute_dtype),
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
            "query": self._query_dense,
            "key": self._key_dense,
            "value": self._value_dense,
            "attention_output": self._output_dense,
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

    def _plain(self):
        """Whether the projections are plain float kernels (we may fuse them)."""
        return all(
            layer.quantization_mode is None and not layer.lora_enabled
            for layer in (
                self._query_dense,
                self._key_dense,
                self._value_dense,
                self._output_dense,
            )
        )

    def _project(self, layer, x, input_rank=1):
        # (B, T, D) x (D, H, K) -> (B, T, H, K): one 2-D matmul. Quantized or
        # LoRA projections compute themselves.
        if not self._plain():
            return layer(_unmasked(x))
        return dense(x, layer.kernel, layer.bias, input_rank)

    def _project_qkv(self, query, key, value):
        """Q, K, V projections; one matmul where they share an input."""
        layers = (self._query_dense, self._key_dense, self._value_dense)
        if not self._plain():
            key = value if key is None else key
            return tuple(
                layer(_unmasked(x))
                for layer, x in zip(layers, (query, key, value), strict=True)
            )
        if key is None and value is query:  # Self-attention: fused Q, K, V.
            return _dense_split(query, *layers)
        if key is None:  # Keys and values of one memory: fused K, V.
            k, v = _dense_split(value, *layers[1:])
            return self._project(layers[0], query), k, v
        return tuple(
            self._project(layer, x)
            for layer, x in zip(layers, (query, key, value), strict=True)
        )

    def load_own_variables(self, store):
        """Also loads files of earlier versions, whose weights were this layer's.

        They were `query_kernel`, `query_bias`, `key_kernel`, ...,
        `output_bias`: the same arrays, in the order of the sublayers'.
        """
        if len(store.keys()) == 0:
            return super().load_own_variables(store)
        sublayers = [self._query_dense, self._key_dense, self._value_dense]
        sublayers.append(self._output_dense)
        variables = [v for layer in sublayers for v in layer.weights]
        if len(store.keys()) != len(variables):
            raise ValueError(
                f"Layer '{self.name}' expected {len(variables)} variables (in "
                f"an earlier version's file), but received {len(store.keys())}"
            )
        for i, variable in enumerate(variables):
            variable.assign(store[str(i)])
        for layer in sublayers:  # Their own (absent) entries: nothing to load.
            layer.load_own_variables = _skip_once(layer)

    def get_config(self):
        config = super().get_config()
        config.update(self._arguments)
        return config

    def compute_output_spec(self, *args, **kwargs):
        # Trace `call`, so the optional scores (B, H, T, S) and cache outputs
        # get their true symbolic shapes (T != S in cross-attention). Called
        # outside `__call__` the kernels are not autocast: every float output
        # is in the compute dtype, as in a call.
        spec = keras.Operation.compute_output_spec(self, *args, **kwargs)
        return keras.tree.map_structure(
            lambda x: (
                keras.KerasTensor(x.shape, self.compute_dtype)
                if "float" in x.dtype
                else x
            ),
            spec,
        )

    def compute_output_shape(self, query_shape, value_shape=None, key_shape=None):
        if value_shape is not None and key_shape is not None:
            _check_key_value(value_shape, key_shape)
        output_shape = self._output_shape or tuple(query_shape)[-1:]
        return (*tuple(query_shape)[:-1], *output_shape)


def _unmasked(x):
    """`x` without its Keras mask, for sublayers that take none (a copy)."""
    return x if getattr(x, "_keras_mask", None) is None else ops.copy(x)


def _skip_once(layer):
    """A `load_own_variables` that loads nothing, then is gone."""

    def skip(store):
        del layer.load_own_variables

    return skip


def _check_key_value(value_shape, key_shape):
    """Keys and values: one per position, whatever their sizes."""
    value_axes, key_axes = tuple(value_shape)[1:-1], tuple(key_shape)[1:-1]
    if len(value_axes) != len(key_axes) or any(
        v is not None and k is not None and v != k
        for v, k in zip(value_axes, key_axes, strict=False)
    ):
        raise ValueError(
            "All dimensions of `value` and `key`, except the last one, must "
            f"be equal. Received: value_shape={tuple(value_shape)} and "
            f"key_shape={tuple(key_shape)}"
        )


def _heads_mask(attention_mask, scores_shape, num_heads):
    """`attention_mask` as a mask broadcastable to `(B, H, T, S)`, or None.

    `(T, S)` is one mask for every sequence, `(B, T, S)` one per sequence
    (both shared by the heads) and `(B, H, T, S)` one per head: the ranks
    `keras.layers.MultiHeadAttention` accepts, with the same meaning.
    """
    if attention_mask is None:
        return None
    batch, queries, keys = scores_shape
    rank = len(attention_mask.shape)
    targets = {
        2: (queries, keys),
        3: (batch, queries, keys),
        4: (batch, num_heads, queries, keys),
    }
    if rank not in targets:
        raise ValueError(
            "`attention_mask` must have shape (T, S), (B, T, S) or "
            f"(B, num_heads, T, S). Received: attention_mask.shape="
            f"{tuple(attention_mask.shape)}"
        )
    check_broadcastable("attention_mask", tuple(attention_mask.shape), targets[rank])
    mask = ops.cast(attention_mask, "bool")
    # Add the missing leading axes explicitly: broadcasting a (T, S) mask
    # against (B, H, T, S) scores would work, but a (B, T, S) one would put
    # T on the heads axis.
    if rank == 2:
        return mask[None, None]
    return mask[:, None] if rank == 3 else mask


def _attend(q, k, v, mask, dropout=None):
    """Attention of each head: `(B, T, H, K)` queries -> `(B, T, H, V)`."""
    return _attend_heads(q, heads_first(k), heads_first(v), mask, dropout)


def _attend_heads(q, k, v, mask, dropout=None):
    """`(B, T, H, K)` queries, heads-first `(B, H, S, K)` keys and values."""
    # (B, H, T, K) x (B, H, S, K) -> (B, H, T, S)
    output, scores = scaled_dot_product_attention(
        heads_first(q), k, v, mask=mask, dropout=dropout
    )
    return heads_first(output), scores  # (B, T, H, V)


def heads_first(x):
    """`(B, T, H, K)` <-> `(B, H, T, K)`."""
    return ops.transpose(x, (0, 2, 1, 3))


_compiled_attend = xla_compiled(_attend)


def _write(cache, update, index):
    """Writes `update` (B, H, t, K) into `cache` (B, H, L, K) at `index`."""
    if update.shape[2] == 1:
        # One position, as in decoding: an elementwise select. TensorFlow
        # runs `slice_update` outside XLA by compiling it with XLA for each
        # new shape, which took more time than the decoding itself.
        at_index = ops.arange(ops.shape(cache)[2])[:, None] == index  # (L, 1)
        return ops.where(at_index, update, cache)
    return ops.slice_update(cache, [0, 0, index, 0], update)


def _dense_split(x, *layers):
    """Several `(D, H, K)` projections of one input as one wide matmul."""
    kernels = [layer.kernel for layer in layers]
    biases = [layer.bias for layer in layers]
    d, shapes = x.shape[-1], [kernel.shape[1:] for kernel in kernels]
    widths = [math.prod(shape) for shape in shapes]
    kernel = ops.concatenate([ops.reshape(w, (d, -1)) for w in kernels], axis=-1)
    bias = None
    if biases[0] is not None:
        bias = ops.concatenate([ops.reshape(b, (-1,)) for b in biases], axis=-1)
    lead = leading_shape(x, len(x.shape) - 1)
    y = ops.matmul(ops.reshape(x, (-1, d)), kernel)
    if bias is not None:
        y = y + bias
    ends = [sum(widths[: i + 1]) for i in range(len(widths) - 1)]
    return tuple(
        ops.reshape(part, (*lead, *shape))
        for part, shape in zip(ops.split(y, ends, axis=-1), shapes, strict=True)
    )
