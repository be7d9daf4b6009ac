"""Tests for keras_transformer.xla: compiled functions inside plain steps."""

import numpy as np
import tensorflow as tf

from keras_transformer import xla


def test_compile_with_xla_everywhere_but_inside_xla():
    # Nested compiled functions inside a function XLA compiles as a whole
    # made Keras compile the training step anew at every `fit` call.
    seen = []

    def probe(x):
        seen.append(xla.compile_with_xla())
        return x + 1.0

    probe(tf.ones(2))
    tf.function(probe)(tf.ones(2))
    tf.function(probe, jit_compile=True)(tf.ones(2))
    assert seen == [True, True, False]


def test_xla_compiled_runs_the_compiled_function_only_where_it_should():
    traced = []

    def double(x):
        traced.append(x.shape)
        return 2.0 * x

    compiled = xla.xla_compiled(double)
    x = tf.constant([1.0, 2.0])
    for _ in range(2):  # Eagerly: the compiled function, traced once.
        np.testing.assert_array_equal(compiled(x).numpy(), [2.0, 4.0])
    assert len(traced) == 1
    # Inside a function XLA compiles whole: the plain function, traced inline
    # (the compiled one would have reused its trace of this shape).
    inside_xla = tf.function(lambda x: compiled(x), jit_compile=True)
    np.testing.assert_array_equal(inside_xla(x).numpy(), [2.0, 4.0])
    assert len(traced) == 2
