import math
import re

import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers import run_layer_checks
from keras import ops

from keras_transformer.layers import SharedEmbedding

B, T, V, D = 2, 4, 11, 8
IDS = np.array([[3, 5, 7, 0], [10, 1, 0, 0]], "int32")


def test_standard_checks_embedding(tmp_path):
    run_layer_checks(
        lambda: SharedEmbedding(vocab_size=V, d_model=D),
        IDS,
        tmp_path,
        expected_output_shape=(B, T, D),
    )


def test_standard_checks_reverse(tmp_path):
    run_layer_checks(
        lambda: SharedEmbedding(vocab_size=V, d_model=D),
        np.random.default_rng(0).normal(size=(B, T, D)).astype("float32"),
        tmp_path,
        call_kwargs={"reverse": True},
        expected_output_shape=(B, T, V),
    )


def test_one_matrix_for_embedding_and_projection():
    layer = SharedEmbedding(vocab_size=V, d_model=D)
    x = layer(IDS)
    logits = layer(x, reverse=True)
    assert len(layer.weights) == 1 and len(layer.trainable_weights) == 1
    u = layer.embeddings.numpy()
    assert u.shape == (V, D)
    np.testing.assert_allclose(np.asarray(x), u[IDS] * math.sqrt(D), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(logits), np.asarray(x) @ u.T, atol=1e-5)


def test_mask_marks_id_zero_and_logits_carry_none():
    layer = SharedEmbedding(vocab_size=V, d_model=D)
    x = layer(IDS)
    np.testing.assert_array_equal(np.asarray(x._keras_mask), IDS != 0)
    logits = layer(x, reverse=True)
    assert getattr(logits, "_keras_mask", None) is None


def test_mask_zero_false_gives_no_mask_and_round_trips(tmp_path):
    layer, _ = run_layer_checks(
        lambda: SharedEmbedding(vocab_size=V, d_model=D, mask_zero=False),
        IDS,
        tmp_path,
    )
    assert getattr(layer(IDS), "_keras_mask", None) is None
    assert layer.compute_mask(IDS) is None
    assert SharedEmbedding.from_config(layer.get_config()).mask_zero is False


def test_gradients_from_logits_reach_the_single_matrix():
    # loss = sum(R * logits), logits = (s U[ids]) Uᵀ, s = sqrt(D). Then
    # dloss/dU = Rᵀ h (projection) + s * scatter(ids, R U) (lookup), h = s U[ids].
    layer = SharedEmbedding(vocab_size=V, d_model=D)
    layer.build()
    r = np.random.default_rng(1).normal(size=(B, T, V))
    with tf.GradientTape() as tape:
        logits = layer(layer(IDS), reverse=True)
        loss = ops.sum(logits * ops.convert_to_tensor(r, "float32"))
    grads = tape.gradient(loss, layer.trainable_weights)
    assert len(grads) == 1
    grad = ops.convert_to_numpy(ops.convert_to_tensor(grads[0]))
    u, s = layer.embeddings.numpy().astype(np.float64), math.sqrt(D)
    h = s * u[IDS]  # (B, T, D)
    expected = np.einsum("btv,btd->vd", r, h)
    np.add.at(expected, IDS.reshape(-1), s * (r @ u).reshape(-1, D))
    np.testing.assert_allclose(grad, expected, rtol=1e-4, atol=1e-4)


def test_symbolic_reverse_shape_in_functional_model():
    ids = keras.Input((T,), dtype="int32")
    layer = SharedEmbedding(vocab_size=V, d_model=D)
    x = layer(ids)
    logits = layer(x, reverse=True)
    assert tuple(x.shape) == (None, T, D)
    assert tuple(logits.shape) == (None, T, V)
    model = keras.Model(ids, logits)
    assert len(model.weights) == 1
    assert tuple(model(IDS).shape) == (B, T, V)


def test_rejects_non_integer_ids():
    layer = SharedEmbedding(vocab_size=V, d_model=D)
    with pytest.raises(ValueError, match="integer token ids.*inputs.dtype=.*float32"):
        layer(IDS.astype("float32"))


@pytest.mark.parametrize("name, value", [("vocab_size", 0), ("d_model", -4)])
def test_rejects_bad_sizes(name, value):
    kwargs = {"vocab_size": V, "d_model": D, name: value}
    with pytest.raises(ValueError, match=re.escape(f"{name}={value}")):
        SharedEmbedding(**kwargs)
