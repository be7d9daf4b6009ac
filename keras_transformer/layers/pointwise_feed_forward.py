"""Position-wise feed-forward network, section 3.3 of the paper."""

import keras
from keras import ops

from keras_transformer.layers.initializers import clone_initializer
from keras_transformer.validation import (
    check_positive_int,
    check_rate,
    check_sequence_shape,
)


@keras.saving.register_keras_serializable(package="keras_transformer")
class PointwiseFeedForward(keras.layers.Layer):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, applied at every position.

    As the paper puts it, "two convolutions with kernel size 1": two `Conv1D`
    sublayers, `inner` (`d_model -> d_ff`, with the activation) and `outer`
    (`d_ff -> d_model`), each with its own copy of the initializers.
    Positions never mix, so the layer's Keras mask is passed on unchanged.

    Args:
        d_ff: inner size (2048 in the base model).
        dropout: dropout rate after the activation.
        activation: activation of the inner layer.
        kernel_initializer: initializer of both kernels (a copy for each).
        bias_initializer: initializer of both biases (a copy for each).
        **kwargs: passed to `keras.layers.Layer`.

    Call arguments:
        x: `(B, T, D)`.
        training: whether dropout is active.

    Returns:
        `(B, T, D)`.

    Example:

    >>> import numpy as np
    >>> ffn = PointwiseFeedForward(d_ff=32)
    >>> tuple(ffn(np.zeros((2, 5, 8), "float32")).shape)
    (2, 5, 8)

    References:
        Vaswani et al. 2017, "Attention Is All You Need", section 3.3.
    """

    def __init__(
        self,
        d_ff,
        dropout=0.0,
        activation="relu",
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("d_ff", d_ff)
        check_rate("dropout", dropout)
        self.d_ff = d_ff
        self.dropout = dropout
        self.activation = keras.activations.get(activation)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True

    def build(self, input_shape):
        check_sequence_shape("x", input_shape)
        d_model = input_shape[-1]
        self.inner = PointwiseConv1D(
            self.d_ff,
            1,
            activation=self.activation,
            name="inner",
            kernel_initializer=clone_initializer(self.kernel_initializer, "inner"),
            bias_initializer=clone_initializer(self.bias_initializer, "inner"),
            dtype=self.dtype_policy,
        )
        self.inner.build(input_shape)
        self.inner_dropout = keras.layers.Dropout(
            self.dropout, name="inner_dropout", dtype=self.dtype_policy
        )
        self.outer = PointwiseConv1D(
            d_model,
            1,
            name="outer",
            kernel_initializer=clone_initializer(self.kernel_initializer, "outer"),
            bias_initializer=clone_initializer(self.bias_initializer, "outer"),
            dtype=self.dtype_policy,
        )
        self.outer.build((*input_shape[:-1], self.d_ff))

    def call(self, x, training=None):
        h = self.inner(x)  # (B, T, d_ff), activated
        h = self.inner_dropout(h, training=training)
        return self.outer(h)  # (B, T, D)

    def get_config(self):
        config = super().get_config()
        config.update(
            d_ff=self.d_ff,
            dropout=self.dropout,
            activation=keras.activations.serialize(self.activation),
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
            bias_initializer=keras.initializers.serialize(self.bias_initializer),
        )
        return config

    def compute_output_shape(self, input_shape):
        return input_shape


@keras.saving.register_keras_serializable(package="keras_transformer")
class PointwiseConv1D(keras.layers.Conv1D):
    """A kernel-size-1 `Conv1D`, computed as the matmul it equals.

    `(B, T, C_in)` x `(C_in, C_out)` at every position, plus the bias and
    the activation: the same weights, values and config as
    `keras.layers.Conv1D(filters, 1)`. TensorFlow's CPU convolution was the
    slowest part of a decoding step: translating test2016 took about 20%
    longer with it (docs/benchmarks.md and its history). Positions never
    mix, so the Keras padding mask passes through.
    """

    def __init__(self, filters, kernel_size=1, **kwargs):
        if kernel_size not in (1, (1,)):
            raise ValueError(
                f"PointwiseConv1D has kernel size 1. Received: {kernel_size=}"
            )
        super().__init__(filters, 1, **kwargs)
        self.supports_masking = True

    def call(self, inputs):
        outputs = ops.matmul(inputs, self.kernel[0])  # kernel: (1, C_in, C_out)
        if self.use_bias:
            outputs = outputs + self.bias
        return outputs if self.activation is None else self.activation(outputs)
