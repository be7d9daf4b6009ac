import re

import numpy as np
import pytest
from helpers import run_layer_checks
from keras import ops

from keras_transformer.layers import EncoderLayer, SharedEmbedding

B, S, D, H, D_FF = 2, 5, 8, 2, 16


def random(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def randomize_norms(layer):
    """Distinct LayerNorm scales/offsets, so a swapped norm shows."""
    for i, norm in enumerate((layer.self_attention_norm, layer.feed_forward_norm)):
        norm.gamma.assign(1.0 + 0.5 * random(D, seed=10 + i))
        norm.beta.assign(random(D, seed=20 + i))


@pytest.mark.parametrize("norm_first", [False, True])
def test_standard_checks(norm_first, tmp_path):
    run_layer_checks(
        lambda: EncoderLayer(num_heads=H, d_ff=D_FF, norm_first=norm_first),
        random(B, S, D),
        tmp_path,
        expected_output_shape=(B, S, D),
    )


@pytest.mark.parametrize("norm_first", [False, True])
def test_sublayer_wiring(norm_first):
    # Post-LN: LayerNorm(x + Sublayer(x)); pre-LN: x + Sublayer(LayerNorm(x)).
    layer = EncoderLayer(num_heads=H, d_ff=D_FF, norm_first=norm_first)
    x = random(B, S, D)
    mask = np.array([[True] * S, [True, True, True, False, False]])
    layer(x)
    randomize_norms(layer)
    attention, ffn = layer.self_attention, layer.feed_forward
    norm1, norm2 = layer.self_attention_norm, layer.feed_forward_norm
    if norm_first:
        h = norm1(x)
        y = x + attention(h, h, query_mask=mask, value_mask=mask)
        expected = y + ffn(norm2(y))
    else:
        y = norm1(x + attention(x, x, query_mask=mask, value_mask=mask))
        expected = norm2(y + ffn(y))
    out = layer(x, mask=mask, training=False)
    np.testing.assert_allclose(np.asarray(out), np.asarray(expected), atol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_keras_mask_pads_keys_and_is_passed_on(norm_first):
    embedding = SharedEmbedding(vocab_size=11, d_model=D)
    ids = np.array([[3, 4, 5, 0, 0], [6, 7, 0, 0, 0]], "int32")
    layer = EncoderLayer(num_heads=H, d_ff=D_FF, norm_first=norm_first)
    out, scores = layer(embedding(ids), return_attention_scores=True)
    np.testing.assert_array_equal(np.asarray(out._keras_mask), ids != 0)
    scores = np.asarray(scores)
    assert scores.shape == (B, H, S, S)
    assert np.all(
        scores[np.broadcast_to((ids == 0)[:, None, None, :], scores.shape)] == 0
    )
    # Real positions do not see the padding: same as without it.
    short = np.asarray(layer(embedding(ids[:, :3])))
    np.testing.assert_allclose(np.asarray(out)[0, :3], short[0], atol=1e-5)
    short = np.asarray(layer(embedding(ids[1:, :2])))
    np.testing.assert_allclose(np.asarray(out)[1, :2], short[0], atol=1e-5)
    # An explicit mask does the same as the Keras mask at the real positions
    # (Keras's attention masks padded queries only by their Keras mask;
    # outputs there mean nothing).
    plain = ops.convert_to_tensor(np.asarray(embedding(ids)))
    explicit = layer(plain, mask=ids != 0)
    real = ids != 0
    np.testing.assert_allclose(
        np.asarray(explicit)[real], np.asarray(out)[real], atol=1e-6
    )


def test_dropout_only_in_training():
    layer = EncoderLayer(num_heads=H, d_ff=D_FF, dropout=0.5)
    x = random(B, S, D)
    inference = np.asarray(layer(x, training=False))
    np.testing.assert_array_equal(np.asarray(layer(x)), inference)
    assert np.max(np.abs(np.asarray(layer(x, training=True)) - inference)) > 1e-3


def test_rejects_d_model_not_divisible_by_num_heads():
    with pytest.raises(ValueError, match=re.escape("d_model=8, num_heads=3")):
        EncoderLayer(num_heads=3, d_ff=D_FF)(random(B, S, 8))


@pytest.mark.parametrize(
    "name, value",
    [
        ("num_heads", 0),
        ("num_heads", -2),
        ("d_ff", 0),
        ("dropout", -0.1),
        ("dropout", 1.0),
        ("attention_dropout", 1.5),
        ("activation_dropout", -0.2),
    ],
)
def test_rejects_bad_hyperparameters(name, value):
    kwargs = {"num_heads": H, "d_ff": D_FF, name: value}
    with pytest.raises(ValueError, match=re.escape(f"{name}={value!r}")):
        EncoderLayer(**kwargs)
