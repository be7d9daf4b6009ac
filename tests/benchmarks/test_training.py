"""benchmarks/training.py: the `ours-tf-einsum` variant measures what it says."""

import keras
import numpy as np
import tensorflow as tf
from helpers import benchmark_script


def _ops(x, kernel):
    """The op types of the projection "abc,cde->abde" on a static shape."""
    project = tf.function(lambda x: keras.ops.einsum("abc,cde->abde", x, kernel))
    graph = project.get_concrete_function(tf.TensorSpec(x.shape)).graph
    return {op.type for op in graph.get_operations()}


def test_the_variant_sends_the_projection_to_tf_einsum_and_restores_keras():
    script = benchmark_script("training")
    x = np.random.default_rng(0).normal(size=(2, 3, 4)).astype("float32")
    kernel = tf.constant(np.random.default_rng(1).normal(size=(4, 2, 5)), "float32")
    # Keras's own rewrite on a static shape: a batch matmul, no Einsum. If
    # Keras stops doing this, docs/benchmarks.md's explanation is stale.
    keras_ops = _ops(x, kernel)
    assert "BatchMatMulV2" in keras_ops and "Einsum" not in keras_ops
    with script._patched("ours-tf-einsum"):
        patched_ops = _ops(x, kernel)
        patched = keras.ops.einsum("abc,cde->abde", x, kernel)
    assert "Einsum" in patched_ops and "BatchMatMulV2" not in patched_ops
    expected = np.einsum("abc,cde->abde", x, kernel.numpy())
    np.testing.assert_allclose(patched, expected, rtol=1e-5, atol=1e-5)
    assert _ops(x, kernel) == keras_ops
    with script._patched("ours"):
        assert _ops(x, kernel) == keras_ops
