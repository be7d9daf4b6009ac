import re
import warnings

import keras
import numpy as np
import pytest
from helpers import run_layer_checks
from keras import ops

from keras_transformer.layers import (
    MultiHeadAttention,
    SharedEmbedding,
    causal_mask,
)

B, T, S, D, H, K = 2, 3, 5, 8, 2, 4


def numpy_mha(layer, query, value, key=None, mask=None):
    """MultiHead(Q, K, V) from the layer's own weights, in float64 NumPy."""
    key = value if key is None else key
    w = {
        "/".join(v.path.split("/")[-2:]): v.numpy().astype(np.float64)
        for v in layer.weights
    }

    def project(x, name):  # (B, T, D) x (D, H, K) -> (B, H, T, K)
        y = np.einsum("btd,dhk->bhtk", x, w[f"{name}/kernel"])
        return y + w[f"{name}/bias"][None, :, None, :] if layer.use_bias else y

    q, k, v = project(query, "query"), project(key, "key"), project(value, "value")
    logits = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])  # (B, H, T, S)
    if mask is not None:
        logits = np.where(mask[:, None], logits, -np.inf)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    heads = weights @ v  # (B, H, T, V)
    output = np.einsum("bhtv,hvd->btd", heads, w["attention_output/kernel"])
    return (output + w["attention_output/bias"] if layer.use_bias else output), weights


def keras_twins(query, value, **kwargs):
    """Our layer and Keras's, built on `query`/`value`, with the same weights.

    Our weights are set to random values first, so the biases are not zero.
    """
    kwargs = {"num_heads": H, "key_dim": K, **kwargs}
    ours = MultiHeadAttention(**kwargs)
    theirs = keras.layers.MultiHeadAttention(**kwargs)
    ours(query, value)
    theirs(query, value)
    for v in ours.weights:
        v.assign(random(*v.shape, seed=len(v.path)))
    theirs.set_weights(ours.get_weights())
    return ours, theirs


def random(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def padded_ids(batch, length, real_lengths, vocab=11, seed=0):
    ids = np.random.default_rng(seed).integers(1, vocab, (batch, length))
    for row, n in enumerate(real_lengths):
        ids[row, n:] = 0
    return ids.astype("int32")


class MaskProbe(keras.layers.Layer):
    """Outputs the Keras mask it receives, as floats."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, x, mask=None):
        return ops.cast(mask, "float32")


def assert_close(a, b, atol=1e-6):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=atol)


def decode_step_by_step(layer, x, step=1, **kwargs):
    """Outputs of `x` fed `step` positions at a time through the cache."""
    cache, pieces = layer.empty_cache(x.shape[0], x.shape[1]), []
    for t in range(0, x.shape[1], step):
        chunk = x[:, t : t + step]
        out, cache = layer(chunk, chunk, cache=cache, cache_update_index=t, **kwargs)
        pieces.append(np.asarray(out))
    return np.concatenate(pieces, axis=1), cache


# Standard checks


@pytest.mark.parametrize(
    "kwargs",
    [
        {"key_dim": K},
        {"key_dim": 3, "value_dim": 5, "output_shape": 6, "use_bias": False},
    ],
    ids=["defaults", "custom-dims"],
)
def test_standard_checks_cross_attention(kwargs, tmp_path):
    output_dim = kwargs.get("output_shape", D)
    run_layer_checks(
        lambda: MultiHeadAttention(num_heads=H, **kwargs),
        {"query": random(B, T, D), "value": random(B, S, D, seed=1)},
        tmp_path,
        expected_output_shape=(B, T, output_dim),
    )


def test_standard_checks_causal_self_attention(tmp_path):
    x = random(B, T, D)
    run_layer_checks(
        lambda: MultiHeadAttention(num_heads=H, key_dim=K),
        {"query": x, "value": x},
        tmp_path,
        call_kwargs={"use_causal_mask": True},
    )


def test_standard_checks_sliding_window(tmp_path):
    layer, _ = run_layer_checks(
        lambda: MultiHeadAttention(num_heads=H, key_dim=K, sliding_window=2),
        {"query": random(B, S, D), "value": random(B, S, D, seed=1)},
        tmp_path,
    )
    assert layer.get_config()["sliding_window"] == 2


# Meaning: the paper's formula, and Keras's layer with the same weights


@pytest.mark.parametrize("use_bias", [True, False])
@pytest.mark.parametrize("masked", [False, True])
def test_matches_numpy_reference(use_bias, masked):
    layer = MultiHeadAttention(num_heads=H, key_dim=D // H, use_bias=use_bias)
    query, value, key = (
        random(B, T, D),
        random(B, S, 6, seed=1),
        random(B, S, 7, seed=2),
    )
    layer(query, value, key)
    if use_bias:  # Non-zero biases, so the reference checks where they go.
        for v in layer.weights:
            if v.path.endswith("/bias"):
                v.assign(random(*v.shape, seed=3))
    mask = None
    if masked:
        mask = np.random.default_rng(4).random((B, T, S)) < 0.6
        mask[..., 0] = True
    out, scores = layer(
        query, value, key, attention_mask=mask, return_attention_scores=True
    )
    ref_out, ref_scores = numpy_mha(layer, query, value, key, mask)
    assert layer.query_dense.kernel.shape == (D, H, D // H)
    assert layer.key_dense.kernel.shape == (7, H, D // H)
    assert layer.value_dense.kernel.shape == (6, H, D // H)
    assert layer.output_dense.kernel.shape == (H, D // H, D)
    assert_close(scores, ref_scores, atol=1e-5)
    assert_close(out, ref_out, atol=1e-5)
    # Without scores Keras computes with `ops.dot_product_attention`: the same.
    assert_close(layer(query, value, key, attention_mask=mask), ref_out, atol=1e-5)


@pytest.mark.parametrize(
    "case", ["cross-attention", "padded cross-attention", "causal", "padded causal"]
)
@pytest.mark.parametrize("return_attention_scores", [False, True])
def test_equals_keras_layer_with_the_same_weights(case, return_attention_scores):
    query = random(B, T, D)
    value = query if "causal" in case else random(B, S, D, seed=1)
    ours, theirs = keras_twins(query, value)
    kwargs = {"use_causal_mask": "causal" in case}
    if "padded" in case:
        mask = np.ones((B, value.shape[1]), bool)
        mask[1, 2:] = False
        kwargs["value_mask"] = mask
    results = [
        layer(query, value, return_attention_scores=return_attention_scores, **kwargs)
        for layer in (ours, theirs)
    ]
    for a, b in zip(*(keras.tree.flatten(r) for r in results), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("rank", [2, 3, 4])
@pytest.mark.parametrize("use_causal_mask", [False, True])
def test_attention_mask_of_each_rank_as_in_keras(rank, use_causal_mask):
    # num_heads == T: a (T, S) mask put on the heads axis has a valid shape
    # and silently applies query rows to heads; Keras's layer is the judge.
    heads = length = 3
    query, value = random(B, length, D), random(B, S, D, seed=1)
    ours, theirs = keras_twins(query, value, num_heads=heads)
    shape = {2: (length, S), 3: (B, length, S), 4: (B, heads, length, S)}[rank]
    mask = np.random.default_rng(rank).random(shape) < 0.5
    mask[..., 0] = True  # Every query may attend to something.
    results = [
        layer(
            query,
            value,
            attention_mask=mask,
            use_causal_mask=use_causal_mask,
            return_attention_scores=True,
        )
        for layer in (ours, theirs)
    ]
    (out, scores), (keras_out, keras_scores) = results
    assert_close(scores, keras_scores)
    assert_close(out, keras_out)
    allowed = np.broadcast_to(mask if rank != 3 else mask[:, None], scores.shape)
    assert np.all(np.asarray(scores)[~allowed] == 0)


def test_scores_shape_eager_and_symbolic_cross_attention():
    layer = MultiHeadAttention(num_heads=H, key_dim=K)
    out, scores = layer(random(B, T, D), random(B, S, D), return_attention_scores=True)
    assert tuple(out.shape) == (B, T, D) and tuple(scores.shape) == (B, H, T, S)

    query, memory = keras.Input((T, D)), keras.Input((S, D))
    sym_out, sym_scores = MultiHeadAttention(num_heads=H, key_dim=K)(
        query, memory, return_attention_scores=True
    )
    assert tuple(sym_out.shape) == (None, T, D)
    assert tuple(sym_scores.shape) == (None, H, T, S)
    model = keras.Model([query, memory], [sym_out, sym_scores])
    outputs = model([random(B, T, D), random(B, S, D)])
    assert tuple(outputs[1].shape) == (B, H, T, S)


@pytest.mark.parametrize("embedding", ["keras", "shared"])
def test_keras_masks_pad_keys_and_queries_as_in_keras(embedding):
    if embedding == "keras":
        embed = keras.layers.Embedding(11, D, mask_zero=True)
    else:
        embed = SharedEmbedding(11, D)
    query_ids = padded_ids(B, T, [3, 2])
    value_ids = padded_ids(B, S, [4, 2], seed=1)
    # Fresh masked tensors for every call: Keras's layer takes the Keras
    # masks off its inputs.
    ours, theirs = keras_twins(embed(query_ids), embed(value_ids))
    query, value = embed(query_ids), embed(value_ids)
    out, scores = ours(query, value, return_attention_scores=True)
    keras_out, keras_scores = theirs(
        embed(query_ids), embed(value_ids), return_attention_scores=True
    )
    assert_close(out, keras_out)
    assert_close(scores, keras_scores)
    # The query's mask is passed on; padded keys get weight exactly 0, and
    # so do all keys for padded queries.
    np.testing.assert_array_equal(np.asarray(out._keras_mask), query_ids != 0)
    scores = np.asarray(scores)
    padding = (value_ids == 0)[:, None, None, :] | (query_ids == 0)[:, None, :, None]
    assert np.all(scores[np.broadcast_to(padding, scores.shape)] == 0.0)
    assert np.all(scores[np.broadcast_to(~padding, scores.shape)] > 0.0)
    # The keys' padding passed explicitly on mask-free copies: the same at
    # every real query (Keras takes the queries' padding from the Keras mask
    # only; outputs at padded queries mean nothing).
    explicit = ours(
        ops.convert_to_tensor(np.asarray(query)),
        ops.convert_to_tensor(np.asarray(value)),
        value_mask=value_ids != 0,
    )
    real = query_ids != 0
    assert_close(np.asarray(explicit)[real], np.asarray(out)[real])
    unmasked = ours(
        ops.convert_to_tensor(np.asarray(query)),
        ops.convert_to_tensor(np.asarray(value)),
    )
    assert np.max(np.abs(np.asarray(unmasked) - np.asarray(out))) > 1e-3


def test_padding_the_keys_changes_nothing():
    layer = MultiHeadAttention(num_heads=H, key_dim=K)
    query, memory = random(B, T, D), random(B, S, D, seed=1)
    expected = np.asarray(layer(query, memory))
    padded = np.concatenate([memory, random(B, 4, D, seed=2)], axis=1)
    mask = np.arange(S + 4)[None, :].repeat(B, 0) < S
    assert_close(layer(query, padded, value_mask=mask), expected, atol=1e-5)
    cache = layer.compute_cache(padded)
    out, _ = layer(query, padded, value_mask=mask, cache=cache)
    assert_close(out, expected, atol=1e-5)


def test_keras_mask_reaches_next_layer_in_functional_model():
    ids = keras.Input((T,), dtype="int32")
    x = SharedEmbedding(11, D)(ids)
    x = MultiHeadAttention(num_heads=H, key_dim=K)(x, x)
    x = MultiHeadAttention(num_heads=H, key_dim=K)(x, x)  # Chains keep the mask.
    model = keras.Model(ids, MaskProbe()(x))
    query_ids = padded_ids(B, T, [3, 1])
    np.testing.assert_array_equal(np.asarray(model(query_ids)), query_ids != 0)


def test_use_causal_mask():
    layer = MultiHeadAttention(num_heads=H, key_dim=K)
    x = random(B, T, D)
    out, scores = layer(x, x, use_causal_mask=True, return_attention_scores=True)
    scores = np.asarray(scores)
    future = np.triu(np.ones((T, T), bool), k=1)
    assert np.all(scores[..., future] == 0.0) and np.all(scores[..., ~future] > 0)
    explicit = layer(x, x, attention_mask=causal_mask(T))
    assert_close(out, explicit)
    # Combined with an attention mask: both apply.
    extra = np.ones((B, T, T), bool)
    extra[:, 2, 0] = False
    _, combined = layer(
        x, x, attention_mask=extra, use_causal_mask=True, return_attention_scores=True
    )
    combined = np.asarray(combined)
    assert np.all(combined[:, :, 2, 0] == 0) and np.all(combined[..., future] == 0)
    assert_close(combined.sum(-1), np.ones((B, H, T)))


def test_attention_dropout_only_in_training():
    layer = MultiHeadAttention(num_heads=H, key_dim=K, dropout=0.5)
    x = random(B, T, D)
    inference = np.asarray(layer(x, x, training=False))
    np.testing.assert_array_equal(np.asarray(layer(x, x)), inference)
    assert np.max(np.abs(np.asarray(layer(x, x, training=True)) - inference)) > 1e-3


# The key/value cache


@pytest.mark.parametrize("step", [1, 2])
@pytest.mark.parametrize("causal_flag", [False, True])
def test_self_attention_cache_equals_full_causal_pass(step, causal_flag):
    length = 5
    layer = MultiHeadAttention(num_heads=H, key_dim=K, value_dim=3)
    x = random(B, length, D)
    full = np.asarray(layer(x, x, use_causal_mask=True))
    cache = layer.empty_cache(B, length)
    # (B, H, L, K): heads first, as attention reads them.
    assert tuple(cache[0].shape) == (B, H, length, K)
    assert tuple(cache[1].shape) == (B, H, length, 3)
    pieces = []
    for t in range(0, length, step):
        chunk = x[:, t : t + step]
        if causal_flag:
            kwargs = {"use_causal_mask": True}
        else:
            kwargs = {"attention_mask": causal_mask(chunk.shape[1], length, t)}
        out, cache = layer(chunk, chunk, cache=cache, cache_update_index=t, **kwargs)
        pieces.append(np.asarray(out))
    assert_close(np.concatenate(pieces, axis=1), full, atol=1e-5)
    # The cache now holds every position's keys and values.
    keys, values = layer.compute_cache(x)
    assert_close(cache[0], keys)
    assert_close(cache[1], values)


def test_cached_scores_cover_the_whole_cache():
    length = 4
    layer = MultiHeadAttention(num_heads=H, key_dim=K)
    x = random(B, length, D)
    _, full_scores = layer(x, x, use_causal_mask=True, return_attention_scores=True)
    cache = layer.empty_cache(B, length)
    for t in range(length):
        step = x[:, t : t + 1]
        out, scores, cache = layer(
            step,
            step,
            use_causal_mask=True,
            return_attention_scores=True,
            cache=cache,
            cache_update_index=t,
        )
        assert tuple(scores.shape) == (B, H, 1, length)
        assert_close(scores, np.asarray(full_scores)[:, :, t : t + 1], atol=1e-6)


def test_cache_update_index_may_be_a_tensor_in_a_traced_loop():
    import tensorflow as tf

    length = 4
    layer = MultiHeadAttention(num_heads=H, key_dim=K)
    x = random(B, length, D)
    full = np.asarray(layer(x, x, use_causal_mask=True))

    @tf.function
    def decode(x):
        def body(t, cache, outputs):
            step = tf.gather(x, t[None], axis=1)
            out, cache = layer(
                step, step, use_causal_mask=True, cache=cache, cache_update_index=t
            )
            return t + 1, cache, outputs.write(t, out[:, 0])

        _, _, outputs = tf.while_loop(
            lambda t, *_: t < length,
            body,
            (
                tf.constant(0),
                layer.empty_cache(B, length),
                tf.TensorArray("float32", length),
            ),
        )
        return tf.transpose(outputs.stack(), (1, 0, 2))

    assert_close(decode(tf.constant(x)), full, atol=1e-5)


@pytest.mark.parametrize("padded", [False, True])
def test_cross_attention_cache_equals_uncached(padded):
    layer = MultiHeadAttention(num_heads=H, key_dim=K)
    query, memory = random(B, T, D), random(B, S, D, seed=1)
    memory_mask = np.array([[True] * S, [True, True, False, False, False]])
    kwargs = {"value_mask": memory_mask} if padded else {}
    expected, expected_scores = layer(
        query, memory, return_attention_scores=True, **kwargs
    )
    cache = layer.compute_cache(memory)
    assert tuple(cache[0].shape) == (B, H, S, K)
    out, scores, returned_cache = layer(
        query, memory, cache=cache, return_attention_scores=True, **kwargs
    )
    assert_close(out, expected, atol=1e-5)
    assert_close(scores, expected_scores)
    assert returned_cache[0] is cache[0] and returned_cache[1] is cache[1]
    out, _ = layer(query, memory, cache=cache, **kwargs)  # Without scores.
    assert_close(out, expected, atol=1e-5)


def test_cache_rejects_what_it_cannot_do():
    layer = MultiHeadAttention(num_heads=H, key_dim=K)
    x = random(B, T, D)
    with pytest.raises(ValueError, match="cache_update_index=0"):
        layer(x, x, cache_update_index=0)
    gated = MultiHeadAttention(num_heads=H, key_dim=K, use_gate=True)
    gated(x, x)
    with pytest.raises(ValueError, match="use_gate=True"):
        gated(x, x, cache=gated.empty_cache(B, T), cache_update_index=0)


# Restricted self-attention (sliding_window)


@pytest.mark.parametrize("use_causal_mask", [False, True])
def test_sliding_window_zeroes_weights_outside_the_band_as_keras(use_causal_mask):
    window, length = 2, 6
    x = random(B, length, D)
    ours, theirs = keras_twins(x, x, sliding_window=window)
    out, scores = ours(
        x, x, use_causal_mask=use_causal_mask, return_attention_scores=True
    )
    keras_out, keras_scores = theirs(
        x, x, use_causal_mask=use_causal_mask, return_attention_scores=True
    )
    i, j = np.indices((length, length))
    allowed = (np.abs(i - j) < window) & ((j <= i) | (not use_causal_mask))
    scores = np.asarray(scores)
    assert np.all(scores[..., ~allowed] == 0) and np.all(scores[..., allowed] > 0)
    assert_close(scores, keras_scores)
    assert_close(out, keras_out)
    assert_close(ours(x, x, use_causal_mask=use_causal_mask), keras_out)


def test_sliding_window_as_wide_as_the_sequence_is_full_attention():
    full = MultiHeadAttention(num_heads=H, key_dim=K)
    x, memory = random(B, T, D), random(B, S, D, seed=1)
    expected = np.asarray(full(x, memory))
    # Key j and query i are at most max(T, S) - 1 apart.
    restricted = MultiHeadAttention(num_heads=H, key_dim=K, sliding_window=max(T, S))
    restricted(x, memory)
    restricted.set_weights(full.get_weights())
    assert_close(restricted(x, memory), expected)


@pytest.mark.parametrize("step", [1, 2])
def test_sliding_window_cache_equals_full_pass(step):
    length = 6
    layer = MultiHeadAttention(num_heads=H, key_dim=K, sliding_window=3)
    x = random(B, length, D)
    full = np.asarray(layer(x, x, use_causal_mask=True))
    steps, _ = decode_step_by_step(layer, x, step, use_causal_mask=True)
    assert_close(steps, full, atol=1e-5)


# Bad input (the constructor's checks are Keras's)


def test_key_dim_is_required():
    with pytest.raises(TypeError, match="key_dim"):
        MultiHeadAttention(num_heads=H)
    # Any d_model works: key_dim need not divide it.
    out = MultiHeadAttention(num_heads=3, key_dim=4)(random(B, T, 8), random(B, S, 8))
    assert tuple(out.shape) == (B, T, 8)


@pytest.mark.parametrize("value", [0, -2, 2.0])
def test_rejects_bad_num_heads(value):
    with pytest.raises(ValueError, match=re.escape(f"num_heads={value!r}")):
        MultiHeadAttention(num_heads=value, key_dim=K)


@pytest.mark.parametrize("name", ["key_dim", "value_dim", "sliding_window"])
@pytest.mark.parametrize("value", [0, -2, 1.5])
def test_rejects_bad_sizes(name, value):
    with pytest.raises(ValueError, match=re.escape(f"{name}={value!r}")):
        MultiHeadAttention(**{"num_heads": H, "key_dim": K, name: value})


def test_rejects_keys_and_values_of_different_lengths():
    layer = MultiHeadAttention(num_heads=H, key_dim=K)
    with pytest.raises(ValueError, match="except the last one, must be equal"):
        layer(random(B, T, D), random(B, S, D), random(B, S + 1, D))
    with pytest.raises(ValueError, match="must be equal"):
        layer.compute_output_shape((B, T, D), (B, S, D), (B, S + 1, D))


# Through the sublayers: int8 and LoRA


def test_quantize_int8_runs_through_the_sublayers():
    layer = MultiHeadAttention(num_heads=H, key_dim=K)
    query, keys = keras.Input((T, D)), keras.Input((S, D))
    model = keras.Model([query, keys], layer(query, keys))
    x, memory = random(B, T, D), random(B, S, D, seed=1)
    before = np.asarray(layer(x, memory))
    with warnings.catch_warnings():  # Keras names each layer it leaves float.
        warnings.simplefilter("ignore")
        model.quantize("int8")  # Keras's walk over the layers it can quantize.
    sublayers = (layer.query_dense, layer.key_dense, layer.value_dense)
    assert all(s.quantization_mode == "int8" for s in (*sublayers, layer.output_dense))
    assert str(layer.query_dense.kernel.dtype) == "int8"
    after = np.asarray(layer(x, memory))
    assert 0 < np.abs(after - before).max() < 0.05 * np.abs(before).max()
    # The cache goes through the same quantized projections.
    out, _ = layer(x, memory, cache=layer.compute_cache(memory))
    assert_close(out, after, atol=1e-5)
    steps, _ = decode_step_by_step(layer, x, use_causal_mask=True)
    assert_close(steps, layer(x, x, use_causal_mask=True), atol=1e-5)


def test_enable_lora_freezes_the_projections_and_starts_from_the_same_output():
    layer = MultiHeadAttention(H, K)
    x = random(B, T, D)
    before = np.asarray(layer(x, x))
    with pytest.raises(ValueError, match="projections"):
        layer.enable_lora(2, projections=("query", "output"))
    layer.enable_lora(2, projections=("query", "key", "value", "attention_output"))
    np.testing.assert_array_equal(np.asarray(layer(x, x)), before)
    names = sorted(v.path.split("/", 1)[1] for v in layer.trainable_variables)
    assert names == sorted(
        f"{p}/lora_kernel_{ab}"
        for p in ("query", "key", "value", "attention_output")
        for ab in "ab"
    )
    # Non-zero updates reach the cached call too.
    for v in layer.trainable_variables:
        v.assign(random(*v.shape, seed=5))
    steps, _ = decode_step_by_step(layer, x, use_causal_mask=True)
    assert_close(steps, layer(x, x, use_causal_mask=True), atol=1e-5)
