"""Scaled dot-product attention, section 3.2.1 of the paper."""

import math

from keras import ops


def scaled_dot_product_attention(query, key, value, mask=None, dropout=None):
    """softmax(Q Kᵀ / √d_k) V over the last two axes.

    Any leading axes (batch, heads) broadcast. The softmax runs in float32
    even when the inputs are float16, and a query that may attend to nothing
    gets all-zero weights and output instead of NaN.

    Args:
        query: `(..., T, K)` tensor.
        key: `(..., S, K)` tensor.
        value: `(..., S, V)` tensor.
        mask: optional boolean tensor broadcastable to `(..., T, S)`;
            `True` = may attend.
        dropout: optional callable applied to the attention weights (e.g. a
            `keras.layers.Dropout` bound to `training`).

    Returns:
        Tuple `(output, weights)`: `(..., T, V)` and `(..., T, S)`.

    Example:

    >>> import numpy as np
    >>> q = k = v = np.eye(2, dtype="float32")[None]   # (1, 2, 2)
    >>> out, w = scaled_dot_product_attention(q, k, v)
    >>> np.round(np.asarray(w), 3)
    array([[[0.67, 0.33],
            [0.33, 0.67]]], dtype=float32)

    References:
        Vaswani et al. 2017, "Attention Is All You Need", section 3.2.1.
    """
    query, key, value = (ops.convert_to_tensor(t) for t in (query, key, value))
    _check_shapes(query, key, value, mask)
    depth = query.shape[-1]
    # (..., T, K) x (..., S, K) -> (..., T, S)
    logits = ops.matmul(query, ops.swapaxes(key, -1, -2))
    logits = ops.cast(logits, "float32") / math.sqrt(depth)
    if mask is not None:
        mask = ops.cast(mask, "bool")
        logits = ops.where(mask, logits, ops.full_like(logits, -1e9))
    weights = ops.softmax(logits, axis=-1)
    if mask is not None:
        # A row with no allowed key would be uniform after the softmax: zero it.
        any_allowed = ops.any(mask, axis=-1, keepdims=True)
        weights = ops.where(any_allowed, weights, ops.zeros_like(weights))
    weights = ops.cast(weights, value.dtype)
    attended = weights if dropout is None else dropout(weights)
    return ops.matmul(attended, value), weights


def _check_shapes(query, key, value, mask):
    for name, tensor in (("query", query), ("key", key), ("value", value)):
        if len(tensor.shape) < 2:
            raise ValueError(
                f"`{name}` must have rank >= 2 (..., length, depth). "
                f"Received: {name}.shape={tuple(tensor.shape)}"
            )
    _check_same_size(-1, "last dimension", query=query, key=key)
    _check_same_size(-2, "length (axis -2)", key=key, value=value)
    if mask is not None:
        scores_shape = (*query.shape[:-1], key.shape[-2])
        check_broadcastable("mask", tuple(mask.shape), scores_shape)


def _check_same_size(axis, what, **tensors):
    """Raises a ValueError when the two named `tensors` differ on `axis`."""
    (a_name, a), (b_name, b) = tensors.items()
    a_size, b_size = a.shape[axis], b.shape[axis]
    if a_size is not None and b_size is not None and a_size != b_size:
        raise ValueError(
            f"`{a_name}` and `{b_name}` must have the same {what}. "
            f"Received: {a_name}.shape={tuple(a.shape)}, "
            f"{b_name}.shape={tuple(b.shape)}"
        )


def check_broadcastable(name, shape, target):
    """Raises a ValueError when static `shape` cannot broadcast to `target`."""
    ok = len(shape) <= len(target)
    if ok:
        for have, want in zip(reversed(shape), reversed(target), strict=False):
            if have not in (None, 1) and want is not None and have != want:
                ok = False
    if not ok:
        raise ValueError(
            f"`{name}` must broadcast to {tuple(target)} (batch..., T, S). "
            f"Received: {name}.shape={tuple(shape)}"
        )
