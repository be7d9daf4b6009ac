"""Restricted self-attention in O(n * r * d), Table 1 of the paper."""

import math

from keras import ops


def restricted_attention(query, key, value, window, causal=False, key_mask=None):
    """Self-attention where position `i` sees only keys `j`, `|i - j| < window`.

    The same values as `scaled_dot_product_attention` with a band mask, in
    time and memory linear in the length: the sequence is cut into blocks of
    `window` positions, and each block of queries scores only its own block
    of keys and the two beside it (`3 * window` keys instead of `n`). This is
    the "restricted" row of Table 1: `O(r * n * d)` per layer, `r` the
    neighbourhood.

    Args:
        query: `(..., T, K)`.
        key: `(..., T, K)`, as long as `query` (self-attention).
        value: `(..., T, V)`.
        window: `r`: keys less than `window` positions away are seen.
        causal: also hide later keys (`j > i`).
        key_mask: optional boolean `(B, T)` padding mask of the keys, for
            inputs `(B, ..., T, K)`; `True` = real token.

    Returns:
        `(..., T, V)`. A query with no visible key gets zeros.

    Example:

    >>> import numpy as np
    >>> x = np.random.default_rng(0).normal(size=(1, 10, 4)).astype("float32")
    >>> tuple(restricted_attention(x, x, x, window=3).shape)
    (1, 10, 4)
    """
    length, depth = query.shape[-2], query.shape[-1]
    blocks = -(-length // window)  # ceil
    padded = blocks * window
    # Leading axes for reshapes: -1 stands for an unknown batch size.
    lead = tuple(-1 if d is None else d for d in query.shape[:-2])

    def pad(x, before, after):
        widths = [(0, 0)] * (len(x.shape) - 2) + [(before, after), (0, 0)]
        return ops.pad(x, widths)

    def neighbourhoods(x):
        """`(..., T, C)` -> `(..., blocks, 3 * window, C)`: keys around each block."""
        x = pad(x, window, padded - length + window)
        views = [
            ops.reshape(
                x[..., start * window : start * window + padded, :],
                (*(-1 if d is None else d for d in x.shape[:-2]), blocks)
                + (window, x.shape[-1]),
            )
            for start in range(3)  # the block before, the block, the block after
        ]
        return ops.concatenate(views, axis=-2)

    q = ops.reshape(pad(query, 0, padded - length), (*lead, blocks, window, depth))
    k, v = neighbourhoods(key), neighbourhoods(value)
    logits = ops.matmul(q, ops.swapaxes(k, -1, -2))  # (..., blocks, window, 3w)
    logits = ops.cast(logits, "float32") / math.sqrt(depth)

    # Absolute positions: query i = b * w + r, key j = (b - 1) * w + c.
    b = ops.arange(blocks)[:, None, None]
    i = b * window + ops.arange(window)[None, :, None]
    j = (b - 1) * window + ops.arange(3 * window)[None, None, :]
    allowed = (ops.abs(i - j) < window) & (j >= 0) & (j < length)
    if causal:
        allowed = allowed & (j <= i)
    if key_mask is not None:
        real = neighbourhoods(ops.cast(key_mask, "float32")[:, :, None])[..., 0]
        # (B, blocks, 3w) -> (B, 1, ..., blocks, 1, 3w): every head and query.
        ones = (1,) * (len(lead) - 1)
        real = ops.reshape(real > 0, (-1, *ones, blocks, 1, 3 * window))
        allowed = allowed & real
    weights = ops.softmax(ops.where(allowed, logits, -1e9), axis=-1)
    weights = ops.where(ops.any(allowed, axis=-1, keepdims=True), weights, 0.0)
    out = ops.matmul(ops.cast(weights, value.dtype), v)  # (..., blocks, w, V)
    out = ops.reshape(out, (*lead, padded, value.shape[-1]))
    return out[..., :length, :]
