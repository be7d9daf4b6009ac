"""Functions compiled by XLA inside otherwise plain TensorFlow steps."""

import keras
import tensorflow as tf

try:  # Private to TensorFlow: whether ops are being traced for XLA already.
    from tensorflow.python.ops.control_flow_util import (
        GraphOrParentsInXlaContext as _in_xla_context,
    )
except ImportError:  # pragma: no cover
    _in_xla_context = None


def compile_with_xla():
    """Whether to call a function compiled by XLA here (TensorFlow only).

    Not inside a function XLA compiles as a whole (`jit_compile=True`): it
    compiles those ops anyway, and a nested compiled function made Keras
    compile the whole training step anew at every `fit` call.
    """
    if keras.backend.backend() != "tensorflow" or _in_xla_context is None:
        return False
    return not _in_xla_context(tf.compat.v1.get_default_graph())


def xla_compiled(function):
    """`function`, run compiled by XLA wherever `compile_with_xla()` says so.

    Same values (to rounding) and gradients; XLA compiles once per input
    shape.

    Example:

    >>> square = xla_compiled(lambda x: x * x)
    >>> float(square(tf.constant(3.0)))
    9.0
    """
    compiled = tf.function(function, jit_compile=True)

    def call(*args):
        return compiled(*args) if compile_with_xla() else function(*args)

    return call
