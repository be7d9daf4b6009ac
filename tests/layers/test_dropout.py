import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.layers import Dropout
from keras_transformer.layers.dropout import dropout

SEED = tf.constant([3, 4])


def drop_probability(rate):
    return round(rate * 2**16) / 2**16


@pytest.mark.parametrize("rate", [0.1, 0.5, 0.9])
def test_drops_at_rate_and_scales_kept_elements_exactly(rate):
    x = tf.random.stateless_normal((256, 4096), [0, 1])
    y = dropout(x, rate, SEED).numpy()
    kept = y != 0
    p = drop_probability(rate)
    # 2**20 elements: the binomial standard deviation is at most 5e-4.
    assert abs((1 - kept.mean()) - p) < 2.5e-3
    np.testing.assert_array_equal(y[kept], x.numpy()[kept] * np.float32(1 / (1 - p)))


def test_the_two_halves_of_each_random_number_are_independent():
    rate = 0.3
    dropped = dropout(tf.ones((2**20,)), rate, SEED).numpy() == 0
    # Elements 2i and 2i + 1 come from one 32-bit number.
    both = (dropped[0::2] & dropped[1::2]).mean()
    assert abs(both - drop_probability(rate) ** 2) < 2.5e-3


def test_expectation_is_the_input():
    x = tf.fill((2**20,), 3.0)
    assert float(tf.reduce_mean(dropout(x, 0.1, SEED))) == pytest.approx(3.0, rel=2e-3)


def test_odd_and_dynamic_shapes_draw_the_same_mask():
    x = tf.random.stateless_normal((15, 7), [0, 2])  # 105 elements: odd
    static = dropout(x, 0.5, SEED)

    @tf.function(input_signature=[tf.TensorSpec((None, 7))])
    def dynamic(x):
        return dropout(x, 0.5, SEED)

    np.testing.assert_array_equal(dynamic(x), static)
    assert 0 < int(tf.math.count_nonzero(static)) < 105


def test_compiled_by_xla_and_gradient_is_the_scaled_mask():
    x = tf.random.stateless_normal((64, 33), [0, 3])

    @tf.function(jit_compile=True)
    def value_and_gradient(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = dropout(x, 0.25, SEED)
        return y, tape.gradient(y, x, output_gradients=tf.ones_like(y))

    y, grad = value_and_gradient(x)
    kept = y.numpy() != 0
    scale = np.float32(1 / (1 - drop_probability(0.25)))
    np.testing.assert_array_equal(grad, np.where(kept, scale, 0))
    np.testing.assert_allclose(y, np.where(kept, x * scale, 0), rtol=1e-6)
    assert 0.15 < 1 - kept.mean() < 0.35


def test_layer_draws_a_new_mask_each_call_and_repeats_with_its_seed():
    x = np.ones((8, 64), "float32")
    first, second = Dropout(0.5, seed=7), Dropout(0.5, seed=7)
    a = first(x, training=True).numpy()
    np.testing.assert_array_equal(second(x, training=True), a)
    assert (first(x, training=True).numpy() != a).any()
    assert set(np.unique(a).tolist()) == {0.0, 2.0}


def test_identity_outside_training_and_at_rate_zero():
    x = np.random.default_rng(0).normal(size=(4, 6)).astype("float32")
    np.testing.assert_array_equal(Dropout(0.5)(x), x)
    np.testing.assert_array_equal(Dropout(0.5)(x, training=False), x)
    np.testing.assert_array_equal(Dropout(0.0)(x, training=True), x)


def test_keeps_the_dtype_of_mixed_precision():
    layer = Dropout(0.5, dtype="mixed_float16")
    y = layer(np.ones((4, 6), "float32"), training=True)
    assert keras.backend.standardize_dtype(y.dtype) == "float16"
    assert set(np.unique(y).tolist()) <= {0.0, 2.0}


def test_noise_shape_uses_keras_dropout():
    y = Dropout(0.5, noise_shape=(4, 1), seed=1)(np.ones((4, 6)), training=True)
    rows = np.asarray(y)
    assert all(len(set(row.tolist())) == 1 for row in rows)  # whole rows


def test_config_round_trip():
    layer = Dropout(0.3, seed=5, name="drop")
    restored = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(layer)
    )
    assert type(restored) is Dropout
    assert restored.get_config() == layer.get_config()
