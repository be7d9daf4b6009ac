import re

import keras
import numpy as np
import pytest
from helpers import run_layer_checks

from keras_transformer.layers import DecoderLayer, SharedEmbedding, causal_mask

B, T, S, D, H, D_FF = 2, 4, 5, 8, 2, 16
MEMORY_MASK = np.array([[True] * S, [True, True, False, False, False]])


def random(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def norms(layer):
    return (
        layer.self_attention_norm,
        layer.cross_attention_norm,
        layer.feed_forward_norm,
    )


@pytest.mark.parametrize("norm_first", [False, True])
def test_standard_checks(norm_first, tmp_path):
    run_layer_checks(
        lambda: DecoderLayer(num_heads=H, d_ff=D_FF, norm_first=norm_first),
        {"x": random(B, T, D), "memory": random(B, S, D, seed=1)},
        tmp_path,
        expected_output_shape=(B, T, D),
    )


@pytest.mark.parametrize("norm_first", [False, True])
def test_sublayer_wiring(norm_first):
    layer = DecoderLayer(num_heads=H, d_ff=D_FF, norm_first=norm_first)
    x, memory = random(B, T, D), random(B, S, D, seed=1)
    layer(x, memory)
    for i, norm in enumerate(norms(layer)):  # Distinct, so a swap shows.
        norm.gamma.assign(1.0 + 0.5 * random(D, seed=10 + i))
        norm.beta.assign(random(D, seed=20 + i))
    n1, n2, n3 = norms(layer)
    self_att, cross_att, ffn = (
        layer.self_attention,
        layer.cross_attention,
        layer.feed_forward,
    )
    if norm_first:
        h = n1(x)
        y = x + self_att(h, h, use_causal_mask=True)
        y = y + cross_att(n2(y), memory, value_mask=MEMORY_MASK)
        expected = y + ffn(n3(y))
    else:
        y = n1(x + self_att(x, x, use_causal_mask=True))
        y = n2(y + cross_att(y, memory, value_mask=MEMORY_MASK))
        expected = n3(y + ffn(y))
    out = layer(x, memory, memory_mask=MEMORY_MASK, training=False)
    np.testing.assert_allclose(np.asarray(out), np.asarray(expected), atol=1e-5)


def test_attention_scores_are_causal_and_skip_memory_padding():
    embedding = SharedEmbedding(vocab_size=11, d_model=D)
    memory = embedding(np.where(MEMORY_MASK, 4, 0).astype("int32"))  # Keras mask
    layer = DecoderLayer(num_heads=H, d_ff=D_FF)
    out, scores = layer(random(B, T, D), memory, return_attention_scores=True)
    assert tuple(out.shape) == (B, T, D)
    self_w = np.asarray(scores["self_attention"])
    cross_w = np.asarray(scores["cross_attention"])
    assert self_w.shape == (B, H, T, T) and cross_w.shape == (B, H, T, S)
    assert np.all(self_w[..., np.triu(np.ones((T, T), bool), k=1)] == 0)
    padded = np.broadcast_to(~MEMORY_MASK[:, None, None, :], cross_w.shape)
    assert np.all(cross_w[padded] == 0) and np.all(cross_w[~padded] > 0)
    np.testing.assert_allclose(cross_w.sum(-1), np.ones((B, H, T)), atol=1e-6)


@pytest.mark.parametrize("norm_first", [False, True])
def test_cached_steps_equal_full_pass(norm_first):
    layer = DecoderLayer(num_heads=H, d_ff=D_FF, norm_first=norm_first)
    x, memory = random(B, T, D), random(B, S, D, seed=1)
    full = np.asarray(layer(x, memory, memory_mask=MEMORY_MASK))
    cache = (layer.empty_self_cache(B, T), layer.compute_cross_cache(memory))
    steps = []
    for t in range(T):
        out, cache = layer(
            x[:, t : t + 1], memory, memory_mask=MEMORY_MASK, cache=cache, cache_index=t
        )
        steps.append(np.asarray(out))
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=1e-5)


def test_target_padding_mask_only_hides_padded_keys():
    layer = DecoderLayer(num_heads=H, d_ff=D_FF)
    x, memory = random(B, T, D), random(B, S, D, seed=1)
    x_mask = np.array([[True] * T, [True, True, False, False]])
    _, scores = layer(x, memory, x_mask=x_mask, return_attention_scores=True)
    self_w = scores["self_attention"]
    expected = np.asarray(causal_mask(T)) & x_mask[:, None, :]  # (B, T, T)
    self_w = np.asarray(self_w)
    assert np.all(self_w[np.broadcast_to(~expected[:, None], self_w.shape)] == 0)


def test_rejects_d_model_not_divisible_by_num_heads():
    with pytest.raises(ValueError, match=re.escape("d_model=8, num_heads=3")):
        DecoderLayer(num_heads=3, d_ff=D_FF)(random(B, T, 8), random(B, S, 8))


@pytest.mark.parametrize(
    "name, value",
    [("num_heads", 0), ("d_ff", -1), ("dropout", 1.0), ("attention_dropout", -0.5)],
)
def test_rejects_bad_hyperparameters(name, value):
    kwargs = {"num_heads": H, "d_ff": D_FF, name: value}
    with pytest.raises(ValueError, match=re.escape(f"{name}={value!r}")):
        DecoderLayer(**kwargs)


# Decoder-only use (no memory)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_only_standard_checks(norm_first, tmp_path):
    layer, _ = run_layer_checks(
        lambda: DecoderLayer(num_heads=H, d_ff=D_FF, norm_first=norm_first),
        random(B, T, D),
        tmp_path,
        expected_output_shape=(B, T, D),
    )
    assert layer.cross_attention is None and layer.cross_attention_norm is None


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_only_wiring_is_causal_self_attention_then_ffn(norm_first):
    layer = DecoderLayer(num_heads=H, d_ff=D_FF, norm_first=norm_first)
    x = random(B, T, D)
    out, scores = layer(x, return_attention_scores=True)
    n1, n3 = layer.self_attention_norm, layer.feed_forward_norm
    attend, ffn = layer.self_attention, layer.feed_forward
    if norm_first:
        y = x + attend(n1(x), n1(x), use_causal_mask=True)
        expected = y + ffn(n3(y))
    else:
        y = n1(x + attend(x, x, use_causal_mask=True))
        expected = n3(y + ffn(y))
    np.testing.assert_allclose(np.asarray(out), np.asarray(expected), atol=1e-5)
    assert set(scores) == {"self_attention"}  # Decoder-only: no cross-attention.
    self_w = np.asarray(scores["self_attention"])
    assert np.all(np.triu(self_w, k=1) == 0)  # No future key.


def test_decoder_only_layer_refuses_a_memory_and_the_reverse():
    decoder_only = DecoderLayer(num_heads=H, d_ff=D_FF)
    decoder_only(random(B, T, D))
    with pytest.raises(ValueError, match="built without a memory"):
        decoder_only(random(B, T, D), random(B, S, D))
    with_memory = DecoderLayer(num_heads=H, d_ff=D_FF)
    with_memory(random(B, T, D), random(B, S, D))
    with pytest.raises(ValueError, match="`memory`.*is required"):
        with_memory(random(B, T, D))


def test_initializers_reach_every_kernel_and_bias(tmp_path):
    layer, _ = run_layer_checks(
        lambda: DecoderLayer(
            num_heads=H,
            d_ff=D_FF,
            kernel_initializer="ones",
            bias_initializer=keras.initializers.Constant(0.5),
        ),
        {"x": random(B, T, D), "memory": random(B, S, D, seed=1)},
        tmp_path,
    )
    kernels = [w for w in layer.weights if w.path.endswith("kernel")]
    biases = [w for w in layer.weights if w.path.endswith("bias")]
    assert len(kernels) == 10 and len(biases) == 10  # 2 x 4 projections, 2 FFN.
    assert all(np.all(np.asarray(w) == 1) for w in kernels)
    assert all(np.all(np.asarray(w) == 0.5) for w in biases)


def test_cache_and_scores_are_not_asked_together():
    layer = DecoderLayer(num_heads=H, d_ff=D_FF)
    memory = random(B, S, D, seed=1)
    layer(random(B, T, D), memory)
    cache = (layer.empty_self_cache(B, T), layer.compute_cross_cache(memory))
    with pytest.raises(ValueError, match="not both"):
        layer(random(B, 1, D), cache=cache, cache_index=0, return_attention_scores=True)
