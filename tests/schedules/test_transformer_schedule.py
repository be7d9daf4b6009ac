"""Tests for keras_transformer.schedules.TransformerSchedule."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers import mirrored_strategy

from keras_transformer.losses import MaskedCrossEntropy
from keras_transformer.schedules import TransformerSchedule
from keras_transformer.training import transformer_optimizer


def paper_rate(step, d_model, warmup_steps, scale=1.0):
    # Equation (3) of the paper, in float64.
    step = np.asarray(step, dtype=np.float64)
    return scale * d_model**-0.5 * np.minimum(step**-0.5, step * warmup_steps**-1.5)


@pytest.mark.parametrize("step", [1, 4000, 100000])
@pytest.mark.parametrize("d_model, scale", [(512, 1.0), (64, 2.0)])
def test_values_match_the_formula(step, d_model, scale):
    schedule = TransformerSchedule(d_model, warmup_steps=4000, scale=scale)
    np.testing.assert_allclose(
        float(schedule(step)), paper_rate(step, d_model, 4000, scale), rtol=1e-6
    )


def test_peak_is_at_the_end_of_warmup():
    schedule = TransformerSchedule(d_model=128, warmup_steps=50)
    steps = np.arange(1, 301)
    rates = keras.ops.convert_to_numpy(schedule(steps))
    assert steps[np.argmax(rates)] == 50
    assert np.all(np.diff(rates[:50]) > 0)  # linear warm-up
    assert np.all(np.diff(rates[49:]) < 0)  # then decay
    np.testing.assert_allclose(rates.max(), (128 * 50) ** -0.5, rtol=1e-6)
    np.testing.assert_allclose(rates, paper_rate(steps, 128, 50), rtol=1e-6)


def test_step_zero_is_finite_and_equals_step_one():
    schedule = TransformerSchedule(d_model=512)
    assert np.isfinite(float(schedule(0)))
    assert float(schedule(0)) == float(schedule(1))


@pytest.mark.parametrize(
    "make_step",
    [
        lambda: tf.constant(123, tf.int64),
        lambda: tf.constant(123, tf.int32),
        lambda: tf.Variable(123, dtype=tf.int64),
        lambda: keras.Variable(123, dtype="int64", trainable=False),
        lambda: np.float32(123.0),
    ],
    ids=["int64", "int32", "tf.Variable", "keras.Variable", "float32"],
)
def test_tensor_steps_eager_and_in_tf_function(make_step):
    schedule = TransformerSchedule(d_model=256, warmup_steps=100)
    expected = paper_rate(123, 256, 100)
    step = make_step()
    eager = schedule(step)
    assert keras.backend.standardize_dtype(eager.dtype) == "float32"
    np.testing.assert_allclose(float(eager), expected, rtol=1e-6)
    np.testing.assert_allclose(float(tf.function(schedule)(step)), expected, rtol=1e-6)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(d_model=0), "d_model"),
        (dict(d_model=512, warmup_steps=0), "warmup_steps"),
        (dict(d_model=512, scale=-1.0), "scale"),
    ],
)
def test_invalid_arguments_are_named(kwargs, name):
    with pytest.raises(ValueError, match=name):
        TransformerSchedule(**kwargs)


def test_serialize_round_trip():
    schedule = TransformerSchedule(d_model=256, warmup_steps=1000, scale=0.5)
    config = keras.optimizers.schedules.serialize(schedule)
    assert config["registered_name"] == "keras_transformer>TransformerSchedule"
    assert config["config"] == {"d_model": 256, "warmup_steps": 1000, "scale": 0.5}
    restored = keras.optimizers.schedules.deserialize(config)
    assert isinstance(restored, TransformerSchedule)
    assert restored.get_config() == schedule.get_config()
    assert float(restored(2000)) == float(schedule(2000))


def test_round_trip_inside_an_optimizer_config():
    optimizer = transformer_optimizer(d_model=256, warmup_steps=1000, scale=0.5)
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert isinstance(restored, keras.optimizers.Adam)
    assert restored.get_config() == optimizer.get_config()
    lr_config = restored.get_config()["learning_rate"]
    assert lr_config["class_name"] == "TransformerSchedule"
    assert lr_config["config"] == {"d_model": 256, "warmup_steps": 1000, "scale": 0.5}


def test_saved_model_restores_schedule_and_loss_without_custom_objects(tmp_path):
    model = keras.Sequential(
        [keras.Input((3,), dtype="int32"), keras.layers.Embedding(7, 7)]
    )
    model.compile(
        optimizer=transformer_optimizer(d_model=32, warmup_steps=10),
        loss=MaskedCrossEntropy(label_smoothing=0.2),
    )
    model.optimizer.build(model.trainable_variables)
    model.optimizer.iterations.assign(7)
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.models.load_model(path)  # no custom_objects needed
    assert loaded.optimizer.get_config() == model.optimizer.get_config()
    assert int(loaded.optimizer.iterations.numpy()) == 7
    # The next update uses the schedule at the restored step.
    np.testing.assert_allclose(
        float(loaded.optimizer.learning_rate), paper_rate(7, 32, 10), rtol=1e-6
    )
    assert isinstance(loaded.loss, MaskedCrossEntropy)
    assert loaded.loss.get_config() == model.loss.get_config()


def test_first_adam_update_under_mirrored_strategy_uses_the_schedule():
    devices = tf.config.list_logical_devices("CPU")
    if len(devices) < 2:
        pytest.skip("TensorFlow was initialised before two CPUs could be set up")
    strategy = mirrored_strategy(devices[:2])
    with strategy.scope():
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
        model.compile(
            optimizer=transformer_optimizer(d_model=64, warmup_steps=8), loss="mse"
        )
    before = [w.copy() for w in model.get_weights()]
    x = np.arange(12, dtype="float32").reshape(4, 3) / 10.0
    y = np.array([[1.0, -1.0]] * 4, "float32")
    model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    assert int(model.optimizer.iterations.numpy()) == 1
    # Adam's first update moves every weight by lr * sign(gradient) (up to
    # epsilon), and the first update uses the rate of step max(0, 1) = 1.
    first_rate = paper_rate(1, 64, 8)
    for old, new in zip(before, model.get_weights(), strict=True):
        np.testing.assert_allclose(np.abs(new - old), first_rate, rtol=1e-4)
    np.testing.assert_allclose(
        float(model.optimizer.learning_rate), paper_rate(1, 64, 8), rtol=1e-6
    )
