import re

import h5py
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

B, T, S, D, H = 2, 3, 5, 8, 2


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


# Standard checks


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"key_dim": 3, "value_dim": 5, "output_dim": 6, "use_bias": False},
    ],
    ids=["defaults", "custom-dims"],
)
def test_standard_checks_cross_attention(kwargs, tmp_path):
    output_dim = kwargs.get("output_dim", D)
    run_layer_checks(
        lambda: MultiHeadAttention(num_heads=H, **kwargs),
        {"query": random(B, T, D), "value": random(B, S, D, seed=1)},
        tmp_path,
        expected_output_shape=(B, T, output_dim),
    )


def test_standard_checks_causal_self_attention(tmp_path):
    x = random(B, T, D)
    run_layer_checks(
        lambda: MultiHeadAttention(num_heads=H),
        {"query": x, "value": x},
        tmp_path,
        call_kwargs={"use_causal_mask": True},
    )


# Meaning


@pytest.mark.parametrize("use_bias", [True, False])
@pytest.mark.parametrize("masked", [False, True])
def test_matches_numpy_reference(use_bias, masked):
    layer = MultiHeadAttention(num_heads=H, use_bias=use_bias)
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
    np.testing.assert_allclose(np.asarray(scores), ref_scores, atol=1e-5)
    np.testing.assert_allclose(np.asarray(out), ref_out, atol=1e-5)


@pytest.mark.parametrize("rank", [2, 3, 4])
@pytest.mark.parametrize("use_causal_mask", [False, True])
def test_attention_mask_of_each_rank_as_in_keras(rank, use_causal_mask):
    # num_heads == T: a (T, S) mask put on the heads axis has a valid shape
    # and silently applies query rows to heads; Keras's layer is the judge.
    heads = length = 3
    query, value = random(B, length, D), random(B, S, D, seed=1)
    ours, theirs = keras_twins(query, value, num_heads=heads, key_dim=4)
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
    np.testing.assert_allclose(np.asarray(scores), np.asarray(keras_scores), atol=1e-6)
    np.testing.assert_allclose(np.asarray(out), np.asarray(keras_out), atol=1e-6)
    allowed = np.broadcast_to(mask if rank != 3 else mask[:, None], scores.shape)
    assert np.all(np.asarray(scores)[~allowed] == 0)


def test_rejects_attention_mask_of_rank_five():
    layer = MultiHeadAttention(num_heads=H)
    with pytest.raises(
        ValueError, match=re.escape("attention_mask.shape=(1, 2, 2, 3, 5)")
    ):
        layer(
            random(B, T, D),
            random(B, S, D),
            attention_mask=np.ones((1, 2, 2, T, S), bool),
        )


@pytest.mark.parametrize("inputs", ["self", "memory"])
def test_fused_projections_match_numpy_reference(inputs):
    # Self-attention projects Q, K and V with one matmul, and keys and values
    # of one memory with another; the result must not change.
    layer = MultiHeadAttention(num_heads=H)
    query = random(B, T, D)
    value = query if inputs == "self" else random(B, S, D, seed=1)
    layer(query, value)
    for v in layer.weights:
        if v.path.endswith("/bias"):
            v.assign(random(*v.shape, seed=3))
    out, scores = layer(query, value, return_attention_scores=True)
    separate = layer(query, value, key=ops.array(value), return_attention_scores=True)
    ref_out, ref_scores = numpy_mha(layer, query, value, value, None)
    np.testing.assert_allclose(np.asarray(scores), ref_scores, atol=1e-5)
    np.testing.assert_allclose(np.asarray(out), ref_out, atol=1e-5)
    np.testing.assert_allclose(np.asarray(out), np.asarray(separate[0]), atol=1e-6)


def test_scores_shape_eager_and_symbolic_cross_attention():
    layer = MultiHeadAttention(num_heads=H)
    out, scores = layer(random(B, T, D), random(B, S, D), return_attention_scores=True)
    assert tuple(out.shape) == (B, T, D) and tuple(scores.shape) == (B, H, T, S)

    query, memory = keras.Input((T, D)), keras.Input((S, D))
    sym_out, sym_scores = MultiHeadAttention(num_heads=H)(
        query, memory, return_attention_scores=True
    )
    assert tuple(sym_out.shape) == (None, T, D)
    assert tuple(sym_scores.shape) == (None, H, T, S)
    model = keras.Model([query, memory], [sym_out, sym_scores])
    outputs = model([random(B, T, D), random(B, S, D)])
    assert tuple(outputs[1].shape) == (B, H, T, S)


@pytest.mark.parametrize("embedding", ["keras", "shared"])
def test_keras_masks_pad_keys_and_pass_on_query_mask(embedding):
    if embedding == "keras":
        embed = keras.layers.Embedding(11, D, mask_zero=True)
    else:
        embed = SharedEmbedding(11, D)
    query_ids = padded_ids(B, T, [3, 2])
    value_ids = padded_ids(B, S, [4, 2], seed=1)
    query, value = embed(query_ids), embed(value_ids)
    layer = MultiHeadAttention(num_heads=H)
    out, scores = layer(query, value, return_attention_scores=True)

    # The query's mask is passed on; padded keys get weight exactly 0, and
    # so do all keys for padded queries (Keras's layer masks them too).
    np.testing.assert_array_equal(np.asarray(out._keras_mask), query_ids != 0)
    scores = np.asarray(scores)
    padding = (value_ids == 0)[:, None, None, :] | (query_ids == 0)[:, None, :, None]
    assert np.all(scores[np.broadcast_to(padding, scores.shape)] == 0.0)
    assert np.all(scores[np.broadcast_to(~padding, scores.shape)] > 0.0)
    # Same as passing the padding explicitly on mask-free copies.
    explicit = layer(
        ops.convert_to_tensor(np.asarray(query)),
        ops.convert_to_tensor(np.asarray(value)),
        query_mask=query_ids != 0,
        value_mask=value_ids != 0,
    )
    np.testing.assert_allclose(np.asarray(out), np.asarray(explicit), atol=1e-6)
    unmasked = layer(
        ops.convert_to_tensor(np.asarray(query)),
        ops.convert_to_tensor(np.asarray(value)),
    )
    assert np.max(np.abs(np.asarray(unmasked) - np.asarray(out))) > 1e-3


def test_keras_mask_reaches_next_layer_in_functional_model():
    ids = keras.Input((T,), dtype="int32")
    x = SharedEmbedding(11, D)(ids)
    x = MultiHeadAttention(num_heads=H)(x, x)
    x = MultiHeadAttention(num_heads=H)(x, x)  # Chains keep the mask.
    model = keras.Model(ids, MaskProbe()(x))
    query_ids = padded_ids(B, T, [3, 1])
    np.testing.assert_array_equal(np.asarray(model(query_ids)), query_ids != 0)


def test_use_causal_mask():
    layer = MultiHeadAttention(num_heads=H)
    x = random(B, T, D)
    out, scores = layer(x, x, use_causal_mask=True, return_attention_scores=True)
    scores = np.asarray(scores)
    future = np.triu(np.ones((T, T), bool), k=1)
    assert np.all(scores[..., future] == 0.0) and np.all(scores[..., ~future] > 0)
    explicit = layer(x, x, attention_mask=causal_mask(T))
    np.testing.assert_allclose(np.asarray(out), np.asarray(explicit), atol=1e-6)
    # Combined with an attention mask: both apply.
    extra = np.ones((B, T, T), bool)
    extra[:, 2, 0] = False
    _, combined = layer(
        x, x, attention_mask=extra, use_causal_mask=True, return_attention_scores=True
    )
    combined = np.asarray(combined)
    assert np.all(combined[:, :, 2, 0] == 0) and np.all(combined[..., future] == 0)
    np.testing.assert_allclose(combined.sum(-1), np.ones((B, H, T)), atol=1e-6)


@pytest.mark.parametrize("step", [1, 2])
@pytest.mark.parametrize("causal_flag", [False, True])
def test_self_attention_cache_equals_full_causal_pass(step, causal_flag):
    length = 5
    layer = MultiHeadAttention(num_heads=H)
    x = random(B, length, D)
    full = np.asarray(layer(x, x, use_causal_mask=True))
    cache = layer.empty_cache(B, length)
    assert tuple(cache[0].shape) == (B, H, length, D // H)
    pieces = []
    for t in range(0, length, step):
        chunk = x[:, t : t + step]
        if causal_flag:
            kwargs = {"use_causal_mask": True}
        else:
            kwargs = {"attention_mask": causal_mask(chunk.shape[1], length, t)}
        out, cache = layer(chunk, chunk, cache=cache, cache_update_index=t, **kwargs)
        pieces.append(np.asarray(out))
    np.testing.assert_allclose(np.concatenate(pieces, axis=1), full, atol=1e-5)
    # The cache now holds every position's keys and values.
    keys, values = layer.compute_cache(x)
    np.testing.assert_allclose(np.asarray(cache[0]), np.asarray(keys), atol=1e-6)
    np.testing.assert_allclose(np.asarray(cache[1]), np.asarray(values), atol=1e-6)


@pytest.mark.parametrize("padded", [False, True])
def test_cross_attention_cache_equals_uncached(padded):
    layer = MultiHeadAttention(num_heads=H)
    query, memory = random(B, T, D), random(B, S, D, seed=1)
    memory_mask = np.array([[True] * S, [True, True, False, False, False]])
    kwargs = {"value_mask": memory_mask} if padded else {}
    expected, expected_scores = layer(
        query, memory, return_attention_scores=True, **kwargs
    )
    cache = layer.compute_cache(memory)
    out, scores, returned_cache = layer(
        query, memory, cache=cache, return_attention_scores=True, **kwargs
    )
    np.testing.assert_allclose(np.asarray(out), np.asarray(expected), atol=1e-5)
    np.testing.assert_allclose(
        np.asarray(scores), np.asarray(expected_scores), atol=1e-6
    )
    assert returned_cache[0] is cache[0] and returned_cache[1] is cache[1]


@pytest.mark.parametrize("case", ["padded cross-attention", "causal self-attention"])
def test_training_path_compiled_by_xla_equals_plain_ops(case):
    # Without attention dropout, training calls traced with static shapes run
    # the attention of the heads compiled by XLA; inference calls run the
    # plain ops. Same values, same gradients, scores included.
    import tensorflow as tf

    layer = MultiHeadAttention(num_heads=H)
    query = random(B, T, D)
    if case == "causal self-attention":
        memory, kwargs = query, {"use_causal_mask": True}
    else:
        memory = random(B, S, D, seed=1)
        query_mask = np.array([[True] * T, [True] * (T - 1) + [False]])
        memory_mask = np.array([[True] * S, [True, True, False, False, False]])
        kwargs = {"query_mask": query_mask, "value_mask": memory_mask}
    query, memory = tf.constant(query), tf.constant(memory)

    @tf.function
    def run(query, memory, training):
        with tf.GradientTape() as tape:
            tape.watch([query, memory])
            out, scores = layer(
                query, memory, return_attention_scores=True, training=training, **kwargs
            )
            loss = tf.reduce_sum(out * out) + tf.reduce_sum(scores[..., 0])
        grads = tape.gradient(loss, [query, memory, *layer.trainable_weights])
        return [out, scores, *grads]

    def compiled_calls(training):
        graph = run.get_concrete_function(query, memory, training).graph
        return sum("_XlaMustCompile" in n.attr for n in graph.as_graph_def().node)

    compiled = run(query, memory, True)
    plain = run(query, memory, False)
    assert compiled_calls(True) == 2  # Heads' attention and its gradient.
    assert compiled_calls(False) == 0
    assert len(compiled) == 2 + 2 + 8
    for a, b in zip(compiled, plain, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)


def test_attention_dropout_only_in_training():
    layer = MultiHeadAttention(num_heads=H, dropout=0.5)
    x = random(B, T, D)
    inference = np.asarray(layer(x, x, training=False))
    np.testing.assert_array_equal(np.asarray(layer(x, x)), inference)
    assert np.max(np.abs(np.asarray(layer(x, x, training=True)) - inference)) > 1e-3


# Bad input


def test_rejects_d_model_not_divisible_by_num_heads():
    with pytest.raises(ValueError, match=re.escape("d_model=8, num_heads=3")):
        MultiHeadAttention(num_heads=3)(random(B, T, 8), random(B, S, 8))
    # With an explicit key_dim any d_model works.
    out = MultiHeadAttention(num_heads=3, key_dim=4)(random(B, T, 8), random(B, S, 8))
    assert tuple(out.shape) == (B, T, 8)


def test_rejects_two_dimensional_query():
    with pytest.raises(ValueError, match=re.escape("query.shape=(2, 8)")):
        MultiHeadAttention(num_heads=H)(random(2, 8), random(B, S, D))


def test_rejects_attention_mask_that_does_not_broadcast():
    layer = MultiHeadAttention(num_heads=H)
    with pytest.raises(ValueError, match=re.escape("attention_mask.shape=(2, 3, 4)")):
        layer(random(B, T, D), random(B, S, D), attention_mask=np.ones((2, 3, 4), bool))


@pytest.mark.parametrize("value", [0, -2, 2.0])
def test_rejects_bad_num_heads(value):
    with pytest.raises(ValueError, match=re.escape(f"num_heads={value!r}")):
        MultiHeadAttention(num_heads=value)


@pytest.mark.parametrize("value", [-0.1, 1.0, 1.5])
def test_rejects_bad_dropout(value):
    with pytest.raises(ValueError, match=re.escape(f"dropout={value!r}")):
        MultiHeadAttention(num_heads=H, dropout=value)


@pytest.mark.parametrize(
    "name", ["key_dim", "value_dim", "output_dim", "sliding_window"]
)
@pytest.mark.parametrize("value", [0, -2, 1.5])
def test_rejects_bad_sizes(name, value):
    with pytest.raises(ValueError, match=re.escape(f"argument `{name}`")):
        MultiHeadAttention(num_heads=H, **{name: value})


def test_rejects_keys_and_values_of_different_lengths():
    layer = MultiHeadAttention(num_heads=H)
    with pytest.raises(ValueError, match="except the last one, must be equal"):
        layer(random(B, T, D), random(B, S, D), random(B, S + 1, D))
    with pytest.raises(ValueError, match="must be equal"):
        layer.compute_output_shape((B, T, D), (B, S, D), (B, S + 1, D))


# Restricted self-attention (sliding_window)


def test_standard_checks_sliding_window(tmp_path):
    layer, _ = run_layer_checks(
        lambda: MultiHeadAttention(num_heads=H, sliding_window=2),
        {"query": random(B, S, D), "value": random(B, S, D, seed=1)},
        tmp_path,
    )
    assert layer.get_config()["sliding_window"] == 2


@pytest.mark.parametrize("use_causal_mask", [False, True])
def test_sliding_window_zeroes_weights_outside_the_band_as_keras(use_causal_mask):
    window, length = 2, 6
    x = random(B, length, D)
    ours, theirs = keras_twins(x, x, num_heads=H, key_dim=4, sliding_window=window)
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
    np.testing.assert_allclose(scores, np.asarray(keras_scores), atol=1e-6)
    np.testing.assert_allclose(np.asarray(out), np.asarray(keras_out), atol=1e-6)


def test_sliding_window_as_wide_as_the_sequence_is_full_attention():
    full = MultiHeadAttention(num_heads=H)
    x, memory = random(B, T, D), random(B, S, D, seed=1)
    expected = np.asarray(full(x, memory))
    # Key j and query i are at most max(T, S) - 1 apart.
    restricted = MultiHeadAttention(num_heads=H, sliding_window=max(T, S))
    restricted(x, memory)
    restricted.set_weights(full.get_weights())
    np.testing.assert_allclose(np.asarray(restricted(x, memory)), expected, atol=1e-6)


def test_sliding_window_cache_equals_full_pass():
    length = 6
    layer = MultiHeadAttention(num_heads=H, sliding_window=3)
    x = random(B, length, D)
    full = np.asarray(layer(x, x, use_causal_mask=True))
    cache, pieces = layer.empty_cache(B, length), []
    for t in range(length):
        step = x[:, t : t + 1]
        out, cache = layer(
            step, step, use_causal_mask=True, cache=cache, cache_update_index=t
        )
        pieces.append(np.asarray(out))
    np.testing.assert_allclose(np.concatenate(pieces, axis=1), full, atol=1e-5)


@pytest.mark.parametrize("use_causal_mask", [False, True])
def test_sliding_window_on_long_inputs_computes_only_the_band(use_causal_mask):
    # At least 32 windows long: `restricted_attention` (blocks) runs instead
    # of full scores; Keras's layer, with the same weights, is the judge.
    window, length = 2, 70
    x = random(B, length, D)
    ours, theirs = keras_twins(x, x, num_heads=H, key_dim=4, sliding_window=window)
    key_mask = np.ones((B, length), bool)
    key_mask[1, 60:] = False
    assert ours._blocked_window(x[..., None], x[..., None], None, None, False)
    out = ours(x, x, value_mask=key_mask, use_causal_mask=use_causal_mask)
    allowed = np.broadcast_to(key_mask[:, None, :], (B, length, length))
    expected = theirs(x, x, attention_mask=allowed, use_causal_mask=use_causal_mask)
    # Padded positions whose window holds only padding: zeros here, uniform
    # weights in Keras (docs/design.md); their outputs are never used.
    real = key_mask
    np.testing.assert_allclose(
        np.asarray(out)[real], np.asarray(expected)[real], atol=1e-5
    )


def test_standard_checks_sliding_window_on_long_inputs(tmp_path):
    run_layer_checks(
        lambda: MultiHeadAttention(num_heads=H, sliding_window=2),
        {"query": random(B, 64, D), "value": random(B, 64, D, seed=1)},
        tmp_path,
    )


def test_loads_weights_files_of_earlier_versions(tmp_path):
    # Before the Keras sublayers, the eight arrays were the layer's own
    # (query kernel and bias, key..., value..., output...): such files load.
    def model(seed):
        keras.utils.set_random_seed(seed)
        x = keras.Input((T, D))
        return keras.Model(x, MultiHeadAttention(H, name="mha")(x, x))

    trained, fresh = model(0), model(1)
    path = tmp_path / "old.weights.h5"
    trained.save_weights(path)
    with h5py.File(path, "r+") as f:
        group = f["layers/multi_head_attention"]
        old = group.require_group("vars")
        arrays = [
            group[f"{name}_dense/vars/{i}"][()]
            for name in ("query", "key", "value", "output")
            for i in (0, 1)
        ]
        for name in ("query", "key", "value", "output"):
            del group[f"{name}_dense"]
        for i, array in enumerate(arrays):
            old.create_dataset(str(i), data=array)
    x = random(B, T, D)
    assert not np.allclose(fresh(x), trained(x))
    fresh.load_weights(path)
    np.testing.assert_array_equal(np.asarray(fresh(x)), np.asarray(trained(x)))
    # And the file of the current layout still loads after that.
    trained.save_weights(tmp_path / "new.weights.h5")
    fresh.load_weights(tmp_path / "new.weights.h5")
    np.testing.assert_array_equal(np.asarray(fresh(x)), np.asarray(trained(x)))


def test_enable_lora_freezes_the_projections_and_starts_from_the_same_output():
    layer = MultiHeadAttention(H)
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
