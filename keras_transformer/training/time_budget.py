"""Stop training after a wall-clock budget."""

from __future__ import annotations

import logging
import time

import keras

logger = logging.getLogger(__name__)


class TimeBudget(keras.callbacks.Callback):
    """Stops `fit` once `minutes` of training have passed.

    The check runs after every batch, so training ends within one step of the
    budget; the epoch in progress is cut short.

    Args:
        minutes: the budget, in minutes.

    Example:

    >>> import numpy as np, keras
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(loss="mse")
    >>> budget = TimeBudget(minutes=0.0)
    >>> history = model.fit(np.zeros((8, 2)), np.zeros((8, 1)), batch_size=2,
    ...                     epochs=5, callbacks=[budget], verbose=0)
    >>> budget.stopped, len(history.history["loss"])
    (True, 1)
    """

    def __init__(self, minutes: float):
        super().__init__()
        if minutes < 0:
            raise ValueError(f"`minutes` must be >= 0. Received: minutes={minutes}")
        self.minutes = minutes
        self.stopped = False
        self._start = None

    def on_train_begin(self, logs=None):
        self._start = time.monotonic()
        self.stopped = False

    def on_train_batch_end(self, batch, logs=None):
        if time.monotonic() - self._start >= 60.0 * self.minutes:
            if not self.stopped:
                logger.info("Time budget of %.1f minutes reached.", self.minutes)
            self.stopped = True
            self.model.stop_training = True

    @property
    def elapsed_minutes(self) -> float:
        """Minutes since training began."""
        return 0.0 if self._start is None else (time.monotonic() - self._start) / 60
