"""Tests for keras_transformer.training.set_mixed_precision."""

import keras
import pytest

from keras_transformer.training import set_mixed_precision


@pytest.fixture(autouse=True)
def _restore_policy():
    yield
    keras.mixed_precision.set_dtype_policy("float32")


@pytest.mark.parametrize(
    "policy, compute_dtype",
    [
        ("float32", "float32"),
        ("mixed_float16", "float16"),
        ("mixed_bfloat16", "bfloat16"),
    ],
)
def test_sets_the_global_policy(policy, compute_dtype):
    set_mixed_precision(policy)
    assert keras.mixed_precision.dtype_policy().name == policy
    layer = keras.layers.Dense(2)
    assert (layer.compute_dtype, layer.variable_dtype) == (compute_dtype, "float32")


@pytest.mark.parametrize("policy", ["float16", "bfloat16", "mixed_float32", "fp16"])
def test_unknown_policy_is_named_and_nothing_changes(policy):
    set_mixed_precision("mixed_bfloat16")
    with pytest.raises(ValueError, match=f"policy='{policy}'"):
        set_mixed_precision(policy)
    assert keras.mixed_precision.dtype_policy().name == "mixed_bfloat16"
