"""Stop training after a number of minutes or optimizer steps."""

from __future__ import annotations

import logging
import time

import keras

logger = logging.getLogger(__name__)


class TrainingBudget(keras.callbacks.Callback):
    """Stops `fit` after `minutes` of training or `steps` optimizer steps.

    The check runs after every batch, so training ends within one step of the
    budget; the epoch in progress is cut short. Steps are counted by the
    optimizer, so a resumed run keeps counting where it was; minutes count
    from the first `fit` call the callback sees (several calls share one
    clock) plus `elapsed_minutes`, the minutes trained before a resume.

    Args:
        minutes: wall-clock budget in minutes, or `None`.
        steps: total optimizer steps, or `None`.
        elapsed_minutes: minutes already trained (by an earlier run).

    Example:
    >>> import numpy as np, keras
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(loss="mse")
    >>> budget = TrainingBudget(minutes=0.0)
    >>> history = model.fit(np.zeros((8, 2)), np.zeros((8, 1)), batch_size=2,
    ...                     epochs=5, callbacks=[budget], verbose=0)
    >>> budget.stopped, len(history.history["loss"])
    (True, 1)
    """

    def __init__(
        self,
        minutes: float | None = None,
        steps: int | None = None,
        elapsed_minutes: float = 0.0,
    ):
        super().__init__()
        if minutes is not None and minutes < 0:
            raise ValueError(f"`minutes` must be >= 0. Received: minutes={minutes}")
        if steps is not None and steps < 1:
            raise ValueError(f"`steps` must be >= 1. Received: steps={steps}")
        self.minutes = minutes
        self.steps = steps
        self.elapsed_before = elapsed_minutes
        self.stopped = False
        self._start = None

    def on_train_begin(self, logs=None):
        if self._start is None:
            self._start = time.monotonic()

    def on_train_batch_end(self, batch, logs=None):
        reason = self.exhausted(int(self.model.optimizer.iterations.numpy()))
        if reason:
            self._stop(reason)

    def exhausted(self, step: int) -> str | None:
        """Why the budget is spent at optimizer step `step`, or `None`."""
        if self.minutes is not None and self.elapsed_minutes >= self.minutes:
            return f"time budget of {self.minutes:g} minutes reached"
        if self.steps is not None and step >= self.steps:
            return f"step budget of {self.steps} steps reached"
        return None

    def _stop(self, reason):
        if not self.stopped:
            logger.info("Stopping training: %s.", reason)
        self.stopped = True
        self.model.stop_training = True

    @property
    def elapsed_minutes(self) -> float:
        """Minutes trained: before this run, and since its first `fit`."""
        if self._start is None:
            return self.elapsed_before
        return self.elapsed_before + (time.monotonic() - self._start) / 60
