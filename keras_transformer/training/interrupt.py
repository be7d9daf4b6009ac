"""Training that stops early: on Ctrl-C or SIGTERM at the next step, with its
state saved; on a loss that is no longer finite, with its last good state."""

from __future__ import annotations

import logging
import math
import signal
import threading

import keras

logger = logging.getLogger(__name__)


class TrainingInterrupted(RuntimeError):
    """Training stopped on a signal; its state was saved to resume from."""


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; training stopped there."""


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


class StopOnNonFinite(keras.callbacks.Callback):
    """Ends `fit` after the step whose loss is NaN or infinite.

    Like `keras.callbacks.TerminateOnNaN`, but quiet, and it keeps the
    optimizer step at which the loss went bad in `step` (and the loss in
    `loss`), for the caller to raise `TrainingDiverged`. The weights of that
    step are not worth saving: `Checkpoints` writes none that are not finite
    or after such a loss, so the last good state stays the newest.

    Example:

    >>> import numpy as np
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer=keras.optimizers.SGD(1e30), loss="mse")
    >>> stop = StopOnNonFinite()
    >>> history = model.fit(np.ones((8, 2)), np.ones((8, 1)), batch_size=2,
    ...                     epochs=3, verbose=0, callbacks=[stop])
    >>> stop.step is not None and int(model.optimizer.iterations) == stop.step
    True
    """

    def __init__(self) -> None:
        super().__init__()
        self.step = None  # the optimizer step whose loss was not finite
        self.loss = None

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if self.step is None and loss is not None and not math.isfinite(loss):
            self.step = int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))
            self.loss = float(loss)
            self.model.stop_training = True
            logger.warning("The loss is %s at step %d: stopping.", loss, self.step)
