import re

import keras
import numpy as np
import pytest
from helpers import run_layer_checks

from keras_transformer.layers import PointwiseFeedForward

B, T, D, D_FF = 2, 4, 8, 16


def random(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def test_standard_checks(tmp_path):
    run_layer_checks(
        lambda: PointwiseFeedForward(d_ff=D_FF, dropout=0.1),
        random(B, T, D),
        tmp_path,
        expected_output_shape=(B, T, D),
    )


def test_is_two_kernel_one_convolutions_with_relu_between():
    layer = PointwiseFeedForward(d_ff=D_FF)
    x = random(B, T, D)
    out = np.asarray(layer(x))
    for conv in (layer.inner, layer.outer):
        assert isinstance(conv, keras.layers.Conv1D)
        assert conv.kernel_size == (1,)
    assert len(layer.weights) == 4
    # Non-zero biases, so the reference checks where they go.
    layer.inner.bias.assign(random(D_FF, seed=1))
    layer.outer.bias.assign(random(D, seed=2))
    out = np.asarray(layer(x))
    w1, b1 = layer.inner.kernel.numpy()[0], layer.inner.bias.numpy()  # (D, d_ff)
    w2, b2 = layer.outer.kernel.numpy()[0], layer.outer.bias.numpy()  # (d_ff, D)
    expected = np.maximum(x @ w1 + b1, 0.0) @ w2 + b2
    np.testing.assert_allclose(out, expected, atol=1e-5)


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_sublayers_equal_keras_convolutions(activation):
    # Each sublayer computes its kernel-1 convolution as a matmul: the same
    # values as keras.layers.Conv1D with the same weights and config.
    layer = PointwiseFeedForward(d_ff=D_FF, activation=activation)
    x = random(B, T, D)
    layer.build(x.shape)
    layer.inner.bias.assign(random(D_FF, seed=1))
    for conv, inputs in ((layer.inner, x), (layer.outer, random(B, T, D_FF))):
        config = {**conv.get_config(), "name": "plain"}
        keras_conv = keras.layers.Conv1D.from_config(config)
        keras_conv.build(inputs.shape)
        keras_conv.set_weights(conv.get_weights())
        np.testing.assert_allclose(
            np.asarray(conv(inputs)), np.asarray(keras_conv(inputs)), atol=1e-5
        )


def test_matmul_keeps_a_symbolic_batch_and_length():
    x = keras.Input((None, D))
    assert tuple(PointwiseFeedForward(d_ff=D_FF)(x).shape) == (None, None, D)


def test_positions_are_independent():
    layer = PointwiseFeedForward(d_ff=D_FF)
    x = random(B, T, D)
    changed = x.copy()
    changed[:, 2] = random(B, D, seed=3)
    out, out_changed = np.asarray(layer(x)), np.asarray(layer(changed))
    others = [0, 1, 3]
    np.testing.assert_allclose(out_changed[:, others], out[:, others], atol=1e-6)
    assert np.max(np.abs(out_changed[:, 2] - out[:, 2])) > 1e-3


def test_passes_keras_mask_on():
    ids = np.array([[4, 5, 0, 0], [6, 0, 0, 0]])
    x = keras.layers.Embedding(10, D, mask_zero=True)(ids)
    out = PointwiseFeedForward(d_ff=D_FF)(x)
    np.testing.assert_array_equal(np.asarray(out._keras_mask), ids != 0)


def test_dropout_only_in_training():
    layer = PointwiseFeedForward(d_ff=D_FF, dropout=0.5)
    x = random(B, T, D)
    inference = np.asarray(layer(x, training=False))
    np.testing.assert_array_equal(np.asarray(layer(x)), inference)
    assert np.max(np.abs(np.asarray(layer(x, training=True)) - inference)) > 1e-3


@pytest.mark.parametrize("value", [0, -3, 16.0])
def test_rejects_bad_d_ff(value):
    with pytest.raises(ValueError, match=re.escape(f"d_ff={value!r}")):
        PointwiseFeedForward(d_ff=value)


@pytest.mark.parametrize("value", [-0.5, 1.0])
def test_rejects_bad_dropout(value):
    with pytest.raises(ValueError, match=re.escape(f"dropout={value!r}")):
        PointwiseFeedForward(d_ff=D_FF, dropout=value)


def test_rejects_two_dimensional_input():
    with pytest.raises(ValueError, match=re.escape("x.shape=(2, 8)")):
        PointwiseFeedForward(d_ff=D_FF)(random(2, 8))
