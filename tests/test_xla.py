"""Tests for keras_transformer.xla: compiled functions inside plain steps."""

import numpy as np
import tensorflow as tf

from keras_transformer import xla


def test_compile_with_xla_only_in_traced_functions_of_static_shapes():
    # Eagerly there is nothing to gain; with unknown dimensions each new
    # batch shape would compile anew as it runs; inside a function XLA
    # compiles whole, a nested compiled function made Keras compile the
    # training step anew at every `fit` call.
    seen = []

    def probe(x):
        seen.append(xla.compile_with_xla(x, None, 0.1))
        return x + 1.0

    probe(tf.ones(2))
    tf.function(probe)(tf.ones(2))
    tf.function(probe, input_signature=[tf.TensorSpec([None])])(tf.ones(2))
    tf.function(probe, jit_compile=True)(tf.ones(2))
    assert seen == [False, True, False, False]


def compiled_calls(function, spec):
    """Calls in `function`'s graph for `spec` that XLA must compile."""
    graph = tf.function(function).get_concrete_function(spec).graph
    return [n.op for n in graph.as_graph_def().node if "_XlaMustCompile" in n.attr]


def test_xla_compiled_calls_the_compiled_function_only_where_it_should():
    double = xla.xla_compiled(lambda x: 2.0 * x)
    x = tf.constant([1.0, 2.0])
    assert compiled_calls(double, tf.TensorSpec([2])) == ["PartitionedCall"]
    assert compiled_calls(double, tf.TensorSpec([None])) == []
    inside_xla = tf.function(double, jit_compile=True)
    for result in (double(x), tf.function(double)(x), inside_xla(x)):
        np.testing.assert_array_equal(result.numpy(), [2.0, 4.0])


def test_the_private_tensorflow_function_it_needs_is_there():
    # No public API says whether ops are traced for XLA; `xla.py` uses
    # TensorFlow's `control_flow_util.GraphOrParentsInXlaContext` and, if a
    # TensorFlow release removed it, would silently never compile. This
    # fails instead.
    assert xla._xla_context_check() is not None
    inside = tf.function(lambda: tf.constant(xla.in_xla_context()), jit_compile=True)
    assert bool(inside()) and not xla.in_xla_context()
