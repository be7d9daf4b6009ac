"""restricted_attention: the band of full attention, computed in blocks."""

import numpy as np
import pytest

from keras_transformer.layers import (
    band_mask,
    causal_mask,
    restricted_attention,
    scaled_dot_product_attention,
)


def random(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


@pytest.mark.parametrize(
    ("length", "window", "causal", "padded"),
    [
        (10, 3, False, False),
        (10, 3, True, False),
        (7, 4, False, True),
        (12, 4, True, True),
        (5, 8, False, False),
        (16, 1, True, False),
    ],
)
def test_equals_full_attention_with_a_band_mask(length, window, causal, padded):
    q, k = random(2, 3, length, 4), random(2, 3, length, 4, seed=1)
    v = random(2, 3, length, 5, seed=2)
    key_mask = np.ones((2, length), bool)
    if padded:
        key_mask[1, length - 3 :] = False
    out = restricted_attention(
        q, k, v, window, causal=causal, key_mask=key_mask if padded else None
    )
    mask = np.asarray(band_mask(length, length, window))
    if causal:
        mask = mask & np.asarray(causal_mask(length))
    mask = mask[:, None] & key_mask[:, None, None, :]  # (B, 1, T, T)
    expected, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    np.testing.assert_allclose(np.asarray(out), np.asarray(expected), atol=1e-6)
    # Not vacuous: the band leaves keys out.
    if window < length:
        assert np.any(np.asarray(weights) == 0)


def test_positions_outside_the_window_do_not_matter():
    x = random(1, 12, 4)
    out = np.asarray(restricted_attention(x, x, x, window=2))
    changed = x.copy()
    changed[:, 8:] = 0.0  # Positions 8.. are more than 1 away from 0..6.
    out_changed = np.asarray(restricted_attention(changed, changed, changed, 2))
    np.testing.assert_allclose(out_changed[:, :7], out[:, :7], atol=1e-6)
    assert not np.allclose(out_changed[:, 7], out[:, 7], atol=1e-3)
