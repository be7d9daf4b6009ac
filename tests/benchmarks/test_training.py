"""benchmarks/training.py: its variants measure what they say."""

import argparse

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


def test_the_bfloat16_variants_differ_only_in_the_projections_dtype():
    script = benchmark_script("training")
    args = argparse.Namespace(
        vocab=20,
        layers=1,
        d_model=8,
        heads=2,
        d_ff=16,
        batch_size=2,
        length=3,
        warmup=1,
    )
    bf16, _ = script.prepare("ours-bf16-dynamic", args)
    float32_logits, _ = script.prepare("ours-bf16-float32-logits-dynamic", args)
    for model in (bf16, float32_logits):
        assert model.dtype_policy.name == "mixed_bfloat16"
        assert model.encoder.dtype_policy.name == "mixed_bfloat16"
    assert bf16.embedding.reverse_dtype == "bfloat16"
    assert float32_logits.embedding.reverse_dtype == "float32"
    hidden = keras.ops.ones((1, 2, 8), "bfloat16")
    assert float32_logits.embedding(hidden, reverse=True).dtype == "float32"
