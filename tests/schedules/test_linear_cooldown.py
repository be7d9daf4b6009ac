"""Tests for keras_transformer.schedules.LinearCooldown."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.schedules import LinearCooldown, TransformerSchedule
from keras_transformer.training import transformer_optimizer


def paper_rate(step, d_model, warmup_steps):
    step = np.maximum(np.asarray(step, dtype=np.float64), 1.0)
    return d_model**-0.5 * np.minimum(step**-0.5, step * warmup_steps**-1.5)


def reference(step, d_model, warmup_steps, start, steps):
    # The cool-down in float64: the paper's rate until `start`, then that
    # rate times the fraction of the cool-down left.
    step = np.asarray(step, dtype=np.float64)
    left = np.clip((start + steps - step) / steps, 0.0, 1.0)
    return paper_rate(np.minimum(step, start), d_model, warmup_steps) * left


def test_values_match_the_reference_over_a_whole_run():
    schedule = LinearCooldown(TransformerSchedule(64, warmup_steps=20), 70, 30)
    steps = np.arange(0, 121)
    rates = keras.ops.convert_to_numpy(schedule(steps))
    np.testing.assert_allclose(rates, reference(steps, 64, 20, 70, 30), rtol=1e-6)
    # The paper's curve to step 70, a straight line to 0 at step 100, then 0.
    np.testing.assert_allclose(rates[:71], paper_rate(steps[:71], 64, 20), rtol=1e-6)
    np.testing.assert_allclose(np.diff(rates[70:101]), -rates[70] / 30, rtol=1e-4)
    assert np.all(rates[100:] == 0.0)


def test_adam_updates_take_the_line_down_to_the_last_one():
    # d_model 64, warm-up 10: the paper's rate at step 1 is
    # 64**-0.5 * 10**-1.5 = 0.00395285. A cool-down from start 1 over 2
    # steps: Keras asks for the rate at the iteration count before each
    # update, so updates 1-4 take 1, 1, 1/2 and 0 of it. Adam's update on a
    # constant gradient is the rate itself (up to epsilon).
    rate = 0.00395285
    optimizer = transformer_optimizer(64, warmup_steps=10, cooldown=(1, 2))
    weight = keras.Variable(0.0)
    moves = []
    for _ in range(4):
        before = float(weight.numpy())
        optimizer.apply_gradients([(keras.ops.convert_to_tensor(-1.0), weight)])
        moves.append(float(weight.numpy()) - before)
    np.testing.assert_allclose(moves, [rate, rate, rate / 2, 0.0], rtol=1e-4)


def test_tensor_steps_eager_and_in_tf_function():
    schedule = LinearCooldown(TransformerSchedule(256, warmup_steps=100), 900, 200)
    step = tf.Variable(1000, dtype=tf.int64)
    expected = reference(1000, 256, 100, 900, 200)  # half-way down
    np.testing.assert_allclose(float(schedule(step)), expected, rtol=1e-6)
    np.testing.assert_allclose(float(tf.function(schedule)(step)), expected, rtol=1e-6)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(schedule=0.001, start=10, steps=5), "schedule"),
        (dict(start=-1, steps=5), "start"),
        (dict(start=10, steps=0), "steps"),
    ],
)
def test_invalid_arguments_are_named(kwargs, message):
    kwargs.setdefault("schedule", TransformerSchedule(64))
    with pytest.raises((ValueError, TypeError), match=message):
        LinearCooldown(**kwargs)


def test_serialize_round_trip_keeps_the_wrapped_schedule():
    schedule = LinearCooldown(TransformerSchedule(256, 1000, scale=0.5), 5000, 800)
    config = keras.optimizers.schedules.serialize(schedule)
    assert config["registered_name"] == "keras_transformer>LinearCooldown"
    restored = keras.optimizers.schedules.deserialize(config)
    assert isinstance(restored, LinearCooldown)
    assert isinstance(restored.schedule, TransformerSchedule)
    assert restored.get_config() == schedule.get_config()
    for step in (10, 5000, 5400, 6000):
        assert float(restored(step)) == float(schedule(step))


def test_optimizer_with_cooldown_saves_and_loads_with_its_model(tmp_path):
    optimizer = transformer_optimizer(32, warmup_steps=10, cooldown=(40, 20))
    assert optimizer.get_config()["learning_rate"]["class_name"] == "LinearCooldown"
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer=optimizer, loss="mse")
    model.optimizer.build(model.trainable_variables)
    model.optimizer.iterations.assign(50)
    model.save(tmp_path / "model.keras")
    loaded = keras.models.load_model(tmp_path / "model.keras")
    assert loaded.optimizer.get_config() == model.optimizer.get_config()
    # The next update uses the rate half-way down the cool-down.
    np.testing.assert_allclose(
        float(loaded.optimizer.learning_rate), reference(50, 32, 10, 40, 20), rtol=1e-6
    )
