"""Ctrl-C and SIGTERM end training at the next step, with its state saved."""

from __future__ import annotations

import logging
import signal
import threading

import keras

logger = logging.getLogger(__name__)


class TrainingInterrupted(RuntimeError):
    """Training stopped on a signal; its state was saved to resume from."""


class StopOnSignal(keras.callbacks.Callback):
    """Ends `fit` after the step in progress on SIGINT (Ctrl-C) or SIGTERM.

    While `fit` runs, the first such signal sets `received` and
    `model.stop_training`: the step in progress ends, `fit` ends as after its
    last epoch, and callbacks such as `Checkpoints` write the state in their
    `on_train_end`. A second Ctrl-C interrupts at once (Python's own
    `KeyboardInterrupt`). The previous handlers are back after `fit`.
    Signal handlers belong to the main thread: in another thread the
    callback does nothing.

    Not for a multi-worker run: each worker would stop at its own step, and
    the others wait for it in the next all-reduce.

    Example:

    >>> import os, numpy as np
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> class Ctrl_C(keras.callbacks.Callback):
    ...     def on_train_batch_end(self, batch, logs=None):
    ...         if batch == 1:
    ...             os.kill(os.getpid(), signal.SIGINT)
    >>> stop = StopOnSignal()
    >>> history = model.fit(np.zeros((8, 2)), np.zeros((8, 1)), batch_size=2,
    ...                     epochs=3, verbose=0, callbacks=[Ctrl_C(), stop])
    >>> stop.received, int(model.optimizer.iterations)
    ('SIGINT', 2)
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        super().__init__()
        self.received = None  # the name of the signal, once one came
        self._previous = {}

    def on_train_begin(self, logs=None):
        if threading.current_thread() is not threading.main_thread():
            return
        for number in self.SIGNALS:
            self._previous[number] = signal.signal(number, self._handle)

    def on_train_batch_end(self, batch, logs=None):
        if self.received:
            self.model.stop_training = True

    def on_train_end(self, logs=None):
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous = {}

    def _handle(self, number, frame):
        if self.received and number == signal.SIGINT:
            raise KeyboardInterrupt  # a second Ctrl-C: now
        self.received = signal.Signals(number).name
        logger.warning(
            "%s: stopping after this step and saving the training state "
            "(Ctrl-C again stops at once, unsaved).",
            self.received,
        )
