"""Functions compiled by XLA inside otherwise plain TensorFlow steps.

TensorFlow is imported only when the Keras backend is TensorFlow: on JAX and
PyTorch `xla_compiled(f)` is `f` itself, and importing this module needs no
TensorFlow.
"""

import functools

import keras


def compile_with_xla(*args):
    """Whether to call a function compiled by XLA here, on `args`.

    Yes only on TensorFlow, in a traced function (not eagerly), when every
    tensor in `args` has a static shape, and not inside a function XLA
    compiles as a whole (`jit_compile=True`), which compiles those ops
    anyway. XLA compiles once per input shape: traced with unknown
    dimensions (`fit` on batches of varying length), the function would be
    compiled anew for each new batch shape as it runs, which made training
    on batches padded to their own length 7x slower. Nested compiled
    functions inside a whole-step XLA function made Keras compile the step
    anew at every `fit` call.
    """
    if keras.backend.backend() != "tensorflow" or _xla_context_check() is None:
        return False
    import tensorflow as tf

    if tf.executing_eagerly():
        return False
    if any(tf.is_tensor(a) and not a.shape.is_fully_defined() for a in args):
        return False
    return not in_xla_context()


def in_xla_context() -> bool:
    """Whether the ops being traced now are compiled by XLA as a whole.

    True inside `tf.function(jit_compile=True)` (and functions it calls),
    where every shape must be static; False eagerly, in plain graphs and on
    the other Keras backends.
    """
    if keras.backend.backend() != "tensorflow":
        return False
    import tensorflow as tf

    check = _xla_context_check()
    if check is None or tf.executing_eagerly():
        return False
    return bool(check(tf.compat.v1.get_default_graph()))


@functools.cache
def _xla_context_check():
    """TensorFlow's private test of a graph's XLA context, or None if gone.

    A test (tests/test_xla.py) fails loudly when TensorFlow removes it.
    """
    try:
        from tensorflow.python.ops.control_flow_util import (
            GraphOrParentsInXlaContext,
        )
    except ImportError:  # pragma: no cover
        return None
    return GraphOrParentsInXlaContext


def xla_compiled(function):
    """`function`, run compiled by XLA wherever `compile_with_xla` says so.

    Same values (to rounding) and gradients. The compiled version is made on
    first use, on the TensorFlow backend only.

    Example:

    >>> import tensorflow as tf
    >>> square = xla_compiled(lambda x: x * x)
    >>> float(tf.function(square)(tf.constant(3.0)))
    9.0
    """

    @functools.cache
    def compiled():
        import tensorflow as tf

        return tf.function(function, jit_compile=True)

    @functools.wraps(function)
    def call(*args):
        return compiled()(*args) if compile_with_xla(*args) else function(*args)

    return call
