"""TrainingBudget: stops at the step or minute asked, across fits and resumes."""

import keras
import numpy as np
import pytest

from keras_transformer.training import TrainingBudget
from keras_transformer.training import budget as budget_module


def _fit(model, budget, epochs=10):
    return model.fit(
        np.zeros((8, 2)),
        np.zeros((8, 1)),
        batch_size=2,
        epochs=epochs,
        callbacks=[budget],
        verbose=0,
    )


def _model():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    return model


def test_stops_at_the_step_budget_counted_by_the_optimizer():
    model, budget = _model(), TrainingBudget(steps=6)
    history = _fit(model, budget)
    assert int(model.optimizer.iterations.numpy()) == 6  # 4 steps an epoch
    assert budget.stopped and len(history.history["loss"]) == 2
    # A second fit (a resumed run) starts past the budget and stops at once.
    assert budget.exhausted(6) == "step budget of 6 steps reached"
    assert budget.exhausted(5) is None


def test_minutes_count_from_the_first_fit_plus_earlier_runs(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(budget_module.time, "monotonic", lambda: now[0])
    budget = TrainingBudget(minutes=10, elapsed_minutes=4.0)
    assert budget.elapsed_minutes == 4.0
    budget.set_model(_model())
    budget.on_train_begin()
    now[0] += 5 * 60
    assert budget.elapsed_minutes == pytest.approx(9.0)
    assert budget.exhausted(0) is None
    budget.on_train_begin()  # a second fit call keeps the clock
    now[0] += 60
    assert budget.exhausted(0) == "time budget of 10 minutes reached"


def test_rejects_negative_budgets():
    with pytest.raises(ValueError, match="minutes"):
        TrainingBudget(minutes=-1)
    with pytest.raises(ValueError, match="steps"):
        TrainingBudget(steps=0)
