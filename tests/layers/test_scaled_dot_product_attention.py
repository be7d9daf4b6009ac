import re

import keras
import numpy as np
import pytest

from keras_transformer.layers import scaled_dot_product_attention


def reference_attention(query, key, value, mask=None):
    """softmax(Q Kᵀ / √d_k) V in float64 NumPy; rows with no key give 0."""
    query, key, value = (np.asarray(t, np.float64) for t in (query, key, value))
    logits = query @ np.swapaxes(key, -1, -2) / np.sqrt(query.shape[-1])
    if mask is None:
        mask = np.ones(logits.shape, bool)
    mask = np.broadcast_to(mask, logits.shape)
    logits = np.where(mask, logits, -np.inf)
    row_max = np.max(logits, axis=-1, keepdims=True)
    exp = np.where(mask, np.exp(logits - np.where(np.isfinite(row_max), row_max, 0)), 0)
    total = exp.sum(axis=-1, keepdims=True)
    weights = np.divide(exp, total, out=np.zeros_like(exp), where=total > 0)
    return weights @ value, weights


def random_qkv(rng, lead, t=3, s=5, k=4, v=6, dtype="float32"):
    return (
        rng.normal(size=(*lead, t, k)).astype(dtype),
        rng.normal(size=(*lead, s, k)).astype(dtype),
        rng.normal(size=(*lead, s, v)).astype(dtype),
    )


@pytest.mark.parametrize(
    "lead", [(), (2,), (2, 3)], ids=["none", "batch", "batch+heads"]
)
@pytest.mark.parametrize("masked", [False, True])
def test_matches_numpy_reference(lead, masked):
    rng = np.random.default_rng(0)
    q, k, v = random_qkv(rng, lead)
    mask = None
    if masked:
        mask = rng.random((*lead, 3, 5)) < 0.6
        mask[..., 0] = True  # Every row may attend somewhere.
    out, w = scaled_dot_product_attention(q, k, v, mask=mask)
    ref_out, ref_w = reference_attention(q, k, v, mask)
    assert out.shape == (*lead, 3, 6) and w.shape == (*lead, 3, 5)
    np.testing.assert_allclose(np.asarray(w), ref_w, atol=1e-5)
    np.testing.assert_allclose(np.asarray(out), ref_out, atol=1e-5)
    np.testing.assert_allclose(np.asarray(w).sum(-1), np.ones((*lead, 3)), atol=1e-6)


def test_mask_broadcasts_over_leading_axes():
    # A (B, 1, 1, S) key-padding mask serves every head and query.
    rng = np.random.default_rng(1)
    q, k, v = random_qkv(rng, (2, 3))
    mask = np.array([[True] * 5, [True, True, False, False, False]])[:, None, None, :]
    out, w = scaled_dot_product_attention(q, k, v, mask=mask)
    ref_out, ref_w = reference_attention(q, k, v, mask)
    np.testing.assert_allclose(np.asarray(out), ref_out, atol=1e-5)
    np.testing.assert_allclose(np.asarray(w), ref_w, atol=1e-5)


def test_masked_keys_get_exactly_zero_weight():
    rng = np.random.default_rng(2)
    q, k, v = random_qkv(rng, (2,))
    q *= 10.0  # Large logits: a -inf-free masking must still give exact zeros.
    mask = rng.random((2, 3, 5)) < 0.5
    mask[..., 2] = True
    _, w = scaled_dot_product_attention(q, k, v, mask=mask)
    w = np.asarray(w)
    assert np.all(w[~mask] == 0.0)
    assert np.all(w[mask] > 0.0)


def test_fully_masked_row_gives_zeros_not_nan():
    rng = np.random.default_rng(3)
    q, k, v = random_qkv(rng, (1,))
    mask = np.ones((1, 3, 5), bool)
    mask[0, 1] = False  # Query 1 may attend to nothing.
    out, w = scaled_dot_product_attention(q, k, v, mask=mask)
    out, w = np.asarray(out), np.asarray(w)
    assert np.all(np.isfinite(out)) and np.all(np.isfinite(w))
    np.testing.assert_array_equal(w[0, 1], np.zeros(5))
    np.testing.assert_array_equal(out[0, 1], np.zeros(6))
    ref_out, _ = reference_attention(q, k, v, mask)
    np.testing.assert_allclose(out, ref_out, atol=1e-5)


def test_float16_inputs():
    # Small integer entries make the float16 logits exact, so the weights must
    # be the exact softmax rounded once to float16 (within one unit in the
    # last place), masked keys 0 and the fully masked row 0, never NaN.
    rng = np.random.default_rng(4)
    q = rng.integers(-2, 3, (2, 2, 3, 4)).astype("float16")
    k = rng.integers(-2, 3, (2, 2, 5, 4)).astype("float16")
    v = rng.normal(size=(2, 2, 5, 6)).astype("float16")
    mask = np.ones((2, 1, 3, 5), bool)
    mask[0, :, :, 3:] = False
    mask[1, :, 2] = False
    out, w = scaled_dot_product_attention(q, k, v, mask=mask)
    assert keras.backend.standardize_dtype(out.dtype) == "float16"
    assert keras.backend.standardize_dtype(w.dtype) == "float16"
    out, w = np.asarray(out), np.asarray(w)
    ref_out, ref_w = reference_attention(q, k, v, mask)
    assert np.all(np.isfinite(out)) and np.all(np.isfinite(w))
    np.testing.assert_array_max_ulp(w, ref_w.astype("float16"), maxulp=1)
    np.testing.assert_allclose(out.astype("float32"), ref_out, atol=1e-2)
    assert np.all(w[~np.broadcast_to(mask, w.shape)] == 0.0)


def test_dropout_applies_to_attended_weights_only():
    rng = np.random.default_rng(5)
    q, k, v = random_qkv(rng, (2,))
    out, w = scaled_dot_product_attention(q, k, v, dropout=lambda w: w * 0.0)
    np.testing.assert_array_equal(np.asarray(out), np.zeros((2, 3, 6)))
    np.testing.assert_allclose(
        np.asarray(w), reference_attention(q, k, v)[1], atol=1e-5
    )


def test_symbolic_shapes():
    q = keras.Input((3, 4))
    kv = keras.Input((5, 4))
    out, w = scaled_dot_product_attention(q, kv, kv)
    assert tuple(out.shape) == (None, 3, 4) and tuple(w.shape) == (None, 3, 5)


def test_rejects_rank_one_input():
    with pytest.raises(ValueError, match=re.escape("query.shape=(4,)")):
        scaled_dot_product_attention(np.ones(4), np.ones((5, 4)), np.ones((5, 4)))


def test_rejects_query_key_depth_mismatch():
    q, k, v = np.ones((2, 3, 4)), np.ones((2, 5, 6)), np.ones((2, 5, 6))
    with pytest.raises(
        ValueError, match=re.escape("query.shape=(2, 3, 4), key.shape=(2, 5, 6)")
    ):
        scaled_dot_product_attention(q, k, v)


def test_rejects_key_value_length_mismatch():
    q, k, v = np.ones((2, 3, 4)), np.ones((2, 5, 4)), np.ones((2, 6, 4))
    with pytest.raises(ValueError, match=re.escape("value.shape=(2, 6, 4)")):
        scaled_dot_product_attention(q, k, v)


@pytest.mark.parametrize("shape", [(2, 3, 4), (3, 2, 3, 5)])
def test_rejects_mask_that_does_not_broadcast(shape):
    q, k, v = np.ones((2, 3, 4)), np.ones((2, 5, 4)), np.ones((2, 5, 4))
    with pytest.raises(ValueError, match=re.escape(f"mask.shape={shape}")):
        scaled_dot_product_attention(q, k, v, mask=np.ones(shape, bool))
