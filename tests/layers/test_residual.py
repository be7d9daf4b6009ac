"""Tests for the private helpers of keras_transformer/layers/residual.py."""

import tensorflow as tf

from keras_transformer.layers.residual import compile_with_xla


def test_compile_with_xla_everywhere_but_inside_xla():
    # Nested compiled functions inside a function XLA compiles as a whole
    # made Keras compile the training step anew at every `fit` call.
    seen = []

    def probe(x):
        seen.append(compile_with_xla())
        return x + 1.0

    probe(tf.ones(2))
    tf.function(probe)(tf.ones(2))
    tf.function(probe, jit_compile=True)(tf.ones(2))
    assert seen == [True, True, False]
