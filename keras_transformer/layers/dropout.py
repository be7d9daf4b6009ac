"""Dropout, section 5.4 of the paper, on half the random numbers."""

import keras
import tensorflow as tf

_LEVELS = 2**16  # One 16-bit random integer decides each element.


@keras.saving.register_keras_serializable(package="keras_transformer")
class Dropout(keras.layers.Dropout):
    """`keras.layers.Dropout` deciding each element by 16 random bits.

    An element is dropped when a uniform 16-bit integer is below
    `threshold = round(rate * 2**16)`, and the kept ones are scaled by
    `2**16 / (2**16 - threshold)`. The output's expectation is the input,
    exactly, and the drop probability is `rate` to within `2**-17`
    (`rate=0.1` drops with probability 0.1000061).

    Why: Keras draws one 32-bit random number per element, and drawing them
    took about 3% of a training step of the benchmark model (17 dropouts a
    step in the base model; docs/benchmarks.md).
    One 32-bit draw here decides two elements: a `(64, 32, 256)` dropout
    took about 1.7 instead of 2.6 ms on 2 CPU cores.

    On backends other than TensorFlow, with a `noise_shape`, or outside
    training, it is Keras's layer. The arguments are Keras's.

    Example:

    >>> import numpy as np
    >>> layer = Dropout(0.5, seed=1)
    >>> y = np.asarray(layer(np.ones((4, 1000), "float32"), training=True))
    >>> sorted(np.unique(y).tolist())  # dropped, or kept and scaled by 2
    [0.0, 2.0]
    >>> abs(float((y == 0).mean()) - 0.5) < 0.05
    True
    """

    def call(self, inputs, training=False):
        if (
            not training
            or self.rate == 0
            or self.noise_shape is not None
            or keras.backend.backend() != "tensorflow"
        ):
            return super().call(inputs, training=training)
        # Keras's seed state is int64; stateless ops take int32 seeds.
        seed = tf.math.floormod(self.seed_generator.next(), tf.int32.max - 1)
        return dropout(tf.convert_to_tensor(inputs), self.rate, tf.cast(seed, "int32"))


def dropout(x, rate, seed):
    """`x` with elements dropped at `rate` by 16-bit random integers.

    Args:
        x: a tensor.
        rate: drop probability in [0, 1).
        seed: `(2,)` int32 seed of the stateless random numbers.

    Returns:
        `x`'s shape and dtype.

    Example:

    >>> y = dropout(tf.ones((2, 3)), 0.0, tf.constant([1, 2]))
    >>> y.numpy().tolist()
    [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
    """
    threshold = min(round(rate * _LEVELS), _LEVELS - 1)
    size = tf.size(x)
    bits = tf.random.stateless_uniform(
        ((size + 1) // 2,), seed, minval=None, maxval=None, dtype=tf.uint32
    )
    # Each 32-bit number as two 16-bit ones; an odd size leaves one unused.
    halves = tf.reshape(tf.bitcast(bits, tf.uint16), (-1,))
    if not x.shape.is_fully_defined() or x.shape.num_elements() % 2:
        halves = halves[:size]
    keep = tf.reshape(halves >= threshold, tf.shape(x))
    scale = tf.cast(_LEVELS / (_LEVELS - threshold), x.dtype)
    return tf.where(keep, x * scale, tf.zeros_like(x))
