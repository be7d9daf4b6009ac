"""The whole training state in one file, to resume a run exactly.

A state file holds every variable of the model (weights and the dropout
layers' random-seed states: `model.variables`) and of its optimizer (step
count, moments, loss scale), with a JSON record the training job adds (its
history, the checkpoints written for averaging, the minutes trained). Keras's
own files leave things out that an exact resume needs: `model.save_weights`
skips the seed states, and `BackupAndRestore` resumes at the start of the
epoch of its last backup (docs/training.md). Loaded into the same model and
optimizer, with the data read from the same position, training continues as
if it had never stopped.

Files are written atomically (to a temporary name, flushed, then renamed),
so a crash leaves either the previous file or the new one, never half of
one; a file that is damaged anyway (a disk error, a truncated copy) is
found out when it is read, before anything is assigned.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
import zipfile
from collections.abc import Callable

import keras
import numpy as np

logger = logging.getLogger(__name__)

_NAME = re.compile(r"^state-(\d+)\.npz$")


class StateError(ValueError):
    """A state file that cannot be read, or does not fit the model."""


def state_path(directory: str | os.PathLike, step: int) -> str:
    """`directory/state-000001234.npz`."""
    return os.path.join(os.fspath(directory), f"state-{step:09d}.npz")


def state_files(directory: str | os.PathLike) -> list[str]:
    """The state files in `directory`, newest (highest step) first."""
    if not os.path.isdir(directory):
        return []
    found = [
        (int(match.group(1)), name)
        for name in os.listdir(directory)
        if (match := _NAME.match(name))
    ]
    return [os.path.join(os.fspath(directory), name) for _, name in sorted(found)][::-1]


def save_state(path: str, model: keras.Model, record: dict) -> None:
    """Writes the model's and its optimizer's variables and `record` to `path`.

    Args:
        path: the file, `*.npz`.
        model: a built model; its optimizer is saved too when it has one.
        record: JSON-serializable data saved with the variables.
    """
    arrays = {}
    for group, variables in (
        ("model", model.variables),
        ("optimizer", _optimizer_variables(model)),
    ):
        for i, variable in enumerate(variables):
            arrays[f"{group}/{i}"] = keras.ops.convert_to_numpy(variable)
    arrays["record"] = np.frombuffer(json.dumps(record).encode(), dtype=np.uint8)
    write_atomically(path, lambda f: np.savez(f, **arrays))


def load_state(path: str, model: keras.Model) -> dict:
    """Assigns the variables saved in `path` to `model` and its optimizer.

    Everything is read and checked before anything is assigned: a file that
    is damaged or does not fit leaves the model as it was.

    Returns:
        The record saved with the variables.

    Raises:
        StateError: the file cannot be read or does not fit the model.
    """
    variables = {
        "model": list(model.variables),
        "optimizer": _optimizer_variables(model),
    }
    try:
        with np.load(path) as data:
            values = {key: data[key] for key in data.files}
        record = json.loads(values.pop("record").tobytes().decode())
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
        raise StateError(f"{path}: cannot be read ({error})") from None
    for group, group_variables in variables.items():
        saved = sorted(
            (k for k in values if k.startswith(f"{group}/")),
            key=lambda k: int(k.split("/")[1]),
        )
        if len(saved) != len(group_variables):
            raise StateError(
                f"{path}: holds {len(saved)} {group} variables, the run has "
                f"{len(group_variables)}: it is the state of another model"
            )
        for key, variable in zip(saved, group_variables, strict=True):
            if tuple(values[key].shape) != tuple(variable.shape):
                raise StateError(
                    f"{path}: {variable.path} has shape {tuple(variable.shape)}, "
                    f"the file {tuple(values[key].shape)}"
                )
    for group, group_variables in variables.items():
        for i, variable in enumerate(group_variables):
            variable.assign(values[f"{group}/{i}"])
    return record


def restore_latest(directory: str | os.PathLike, model: keras.Model) -> dict | None:
    """Loads the newest state file of `directory` that can be read.

    A damaged file is skipped, with a warning, for the one before it.

    Returns:
        Its record, or `None` when `directory` holds no state file.

    Raises:
        StateError: there are state files, and none can be read.
    """
    problems = []
    for path in state_files(directory):
        try:
            record = load_state(path, model)
        except StateError as error:
            logger.warning("Skipping a damaged training state: %s", error)
            problems.append(str(error))
            continue
        logger.info("Resuming from %s", path)
        return record
    if problems:
        raise StateError(
            f"no usable training state in {os.fspath(directory)}: "
            + "; ".join(problems)
        )
    return None


def write_atomically(path: str | os.PathLike, write: Callable) -> None:
    """Calls `write(file)` on a temporary file, then renames it to `path`.

    Readers see either the old file or the whole new one. The temporary
    file sits beside `path` (so the rename does not cross file systems) and
    is removed if `write` fails.
    """
    path = os.fspath(path)
    temporary = f"{path}.tmp-{os.getpid()}"
    try:
        with open(temporary, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def save_model_atomically(model: keras.Model, path: str | os.PathLike) -> None:
    """`model.save(path)` (a `.keras` file), atomically."""
    _save_through_temporary(model.save, path, ".keras")


def save_weights_atomically(model: keras.Model, path: str | os.PathLike) -> None:
    """`model.save_weights(path)` (a `.weights.h5` file), atomically."""
    _save_through_temporary(model.save_weights, path, ".weights.h5")


def _save_through_temporary(save, path: str | os.PathLike, suffix: str) -> None:
    """`save` to a temporary name with Keras's `suffix`, then rename to `path`."""
    path = os.fspath(path)
    temporary = f"{path.removesuffix(suffix)}.tmp-{os.getpid()}{suffix}"
    try:
        save(temporary)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


class StateCheckpoints(keras.callbacks.Callback):
    """Writes the training state every `minutes`, and when training ends.

    A state due at the last batch of an epoch is written after the epoch's
    end (its logs, validation included, are then part of the record). Each
    file is `directory/state-{step}.npz` (`save_state`), with the
    record `record()` returns at that moment; the `keep` newest are kept, so
    a damaged newest file leaves an older one to resume from.

    Args:
        directory: where the files go; created if needed.
        minutes: minutes between files.
        record: returns the JSON-serializable record to save.
        keep: how many files to keep.
        write: `False` on the workers of a multi-worker run that do not
            write (they hold the same state as the chief).

    Example:
    >>> import tempfile, numpy as np, keras
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="adam", loss="mse")
    >>> folder = tempfile.mkdtemp()
    >>> states = StateCheckpoints(folder, minutes=10, record=lambda: {"a": 1})
    >>> _ = model.fit(np.zeros((4, 2)), np.zeros((4, 1)), batch_size=2,
    ...               verbose=0, callbacks=[states])
    >>> [os.path.basename(p) for p in state_files(folder)]
    ['state-000000002.npz']
    >>> restore_latest(folder, model)
    {'a': 1}
    """

    def __init__(
        self,
        directory: str | os.PathLike,
        minutes: float,
        record: Callable[[], dict],
        keep: int = 2,
        write: bool = True,
    ) -> None:
        super().__init__()
        if minutes <= 0:
            raise ValueError(f"`minutes` must be > 0. Received: minutes={minutes}")
        if keep < 1:
            raise ValueError(f"`keep` must be >= 1. Received: keep={keep}")
        self.directory = os.fspath(directory)
        self.minutes = minutes
        self.record = record
        self.keep = keep
        self.write = write
        self._last = None
        self._at_epoch_end = False

    def on_train_begin(self, logs=None):
        if self._last is None:
            self._last = time.monotonic()
        self._at_epoch_end = False

    def on_train_batch_end(self, batch, logs=None):
        if time.monotonic() - self._last >= 60.0 * self.minutes:
            if batch + 1 == (self.params or {}).get("steps"):
                # The epoch's last batch: saved once the epoch's logs are in
                # (`on_epoch_end`), or a resumed run would never log it.
                self._at_epoch_end = True
            else:
                self.save()

    def on_epoch_end(self, epoch, logs=None):
        if self._at_epoch_end:
            self._at_epoch_end = False
            self.save()

    def on_train_end(self, logs=None):
        self.save()

    def save(self) -> None:
        """Writes the state now (on a writing worker)."""
        self._last = time.monotonic()
        if not self.write:
            return
        os.makedirs(self.directory, exist_ok=True)
        step = int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))
        save_state(state_path(self.directory, step), self.model, self.record())
        for stale in state_files(self.directory)[self.keep :]:
            os.remove(stale)


def _optimizer_variables(model: keras.Model) -> list:
    optimizer = getattr(model, "optimizer", None)
    return [] if optimizer is None else list(optimizer.variables)
