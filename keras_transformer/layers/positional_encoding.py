"""Positional encoding, section 3.5 of the paper."""

import keras
import numpy as np
from keras import ops

from keras_transformer.validation import check_positive_int, check_sequence_shape


def positional_encoding(length, depth):
    """The sinusoidal table PE of the paper.

    PE(pos, 2i) = sin(pos / 10000^(2i / depth)) and
    PE(pos, 2i + 1) = cos(pos / 10000^(2i / depth)), interleaved: even
    columns are sines, odd columns cosines of the same frequency.

    Args:
        length: number of positions.
        depth: model dimension `d_model`.

    Returns:
        float32 NumPy array `(length, depth)`.

    Example:

    >>> pe = positional_encoding(50, 4)
    >>> pe.shape, pe[0].tolist()
    ((50, 4), [0.0, 1.0, 0.0, 1.0])

    References:
        Vaswani et al. 2017, "Attention Is All You Need", section 3.5.
    """
    if int(length) < 0 or int(depth) < 1:
        raise ValueError(
            "`length` must be >= 0 and `depth` >= 1. "
            f"Received: length={length}, depth={depth}"
        )
    positions = np.arange(length, dtype=np.float64)[:, None]  # (L, 1)
    two_i = np.arange(0, depth, 2, dtype=np.float64)[None, :]  # (1, ceil(D/2))
    angles = positions / np.power(10000.0, two_i / depth)
    table = np.empty((length, depth), dtype=np.float64)
    table[:, 0::2] = np.sin(angles)
    table[:, 1::2] = np.cos(angles[:, : depth // 2])
    return table.astype(np.float32)


@keras.saving.register_keras_serializable(package="keras_transformer")
class PositionalEncoding(keras.layers.Layer):
    """Adds positional encodings to a sequence of embeddings.

    Sinusoidal by default; `learned=True` gives learned position embeddings
    instead (the paper's Table 3, row E, found nearly identical results).

    Args:
        max_length: number of positions in the table.
        learned: learn the table instead of using sinusoids.
        **kwargs: passed to `keras.layers.Layer`.

    Call arguments:
        x: `(B, T, D)` embeddings.
        start_index: position of `x[:, 0]`, e.g. `t` when decoding step `t`
            alone; an integer or scalar tensor.

    Returns:
        `(B, T, D)`: `x + PE[start_index : start_index + T]`; the Keras mask of
        `x` is passed on.

    Example:

    >>> import numpy as np
    >>> layer = PositionalEncoding(max_length=16)
    >>> y = layer(np.zeros((1, 3, 4), "float32"), start_index=2)
    >>> np.allclose(y[0], positional_encoding(16, 4)[2:5])
    True

    References:
        Vaswani et al. 2017, "Attention Is All You Need", sections 3.5, 6.2.
    """

    def __init__(self, max_length=2048, learned=False, **kwargs):
        super().__init__(**kwargs)
        check_positive_int("max_length", max_length)
        self.max_length = max_length
        self.learned = learned
        self.supports_masking = True

    def build(self, input_shape):
        check_sequence_shape("x", input_shape)
        depth = input_shape[-1]
        if self.learned:
            self.table = self.add_weight(
                name="position_embeddings",
                shape=(self.max_length, depth),
                initializer=keras.initializers.RandomNormal(stddev=depth**-0.5),
            )
        else:
            # Kept as NumPy: `build` may run in a scratch graph (the symbolic
            # build of a subclassed model), where a tensor would be stranded.
            self.table = positional_encoding(self.max_length, depth)

    def call(self, x, start_index=0):
        length = x.shape[1]
        # A known length: not `None`, nor JAX's symbolic dimension of a
        # `keras.Input((None, ...))`, which cannot be compared.
        if isinstance(length, int) and isinstance(start_index, int):
            if start_index + length > self.max_length:
                raise ValueError(
                    f"Sequence too long for the positional table: start_index="
                    f"{start_index} + length={length} > max_length={self.max_length}"
                )
        positions = ops.arange(ops.shape(x)[1]) + start_index  # (T,)
        return x + ops.cast(ops.take(self.table, positions, axis=0), x.dtype)

    def get_config(self):
        config = super().get_config()
        config.update(max_length=self.max_length, learned=self.learned)
        return config

    def compute_output_shape(self, input_shape):
        return input_shape
