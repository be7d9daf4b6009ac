"""Private helpers shared by the layers."""

import math

import keras
from keras import ops

try:  # Private to TensorFlow: whether ops are being traced for XLA already.
    from tensorflow.python.ops.control_flow_util import (
        GraphOrParentsInXlaContext as _in_xla_context,
    )
except ImportError:  # pragma: no cover
    _in_xla_context = None


def head_dim(d_model, num_heads):
    if d_model % num_heads:
        raise ValueError(
            "d_model must be divisible by num_heads. "
            f"Received: d_model={d_model}, num_heads={num_heads}"
        )
    return d_model // num_heads


def layer_norm(layer, name, input_shape):
    norm = keras.layers.LayerNormalization(
        epsilon=layer.layer_norm_epsilon, dtype=layer.dtype_policy, name=name
    )
    norm.build(input_shape)
    return norm


def pre_norm(layer, norm, x):
    """Pre-LN normalizes the sublayer's input; post-LN leaves it."""
    return norm(x) if layer.norm_first else x


def add_norm(layer, norm, residual, x, training):
    """Dropout, residual add and, for post-LN, LayerNorm(x + Sublayer(x))."""
    x = residual + layer.residual_dropout(x, training=training)
    return x if layer.norm_first else norm(x)


def dense(x, kernel, bias, input_rank):
    """`x` times `kernel` over the last `input_rank` axes of `x`.

    One 2-D matmul: `(B, T, *in)` x `(*in, *out)` -> `(B, T, *out)`. Einsums
    with a rank-3 kernel lower to broadcasting batch matmuls on some backends,
    whose weight gradients are much slower.
    """
    in_shape, out_shape = kernel.shape[:input_rank], kernel.shape[input_rank:]
    fan_in, fan_out = math.prod(in_shape), math.prod(out_shape)
    lead = ops.shape(x)[: len(x.shape) - input_rank]
    y = ops.matmul(ops.reshape(x, (-1, fan_in)), ops.reshape(kernel, (fan_in, fan_out)))
    if bias is not None:
        y = y + ops.reshape(bias, (fan_out,))
    return ops.reshape(y, (*lead, *out_shape))


def compile_with_xla():
    """Whether to call a function compiled by XLA here (TensorFlow only).

    Not inside a function XLA compiles as a whole (`jit_compile=True`): it
    compiles those ops anyway, and a nested compiled function made Keras
    compile the whole training step anew at every `fit` call.
    """
    if keras.backend.backend() != "tensorflow" or _in_xla_context is None:
        return False
    import tensorflow as tf

    return not _in_xla_context(tf.compat.v1.get_default_graph())
