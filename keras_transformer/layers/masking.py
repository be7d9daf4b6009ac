"""Mask helpers: the package's one mask convention.

`True` means "may attend" (or "is a real token"). Padding masks are
`(batch_size, seq_len)`; attention masks are `(batch_size, T, S)`, where `T`
is the query length and `S` the key length. Every layer builds its masks with
these functions, so the convention lives in one place.
"""

from keras import ops


def padding_mask(ids, pad_id=0):
    """Marks the real tokens of a batch of token ids.

    Args:
        ids: integer tensor `(batch_size, seq_len)`.
        pad_id: the id used for padding.

    Returns:
        Boolean tensor `(batch_size, seq_len)`, `True` where `ids != pad_id`.

    Example:

    >>> import numpy as np
    >>> np.asarray(padding_mask(np.array([[5, 7, 0]])))
    array([[ True,  True, False]])
    """
    return ops.not_equal(ids, pad_id)


def causal_mask(query_length, key_length=None, query_offset=0):
    """Lower-triangular "look-ahead" mask: query `i` may attend to keys `<= i`.

    Args:
        query_length: `T`, number of query positions.
        key_length: `S`, number of key positions; defaults to `query_length`.
        query_offset: absolute position of the first query, for incremental
            decoding where the keys are a cache of the earlier positions.

    Returns:
        Boolean tensor `(1, T, S)`.

    Example:

    >>> import numpy as np
    >>> np.asarray(causal_mask(3))[0].astype(int)
    array([[1, 0, 0],
           [1, 1, 0],
           [1, 1, 1]])
    """
    key_length = query_length if key_length is None else key_length
    rows = ops.expand_dims(ops.arange(query_length) + query_offset, axis=1)
    cols = ops.expand_dims(ops.arange(key_length), axis=0)
    return ops.expand_dims(ops.greater_equal(rows, cols), axis=0)


def band_mask(query_length, key_length, width, query_offset=0):
    """Restricted attention: query `i` may attend to keys `j`, `|i - j| < width`.

    The neighbourhood of Table 1's restricted self-attention, the
    `sliding_window` of `keras.layers.MultiHeadAttention`.

    Args:
        query_length: `T`, number of query positions.
        key_length: `S`, number of key positions.
        width: positions on each side, the query's own included.
        query_offset: absolute position of the first query (decoding).

    Returns:
        Boolean tensor `(1, T, S)`.

    Example:

    >>> import numpy as np
    >>> np.asarray(band_mask(4, 4, 2))[0].astype(int)
    array([[1, 1, 0, 0],
           [1, 1, 1, 0],
           [0, 1, 1, 1],
           [0, 0, 1, 1]])
    """
    rows = ops.expand_dims(ops.arange(query_length) + query_offset, axis=1)
    cols = ops.expand_dims(ops.arange(key_length), axis=0)
    return ops.expand_dims(ops.less(ops.abs(rows - cols), width), axis=0)


def merge_masks(query_mask=None, key_mask=None, attention_mask=None):
    """Combines padding and attention masks into one `(B, T, S)` mask.

    Padded keys are masked out. Padded queries are left alone: their outputs
    are ignored downstream, and masking them would leave rows with nothing to
    attend to.

    Args:
        query_mask: `(B, T)` padding mask of the queries, or `None`. Only used
            for its shape when the other masks need broadcasting.
        key_mask: `(B, S)` padding mask of the keys, or `None`.
        attention_mask: `(B, T, S)` (or broadcastable, e.g. `(1, T, S)`) mask,
            or `None`.

    Returns:
        Boolean `(B, T, S)`-broadcastable mask, or `None` if all are `None`.

    Example:

    >>> import numpy as np
    >>> m = merge_masks(key_mask=np.array([[True, False]]),
    ...                 attention_mask=causal_mask(2))
    >>> np.asarray(m)[0].astype(int)
    array([[1, 0],
           [1, 0]])
    """
    del query_mask  # Queries are never masked; see the docstring.
    mask = None
    if key_mask is not None:
        mask = ops.expand_dims(ops.cast(key_mask, "bool"), axis=1)
    if attention_mask is not None:
        attention_mask = ops.cast(attention_mask, "bool")
        mask = attention_mask if mask is None else ops.logical_and(mask, attention_mask)
    return mask
