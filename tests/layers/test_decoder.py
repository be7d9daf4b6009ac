import re

import keras
import numpy as np
import pytest
from helpers import run_layer_checks
from keras import ops

from keras_transformer.layers import Decoder, Encoder, SharedEmbedding

B, T, S, D, H, D_FF, V = 2, 5, 4, 8, 2, 16, 13
SOURCE = np.array([[3, 4, 5, 6], [7, 8, 0, 0]], "int32")
TARGET = np.array([[2, 9, 10, 11, 12], [2, 4, 6, 0, 0]], "int32")


def make_decoder(**kwargs):
    config = {"num_layers": 2, "num_heads": H, "d_ff": D_FF, "max_length": 12}
    return Decoder(**{**config, **kwargs})


def pad(ids, extra):
    return np.concatenate([ids, np.zeros((ids.shape[0], extra), ids.dtype)], axis=1)


class Stack:
    """Shared embedding, a one-layer encoder and a decoder, as in the model."""

    def __init__(self, **kwargs):
        self.embedding = SharedEmbedding(vocab_size=V, d_model=D)
        self.encoder = Encoder(num_layers=1, num_heads=H, d_ff=D_FF, **kwargs)
        self.decoder = make_decoder(**kwargs)

    def memory(self, source):
        return self.encoder(self.embedding(source), training=False)

    def __call__(self, source, target, **kwargs):
        x = self.embedding(target)
        return self.decoder(x, self.memory(source), training=False, **kwargs)


@pytest.mark.parametrize(
    "norm_first, learned_positions", [(False, False), (True, True)]
)
def test_standard_checks(norm_first, learned_positions, tmp_path):
    rng = np.random.default_rng(0)
    run_layer_checks(
        lambda: make_decoder(
            num_layers=1, norm_first=norm_first, learned_positions=learned_positions
        ),
        {
            "x": rng.normal(size=(B, T, D)).astype("float32"),
            "memory": rng.normal(size=(B, S, D)).astype("float32"),
        },
        tmp_path,
        expected_output_shape=(B, T, D),
    )


@pytest.mark.parametrize("norm_first", [False, True])
def test_padding_invariance(norm_first):
    stack = Stack(norm_first=norm_first)
    out = np.asarray(stack(SOURCE, TARGET))
    real = TARGET != 0
    # Padding appended to the target.
    padded_target = np.asarray(stack(SOURCE, pad(TARGET, 3)))
    np.testing.assert_allclose(padded_target[:, :T][real], out[real], atol=1e-5)
    # Padding appended to the source, i.e. to the memory.
    padded_source = np.asarray(stack(pad(SOURCE, 3), TARGET))
    np.testing.assert_allclose(padded_source[real], out[real], atol=1e-5)
    # Sensitivity: the same memory without its padding mask changes outputs.
    memory = ops.convert_to_tensor(np.asarray(stack.memory(pad(SOURCE, 3))))
    unmasked = np.asarray(stack.decoder(stack.embedding(TARGET), memory))
    assert np.max(np.abs(unmasked[real] - out[real])) > 1e-3


@pytest.mark.parametrize("norm_first", [False, True])
def test_no_future_leakage(norm_first):
    stack = Stack(norm_first=norm_first)
    target = TARGET[:1]
    out = np.asarray(stack(SOURCE[:1], target))
    for t in range(T - 1):
        changed = target.copy()
        changed[:, t + 1 :] = (changed[:, t + 1 :] + 5) % (V - 1) + 1
        changed_out = np.asarray(stack(SOURCE[:1], changed))
        np.testing.assert_allclose(changed_out[:, : t + 1], out[:, : t + 1], atol=1e-5)
        assert (
            np.min(np.max(np.abs(changed_out[:, t + 1 :] - out[:, t + 1 :]), -1)) > 1e-4
        )


@pytest.mark.parametrize(
    "norm_first, learned_positions", [(False, False), (True, True)]
)
def test_cached_decoding_equals_full_pass(norm_first, learned_positions):
    stack = Stack(norm_first=norm_first, learned_positions=learned_positions)
    full = np.asarray(stack(SOURCE, TARGET))
    memory = stack.memory(SOURCE)  # Carries the source padding as a Keras mask.
    max_length = T + 2  # Unwritten slots must not matter.
    cache = stack.decoder.init_cache(memory, max_length)
    assert len(cache) == 2
    (self_keys, self_values), (cross_keys, _) = cache[0]
    assert tuple(self_keys.shape) == (B, H, max_length, D // H)
    assert tuple(cross_keys.shape) == (B, H, S, D // H)
    steps = []
    for t in range(T):
        x = stack.embedding(TARGET[:, t : t + 1])
        out, cache = stack.decoder(
            x, memory, cache=cache, cache_index=t, training=False
        )
        steps.append(np.asarray(out))
    # Padded target positions are never decoded; compare the real ones.
    real = TARGET != 0
    np.testing.assert_allclose(
        np.concatenate(steps, axis=1)[real], full[real], atol=1e-5
    )


def test_attention_scores_per_layer():
    stack = Stack()
    out, scores = stack(SOURCE, TARGET, return_attention_scores=True)
    assert tuple(out.shape) == (B, T, D)
    assert len(scores["self_attention"]) == len(scores["cross_attention"]) == 2
    future = np.triu(np.ones((T, T), bool), k=1)
    for self_w, cross_w in zip(
        scores["self_attention"], scores["cross_attention"], strict=True
    ):
        self_w, cross_w = np.asarray(self_w), np.asarray(cross_w)
        assert self_w.shape == (B, H, T, T) and cross_w.shape == (B, H, T, S)
        assert np.all(self_w[..., future] == 0)
        padded = np.broadcast_to((SOURCE == 0)[:, None, None, :], cross_w.shape)
        assert np.all(cross_w[padded] == 0) and np.all(cross_w[~padded] > 0)


class Seq2Seq(keras.Model):
    """A tiny Transformer built from the layers, subclassing `keras.Model`."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.embedding = SharedEmbedding(vocab_size=V, d_model=D)
        self.encoder = Encoder(num_layers=1, num_heads=H, d_ff=D_FF, max_length=12)
        self.decoder = make_decoder(num_layers=1)

    def call(self, inputs, training=None):
        source, target = inputs
        memory = self.encoder(self.embedding(source), training=training)
        x = self.decoder(self.embedding(target), memory, training=training)
        return self.embedding(x, reverse=True)


def test_subclassed_model_fits_one_step():
    # No call before `fit`: Keras builds the layers inside a scratch graph,
    # which must leave no graph tensors behind in them. (Run eagerly: tracing
    # this train step costs ~15 s of CPU; the Sequential test in
    # test_encoder.py trains in graph mode.)
    model = Seq2Seq()
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        run_eagerly=True,
    )
    labels = np.roll(TARGET, -1, axis=1)
    history = model.fit((SOURCE, TARGET), labels, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert len(model.embedding.weights) == 1
    assert tuple(model((SOURCE, TARGET), training=False).shape) == (B, T, V)


@pytest.mark.parametrize(
    "name, value",
    [
        ("num_layers", 0),
        ("num_heads", 0),
        ("d_ff", -16),
        ("dropout", -0.1),
        ("attention_dropout", 1.0),
    ],
)
def test_rejects_bad_hyperparameters(name, value):
    with pytest.raises(ValueError, match=re.escape(f"{name}={value!r}")):
        make_decoder(**{name: value})


def test_rejects_d_model_not_divisible_by_num_heads():
    x = np.zeros((1, 3, 8), "float32")
    with pytest.raises(ValueError, match=re.escape("d_model=8, num_heads=3")):
        make_decoder(num_heads=3)(x, x)


# Decoder-only use (no memory)


def test_decoder_only_no_future_leakage_and_cache_equals_full_pass():
    embedding = SharedEmbedding(vocab_size=V, d_model=D)
    decoder = make_decoder()
    full, scores = decoder(
        embedding(TARGET), training=False, return_attention_scores=True
    )
    assert list(scores) == ["self_attention"] and len(scores["self_attention"]) == 2
    assert all(layer.cross_attention is None for layer in decoder.layers)
    # Changing later tokens changes no earlier position.
    changed = TARGET.copy()
    changed[:, 3:] = 1
    after = np.asarray(decoder(embedding(changed), training=False))
    np.testing.assert_allclose(after[:, :3], np.asarray(full)[:, :3], atol=1e-5)
    # One position at a time with a cache gives the full pass.
    cache = decoder.init_cache(None, T + 2, batch_size=B)
    assert cache[0][1] is None  # No cross-attention keys and values.
    steps = []
    for t in range(T):
        out, cache = decoder(
            embedding(TARGET[:, t : t + 1]), cache=cache, cache_index=t
        )
        steps.append(np.asarray(out))
    real = TARGET != 0
    np.testing.assert_allclose(
        np.concatenate(steps, axis=1)[real], np.asarray(full)[real], atol=1e-5
    )


def test_decoder_only_init_cache_needs_a_batch_size():
    decoder = make_decoder()
    decoder(np.zeros((B, T, D), "float32"))
    with pytest.raises(ValueError, match="batch_size"):
        decoder.init_cache(None, T)
    with pytest.raises(ValueError, match="decoder-only"):
        decoder.init_cache(np.zeros((B, S, D), "float32"), T)
    stack = Stack()
    stack(SOURCE, TARGET)
    with pytest.raises(ValueError, match="needs `memory`"):
        stack.decoder.init_cache(None, T, batch_size=B)
