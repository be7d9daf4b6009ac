import re

import keras
import numpy as np
import pytest
from helpers import run_layer_checks
from keras import ops

from keras_transformer.layers import Encoder, SharedEmbedding

B, S, D, H, D_FF, V = 2, 5, 8, 2, 16, 13
IDS = np.array([[3, 4, 5, 6, 7], [8, 9, 10, 0, 0]], "int32")


def make_encoder(**kwargs):
    config = {"num_layers": 2, "num_heads": H, "d_ff": D_FF, "max_length": 10}
    return Encoder(**{**config, **kwargs})


def pad(ids, extra):
    return np.concatenate([ids, np.zeros((ids.shape[0], extra), ids.dtype)], axis=1)


def strip_mask(x):
    return ops.convert_to_tensor(np.asarray(x))


@pytest.mark.parametrize(
    "norm_first, learned_positions", [(False, False), (True, True)]
)
def test_standard_checks(norm_first, learned_positions, tmp_path):
    x = np.random.default_rng(0).normal(size=(B, S, D)).astype("float32")
    run_layer_checks(
        lambda: make_encoder(
            num_layers=1, norm_first=norm_first, learned_positions=learned_positions
        ),
        x,
        tmp_path,
        expected_output_shape=(B, S, D),
    )


@pytest.mark.parametrize("norm_first", [False, True])
def test_padding_invariance(norm_first):
    embedding = SharedEmbedding(vocab_size=V, d_model=D)
    encoder = make_encoder(norm_first=norm_first)
    out = np.asarray(encoder(embedding(IDS), training=False))
    padded_x = embedding(pad(IDS, 3))
    padded = np.asarray(encoder(padded_x, training=False))
    real = IDS != 0
    np.testing.assert_allclose(padded[:, :S][real], out[real], atol=1e-5)
    # Sensitivity: the same padding without its mask does change the outputs.
    unmasked = np.asarray(encoder(strip_mask(padded_x), training=False))
    assert np.max(np.abs(unmasked[:, :S][real] - out[real])) > 1e-3


def test_attention_scores_and_mask_passed_on():
    embedding = SharedEmbedding(vocab_size=V, d_model=D)
    encoder = make_encoder()
    out, scores = encoder(embedding(IDS), return_attention_scores=True)
    np.testing.assert_array_equal(np.asarray(out._keras_mask), IDS != 0)
    assert len(scores) == 2
    for layer_scores in scores:
        layer_scores = np.asarray(layer_scores)
        assert layer_scores.shape == (B, H, S, S)
        padded_keys = np.broadcast_to((IDS == 0)[:, None, None, :], layer_scores.shape)
        assert np.all(layer_scores[padded_keys] == 0)


def test_explicit_mask_equals_keras_mask():
    embedding = SharedEmbedding(vocab_size=V, d_model=D)
    encoder = make_encoder()
    x = embedding(IDS)
    explicit = encoder(strip_mask(x), mask=IDS != 0)
    # At the real positions: Keras's attention masks padded queries only by
    # their Keras mask, and outputs there mean nothing.
    real = IDS != 0
    np.testing.assert_allclose(
        np.asarray(explicit)[real], np.asarray(encoder(x))[real], atol=1e-6
    )


def test_sequential_classifier_fits_and_keeps_the_mask():
    model = keras.Sequential(
        [
            keras.Input((None,), dtype="int32"),
            SharedEmbedding(vocab_size=V, d_model=D),
            make_encoder(num_layers=1),
            keras.layers.GlobalAveragePooling1D(),  # Averages real tokens only.
            keras.layers.Dense(1),
        ]
    )
    model.compile(optimizer="adam", loss="mse")
    before = [w.numpy().copy() for w in model.trainable_weights]
    history = model.fit(IDS, np.ones((B, 1), "float32"), epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    after = [w.numpy().copy() for w in model.trainable_weights]
    changed = {
        w.path
        for w, b, a in zip(model.trainable_weights, before, after, strict=True)
        if not np.array_equal(b, a)
    }
    # Every weight trains, except the key bias: adding the same q·b_k to
    # every logit of a row leaves the softmax unchanged, so its gradient is 0.
    expected = {w.path for w in model.trainable_weights if "key_bias" not in w.path}
    assert expected <= changed
    np.testing.assert_allclose(
        np.asarray(model(pad(IDS, 2))), np.asarray(model(IDS)), atol=1e-5
    )


def test_rejects_too_long_sequence():
    encoder = make_encoder(max_length=4)
    with pytest.raises(ValueError, match=re.escape("length=5 > max_length=4")):
        encoder(np.zeros((1, 5, D), "float32"))


@pytest.mark.parametrize(
    "name, value",
    [("num_layers", 0), ("num_heads", -1), ("d_ff", 0), ("dropout", 1.0)],
)
def test_rejects_bad_hyperparameters(name, value):
    with pytest.raises(ValueError, match=re.escape(f"{name}={value!r}")):
        make_encoder(**{name: value})


def test_rejects_d_model_not_divisible_by_num_heads():
    with pytest.raises(ValueError, match=re.escape("d_model=8, num_heads=3")):
        make_encoder(num_heads=3)(np.zeros((1, 3, 8), "float32"))
