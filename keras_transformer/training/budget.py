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
    optimizer, so a run resumed from a backup keeps counting where it was.

    Args:
        minutes: wall-clock budget in minutes, or `None`.
        steps: total optimizer steps, or `None`.

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

    def __init__(self, minutes: float | None = None, steps: int | None = None):
        super().__init__()
        if minutes is not None and minutes < 0:
            raise ValueError(f"`minutes` must be >= 0. Received: minutes={minutes}")
        if steps is not None and steps < 1:
            raise ValueError(f"`steps` must be >= 1. Received: steps={steps}")
        self.minutes = minutes
        self.steps = steps
        self.stopped = False
        self._start = None

    def on_train_begin(self, logs=None):
        self._start = time.monotonic()
        self.stopped = False

    def on_train_batch_end(self, batch, logs=None):
        if self.minutes is not None and self.elapsed_minutes >= self.minutes:
            self._stop(f"time budget of {self.minutes:g} minutes reached")
        if self.steps is not None:
            if int(self.model.optimizer.iterations.numpy()) >= self.steps:
                self._stop(f"step budget of {self.steps} steps reached")

    def _stop(self, reason):
        if not self.stopped:
            logger.info("Stopping training: %s.", reason)
        self.stopped = True
        self.model.stop_training = True

    @property
    def elapsed_minutes(self) -> float:
        """Minutes since training began."""
        return 0.0 if self._start is None else (time.monotonic() - self._start) / 60
