"""BudgetProgress: one bar in the budget's minutes or steps, across fits."""

import io

import keras
import numpy as np

from keras_transformer.training import TrainingBudget
from keras_transformer.training import budget as budget_module
from keras_transformer.training.progress import BudgetProgress


def _fit(model, callbacks, epochs=100):
    return model.fit(
        np.zeros((8, 2)),
        np.ones((8, 1)),
        batch_size=2,
        epochs=epochs,
        callbacks=callbacks,
        verbose=0,
    )


def _model():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    return model


def _lines(out):
    return out.getvalue().replace("\r", "\n").strip().splitlines()


def _last_line(out):
    return _lines(out)[-1]


def test_a_step_budget_counts_steps_not_epochs():
    model, budget, out = _model(), TrainingBudget(steps=10), io.StringIO()
    progress = BudgetProgress(budget, file=out)
    _fit(model, [budget, progress])
    progress.close()
    line = _last_line(out)
    assert "10/10 steps, epoch 3, loss" in line and "100%" in line  # 4 per epoch
    assert "Epoch" not in out.getvalue() and "/100" not in out.getvalue()


def test_a_time_budget_counts_minutes_from_where_a_resumed_run_was(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(budget_module.time, "monotonic", lambda: now[0])

    class Clock(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            now[0] += 60.0  # each step takes a minute

    # Resumed after 5 of 30 minutes, stopped by the budget after 25 more.
    model, out = _model(), io.StringIO()
    budget = TrainingBudget(minutes=30, elapsed_minutes=5.0)
    progress = BudgetProgress(budget, file=out)
    _fit(model, [Clock(), budget, progress])
    progress.close()
    assert int(model.optimizer.iterations.numpy()) == 25
    assert "30.0/30 min" in _last_line(out)
    assert "5.0/30 min" in _lines(out)[0]


def test_one_bar_across_fit_calls_and_without_a_budget_the_given_total():
    model, budget, out = _model(), TrainingBudget(), io.StringIO()
    progress = BudgetProgress(budget, steps=12, file=out)
    _fit(model, [budget, progress], epochs=2)  # 8 steps, then 4 more
    _fit(model, [budget, progress], epochs=1)
    progress.close()
    assert "12/12 steps" in _last_line(out)
    assert out.getvalue().count("| 0/12 steps") == 1  # one bar, started once
