"""Tests for keras_transformer.training.transformer_optimizer."""

import keras
import numpy as np
import pytest

from keras_transformer.schedules import TransformerSchedule
from keras_transformer.training import transformer_optimizer


def test_paper_hyperparameters_and_schedule():
    optimizer = transformer_optimizer(d_model=512)
    assert isinstance(optimizer, keras.optimizers.Adam)
    assert (optimizer.beta_1, optimizer.beta_2, optimizer.epsilon) == (0.9, 0.98, 1e-9)
    lr = optimizer.get_config()["learning_rate"]
    assert lr["class_name"] == "TransformerSchedule"
    assert lr["config"] == {"d_model": 512, "warmup_steps": 4000, "scale": 1.0}
    # The rate of the first update (iterations == 0) is the schedule's.
    expected = float(TransformerSchedule(512)(0))
    np.testing.assert_allclose(float(optimizer.learning_rate), expected, rtol=1e-6)


def test_schedule_arguments_and_adam_kwargs_are_passed_on():
    optimizer = transformer_optimizer(
        d_model=64, warmup_steps=100, scale=2.0, beta_2=0.997, clipnorm=1.0
    )
    config = optimizer.get_config()
    assert config["learning_rate"]["config"] == {
        "d_model": 64,
        "warmup_steps": 100,
        "scale": 2.0,
    }
    assert (config["beta_1"], config["beta_2"], config["epsilon"]) == (0.9, 0.997, 1e-9)
    assert config["clipnorm"] == 1.0


@pytest.mark.parametrize("decay, expected", [(0.0, None), (None, None), (0.01, 0.01)])
def test_a_weight_decay_of_zero_adds_no_decay_op(decay, expected):
    optimizer = transformer_optimizer(d_model=64, weight_decay=decay)
    assert optimizer.weight_decay == expected  # None: Keras skips the decay


def test_learning_rate_argument_is_rejected():
    with pytest.raises(ValueError, match="learning_rate"):
        transformer_optimizer(d_model=64, learning_rate=1e-3)
