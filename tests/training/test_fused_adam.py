"""Tests for keras_transformer.training.FusedAdam: Keras's Adam, fused."""

import contextlib

import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers import mirrored_strategy

from keras_transformer.schedules import TransformerSchedule
from keras_transformer.training import FusedAdam

OPTIONS = {"beta_1": 0.9, "beta_2": 0.98, "epsilon": 1e-9}


def _run(optimizer, gradients, jit=False):
    """Applies each of `gradients` (lists of arrays) in turn, from one start."""
    rng = np.random.default_rng(0)
    weights = [keras.Variable(rng.normal(size=g.shape)) for g in gradients[0]]
    optimizer.build(weights)  # Outside the tf.function, which cannot create them.
    apply = lambda grads: optimizer.apply(grads, weights)  # noqa: E731
    if jit:
        apply = tf.function(apply, jit_compile=True)
    for grads in gradients:
        apply([tf.constant(g) for g in grads])
    return [np.asarray(w) for w in weights], optimizer


def _gradients(steps=5, shapes=((4, 3), (3,))):
    rng = np.random.default_rng(1)
    draw = lambda: [rng.normal(size=s).astype("float32") for s in shapes]  # noqa: E731
    return [draw() for _ in range(steps)]


@pytest.mark.parametrize("jit", [False, True])
def test_same_weights_and_moments_as_keras_adam(jit):
    gradients = _gradients()
    schedule = TransformerSchedule(16, warmup_steps=3)
    fused, fused_opt = _run(FusedAdam(schedule, **OPTIONS), gradients, jit)
    plain, plain_opt = _run(keras.optimizers.Adam(schedule, **OPTIONS), gradients)
    for a, b in zip(fused, plain, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    for a, b in zip(fused_opt.variables, plain_opt.variables, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-9)
    assert int(fused_opt.iterations) == 5


def test_against_numpy_adam():
    gradients = _gradients(steps=3, shapes=((5,),))
    (fused,), _ = _run(FusedAdam(0.01, **OPTIONS), gradients)
    w = np.random.default_rng(0).normal(size=5)
    m = v = np.zeros(5)
    for t, (g,) in enumerate(gradients, start=1):
        m = m + 0.1 * (g - m)
        v = v + 0.02 * (g * g - v)
        step = 0.01 * np.sqrt(1 - 0.98**t) / (1 - 0.9**t)
        w = w - step * m / (np.sqrt(v) + 1e-9)
    np.testing.assert_allclose(fused, w, rtol=1e-5)


def test_sparse_gradients_and_amsgrad_fall_back_to_keras():
    table = keras.Variable(np.ones((6, 2), "float32"))
    rows = tf.IndexedSlices(tf.ones((2, 2)), tf.constant([1, 4]), tf.constant([6, 2]))
    FusedAdam(0.1).apply([rows], [table])
    expected = np.ones((6, 2), "float32")
    expected[[1, 4]] = 0.9
    np.testing.assert_allclose(np.asarray(table), expected, rtol=1e-5)

    gradients = _gradients(steps=3)
    fused, _ = _run(FusedAdam(0.01, amsgrad=True), gradients)
    plain, _ = _run(keras.optimizers.Adam(0.01, amsgrad=True), gradients)
    for a, b in zip(fused, plain, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def _fit(optimizer, strategy=None, jit=False):
    """A small model fitted with `optimizer()` (made in the strategy's scope)."""
    keras.utils.set_random_seed(3)
    x = np.random.default_rng(2).normal(size=(8, 4)).astype("float32")
    y = np.random.default_rng(3).normal(size=(8, 2)).astype("float32")
    with strategy.scope() if strategy else contextlib.nullcontext():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
        model.compile(optimizer=optimizer(), loss="mse", jit_compile=jit)
    model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    return model


def test_fit_under_mirrored_strategy_matches_keras_adam():
    devices = tf.config.list_logical_devices("CPU")
    if len(devices) < 2:
        pytest.skip("TensorFlow was initialised before two CPUs could be set up")
    fused = _fit(lambda: FusedAdam(0.05), mirrored_strategy(devices[:2]))
    plain = _fit(lambda: keras.optimizers.Adam(0.05))
    start = _fit(lambda: keras.optimizers.Adam(0.0)).get_weights()
    assert int(fused.optimizer.iterations.numpy()) == 4
    for a, b, c in zip(fused.get_weights(), plain.get_weights(), start, strict=True):
        assert np.abs(a - c).min() > 0.01  # Every weight moved.
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_saved_model_restores_the_optimizer_and_its_state(tmp_path):
    model = _fit(lambda: FusedAdam(0.05, **OPTIONS), jit=True)
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded.optimizer, FusedAdam)
    assert loaded.optimizer.get_config() == model.optimizer.get_config()
    for a, b in zip(loaded.optimizer.variables, model.optimizer.variables, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
