"""Save the model at chosen times during training, e.g. to plot quality."""

from __future__ import annotations

import json
import logging
import os
import time

import keras

from keras_transformer.training.averaging import average_checkpoints
from keras_transformer.training.state import save_model_atomically, write_atomically

logger = logging.getLogger(__name__)


class Snapshots(keras.callbacks.Callback):
    """Saves the whole model after given numbers of minutes of training.

    Minutes count from the start of `fit` (tracing included), the clock
    `TrainingBudget` uses, so "after 10 minutes" means what a user waiting
    for `fit` sees. Each snapshot is checked after every batch and saved once,
    to `directory/minute_{m}/model.keras` (e.g. `minute_10`), beside a
    `snapshot.json` with the minute and optimizer step; the time spent saving
    counts as training time. Snapshots hold the raw weights, not an
    average.

    Several `fit` calls share one clock (from the first one), and a resumed
    run passes the minutes it trained before and the snapshots it saved.

    Args:
        directory: where the snapshot folders go.
        minutes: the times, in minutes, e.g. `[10, 20, 30]`.
        elapsed_minutes: minutes already trained (by an earlier run).
        saved: `{minute: step}` of the snapshots an earlier run saved.
        averaging: a `CheckpointAveraging` callback of the same `fit`, whose
            checkpoints each snapshot averages.

    Example:

    >>> import os, tempfile, numpy as np, keras
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(loss="mse")
    >>> folder = tempfile.mkdtemp()
    >>> snapshots = Snapshots(folder, minutes=[0])
    >>> _ = model.fit(np.zeros((4, 2)), np.zeros((4, 1)), verbose=0,
    ...               callbacks=[snapshots])
    >>> sorted(os.listdir(folder)), snapshots.saved
    (['minute_0'], {0: 1})
    >>> sorted(os.listdir(os.path.join(folder, 'minute_0')))
    ['model.keras', 'snapshot.json']
    """

    def __init__(
        self,
        directory: str | os.PathLike,
        minutes,
        elapsed_minutes: float = 0.0,
        saved: dict | None = None,
        averaging=None,
    ):
        super().__init__()
        minutes = list(minutes)
        for m in minutes:
            if isinstance(m, bool) or not isinstance(m, (int, float)) or m < 0:
                raise ValueError(
                    f"`minutes` must hold numbers >= 0. Received: minutes={minutes}"
                )
        self.directory = os.fspath(directory)
        self.minutes = sorted(minutes)
        self.saved = dict(saved or {})  # minute -> optimizer step it was saved at
        self.elapsed_before = elapsed_minutes
        self.averaging = averaging
        self._start = None

    @staticmethod
    def folder_name(minute) -> str:
        """`minute_10` for 10, `minute_2.5` for 2.5."""
        return f"minute_{minute:g}"

    def on_train_begin(self, logs=None):
        if self._start is None:
            self._start = time.monotonic()

    def on_train_batch_end(self, batch, logs=None):
        elapsed = self.elapsed_before + (time.monotonic() - self._start) / 60
        for minute in self.minutes:
            if minute not in self.saved and elapsed >= minute:
                self._save(minute)

    def _save(self, minute):
        folder = os.path.join(self.directory, self.folder_name(minute))
        os.makedirs(folder, exist_ok=True)
        step = int(self.model.optimizer.iterations.numpy())
        path = os.path.join(folder, "model.keras")
        if self.averaging is None:
            save_model_atomically(self.model, path)
        else:
            self.averaging.save_now()
            raw = [variable.numpy() for variable in self.model.weights]
            average_checkpoints(self.model, self.averaging.checkpoints)
            save_model_atomically(self.model, path)
            for variable, value in zip(self.model.weights, raw, strict=True):
                variable.assign(value)
        record = {"minutes": minute, "step": step}
        if self.averaging is not None:
            record["averaged"] = [
                os.path.basename(f) for f in self.averaging.checkpoints
            ]
        record = json.dumps(record).encode()
        write_atomically(
            os.path.join(folder, "snapshot.json"), lambda f: f.write(record)
        )
        self.saved[minute] = step
        logger.info("Snapshot after %g minutes (step %d).", minute, self.saved[minute])
