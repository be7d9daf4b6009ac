import math
import re

import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers import run_layer_checks
from keras import ops

from keras_transformer.layers import PositionalEncoding, positional_encoding


def frequency(i, depth):
    """The angular frequency of columns 2i and 2i + 1: 1 / 10000^(2i / depth)."""
    return 1.0 / 10000 ** (2 * i / depth)


def test_golden_values():
    pe = positional_encoding(10, 8)
    assert pe.shape == (10, 8) and pe.dtype == np.float32
    np.testing.assert_array_equal(pe[0], [0, 1, 0, 1, 0, 1, 0, 1])
    golden = {
        (1, 0): math.sin(1),
        (1, 1): math.cos(1),
        (2, 2): math.sin(2 / 10000 ** (2 / 8)),
        (2, 3): math.cos(2 / 10000 ** (2 / 8)),
        (3, 4): math.sin(3 / 10000 ** (4 / 8)),
        (3, 5): math.cos(3 / 10000 ** (4 / 8)),
        (9, 6): math.sin(9 / 10000 ** (6 / 8)),
        (9, 7): math.cos(9 / 10000 ** (6 / 8)),
    }
    for (pos, col), value in golden.items():
        np.testing.assert_allclose(pe[pos, col], value, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("depth", [8, 7, 1])
def test_even_columns_are_sines_odd_columns_cosines(depth):
    length = 50
    pe = positional_encoding(length, depth)
    expected = np.zeros((length, depth))
    for pos in range(length):
        for col in range(depth):
            angle = pos * frequency(col // 2, depth)
            expected[pos, col] = math.sin(angle) if col % 2 == 0 else math.cos(angle)
    assert pe.shape == (length, depth)
    np.testing.assert_allclose(pe, expected, atol=1e-6)


@pytest.mark.parametrize("k", [1, 3, 10])
def test_shift_by_k_is_a_fixed_rotation(k):
    # PE(pos + k) = M_k PE(pos) per frequency pair, M_k independent of pos:
    # sin(a + b) = sin a cos b + cos a sin b, cos(a + b) = cos a cos b - sin a sin b.
    length, depth = 60, 8
    pe = positional_encoding(length, depth).astype(np.float64)
    for i in range(depth // 2):
        kw = k * frequency(i, depth)
        rotation = np.array(
            [[math.cos(kw), math.sin(kw)], [-math.sin(kw), math.cos(kw)]]
        )
        pairs = pe[:, 2 * i : 2 * i + 2]  # (L, 2): [sin, cos] at every pos
        np.testing.assert_allclose(pairs[k:], pairs[:-k] @ rotation.T, atol=1e-5)


@pytest.mark.parametrize("learned", [False, True])
def test_standard_checks(learned, tmp_path):
    run_layer_checks(
        lambda: PositionalEncoding(max_length=10, learned=learned),
        np.random.default_rng(0).normal(size=(2, 4, 8)).astype("float32"),
        tmp_path,
        call_kwargs={"start_index": 3},
        expected_output_shape=(2, 4, 8),
    )


@pytest.mark.parametrize("start_index", [0, 2, 6])
def test_adds_the_table_slice_at_start_index(start_index):
    x = np.random.default_rng(0).normal(size=(2, 4, 6)).astype("float32")
    layer = PositionalEncoding(max_length=10)
    table = positional_encoding(10, 6)
    expected = x + table[start_index : start_index + 4]
    np.testing.assert_allclose(np.asarray(layer(x, start_index=start_index)), expected)
    tensor_index = ops.convert_to_tensor(start_index, "int32")
    np.testing.assert_allclose(np.asarray(layer(x, start_index=tensor_index)), expected)


def test_learned_table_is_trainable_and_gets_gradients():
    layer = PositionalEncoding(max_length=10, learned=True)
    x = np.zeros((2, 4, 6), "float32")
    layer(x)
    assert len(layer.trainable_weights) == 1
    table = layer.trainable_weights[0]
    assert tuple(table.shape) == (10, 6)
    np.testing.assert_allclose(
        np.asarray(layer(x, start_index=2))[1], table.numpy()[2:6]
    )
    with tf.GradientTape() as tape:
        loss = ops.sum(layer(x, start_index=2) ** 2)
    (grad,) = tape.gradient(loss, layer.trainable_weights)
    grad = ops.convert_to_numpy(grad)
    np.testing.assert_allclose(grad[2:6], 2 * 2 * table.numpy()[2:6], rtol=1e-5)
    np.testing.assert_array_equal(grad[[0, 1, 6, 7, 8, 9]], 0.0)


def test_sinusoidal_has_no_weights():
    layer = PositionalEncoding(max_length=10)
    layer(np.zeros((1, 3, 4), "float32"))
    assert layer.weights == []


def test_passes_keras_mask_on():
    ids = np.array([[4, 5, 0], [6, 0, 0]])
    x = keras.layers.Embedding(10, 4, mask_zero=True)(ids)
    out = PositionalEncoding(max_length=10)(x)
    np.testing.assert_array_equal(np.asarray(out._keras_mask), ids != 0)


def test_rejects_too_long_sequence():
    layer = PositionalEncoding(max_length=4)
    with pytest.raises(ValueError, match=re.escape("length=5 > max_length=4")):
        layer(np.zeros((1, 5, 8), "float32"))
    with pytest.raises(ValueError, match=re.escape("start_index=2 + length=3")):
        layer(np.zeros((1, 3, 8), "float32"), start_index=2)


@pytest.mark.parametrize("value", [0, -1])
def test_rejects_bad_max_length(value):
    with pytest.raises(ValueError, match=re.escape(f"max_length={value}")):
        PositionalEncoding(max_length=value)
