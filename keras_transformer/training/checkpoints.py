"""The training state, written on one clock with `tf.train.Checkpoint`.

One mechanism serves three uses. Every `minutes` (or every `steps`
optimizer steps), and when training ends, `Checkpoints` writes
`DIRECTORY/ckpt-STEP` through a `tf.train.CheckpointManager`. Each checkpoint holds

- the model's weights by name: each is found again by its Keras path
  below the model (`weights/encoder/layer_0/self_attention/query/kernel`,
  `weights_by_path`), not by its position in a list;
- its optimizer: step count, moments, loss scale (Keras's optimizer keeps
  its moments in the order of the model's trainable variables);
- the dropout layers' seed states, by the layer that owns them (Keras does
  not make `SeedGenerator`s trackable, so they are named here);
- a JSON record the caller adds (the training job: its history).

The same files are what a resumed run restores (`restore_latest`), what is
averaged at the end (`average_checkpoints(model, checkpoints[-5:])`), and
what a snapshot keeps: after each of `snapshot_minutes`, and at each of
`snapshot_steps`, the checkpoint is written and the newest `snapshot_keep`
are hard-linked into `snapshot_dir/minute_M/` (or `step_S/`), to be averaged
into a `model.keras` after training (`write_snapshot_model`). With
checkpoints every `steps`, an uninterrupted run's snapshots by steps and
last checkpoints' average are the same models on any machine, however
fast; by minutes they are not. (A run stopped and resumed also has the
checkpoint of the step it stopped at.) Nothing swaps weights in and out
of the model while it trains.

TensorFlow writes each checkpoint under a temporary name and renames it;
the manager's `checkpoint` index is replaced atomically. A checkpoint that
is damaged anyway (a disk error, a truncated copy) is found out when it is
read, before anything is assigned.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import shutil
import time
from collections.abc import Callable, Sequence

import keras
import tensorflow as tf

from keras_transformer.training.atomic import save_model_atomically, write_atomically
from keras_transformer.training.averaging import average_checkpoints, weights_by_path
from keras_transformer.training.best import (
    BEST_DIR,
    SCORES_FILE,
    all_finite,
    choose_final,
    read_scores,
)

logger = logging.getLogger(__name__)

CHECKPOINT_NAME = "ckpt"
DAMAGED_DIR = "damaged"
SNAPSHOT_FILE = "snapshot.json"
_PREFIX = re.compile(rf"^{CHECKPOINT_NAME}-(\d+)\.index$")

# The clock of every schedule here (replaced in tests).
_clock = time.monotonic


class CheckpointError(ValueError):
    """A checkpoint that cannot be read, or does not fit the model."""


def training_checkpoint(
    model: keras.Model, record: tf.Variable | None = None, named_weights: bool = True
) -> tf.train.Checkpoint:
    """A `tf.train.Checkpoint` of `model`, its optimizer, seeds and `record`.

    Args:
        model: a built model; its optimizer is included when it has one.
        record: a string `tf.Variable` saved alongside, or `None`.
        named_weights: include the weights by name (`weights_by_path`);
            `False` only to read files of earlier versions, which lack them.

    Example:

    >>> import tempfile
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> prefix = training_checkpoint(model).write(tempfile.mkdtemp() + "/ckpt")
    >>> twin = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> status = training_checkpoint(twin).read(prefix)
    >>> bool((twin.get_weights()[0] == model.get_weights()[0]).all())
    True
    """
    # The weights by name (`weights_by_path`); the model too, whose object
    # graph leads to its optimizer (and the files of earlier versions).
    parts = {"model": model, "seeds": _seed_states(model)}
    if named_weights:
        parts["weights"] = weights_by_path(model)
    if getattr(model, "optimizer", None) is not None:
        parts["optimizer"] = model.optimizer
    if record is not None:
        parts["record"] = record
    return tf.train.Checkpoint(**parts)


def checkpoint_prefixes(directory: str | os.PathLike) -> list[str]:
    """The checkpoints in `directory`, oldest (lowest step) first."""
    if not os.path.isdir(directory):
        return []
    found = sorted(
        (int(match.group(1)), name.removesuffix(".index"))
        for name in os.listdir(directory)
        if (match := _PREFIX.match(name))
    )
    return [os.path.join(os.fspath(directory), name) for _, name in found]


def restore(prefix: str, model: keras.Model) -> dict:
    """Restores the model, optimizer and seeds of checkpoint `prefix`.

    Every value is read (and its checksum checked) before anything is
    assigned, and a checkpoint that does not fit leaves the model and its
    optimizer as they were.

    Returns:
        The checkpoint's record (`{}` when it has none).

    Raises:
        CheckpointError: `prefix` cannot be read or does not fit the model.
    """
    try:
        reader = tf.train.load_checkpoint(prefix)
        keys = list(reader.get_variable_to_shape_map())
        for key in keys:
            reader.get_tensor(key)
    except (tf.errors.OpError, ValueError, IndexError, OSError) as error:
        message = " ".join(str(error).split())[:300]
        raise CheckpointError(f"{prefix}: cannot be read ({message})") from None
    variables = list(model.variables)
    if getattr(model, "optimizer", None) is not None:
        variables += list(model.optimizer.variables)
    before = [keras.ops.convert_to_numpy(v) for v in variables]
    record = tf.Variable("", dtype=tf.string, trainable=False)
    named = any(key.startswith("weights/") for key in keys)
    checkpoint = training_checkpoint(model, record, named_weights=named)
    if any(key.startswith("save_counter/") for key in keys):
        checkpoint.save_counter  # noqa: B018 (created: the manager saves it)
    try:
        checkpoint.read(prefix).assert_consumed()
    except (AssertionError, ValueError, tf.errors.OpError) as error:
        for variable, value in zip(variables, before, strict=True):
            variable.assign(value)
        message = " ".join(str(error).split())[:300]
        raise CheckpointError(
            f"{prefix}: does not fit the model {model.name!r} ({message})"
        ) from None
    text = record.numpy().decode()
    return json.loads(text) if text else {}


def restore_latest(
    directory: str | os.PathLike, model: keras.Model, set_aside: bool = True
) -> dict | None:
    """Restores the newest checkpoint of `directory` that can be read.

    A damaged one is skipped, with a warning, for the one before it, and
    moved to `directory/damaged/` (with `set_aside`; `False` on the workers
    of a multi-worker run that do not write).

    Returns:
        Its record, or `None` when `directory` holds no checkpoint.

    Raises:
        CheckpointError: there are checkpoints, and none can be read.
    """
    problems = []
    for prefix in reversed(checkpoint_prefixes(directory)):
        try:
            record = restore(prefix, model)
        except CheckpointError as error:
            logger.warning("Skipping a damaged training state: %s", error)
            problems.append(str(error))
            if set_aside:
                _set_aside(prefix)
            continue
        logger.info("Resuming from %s", prefix)
        return record
    if problems:
        raise CheckpointError(
            f"no usable training state in {os.fspath(directory)}: "
            + "; ".join(problems)
        )
    return None


def snapshot_label(minute: float | None = None, step: int | None = None) -> str:
    """The name of a snapshot's folder: `minute_30`, `step_4000`.

    >>> snapshot_label(minute=30.0), snapshot_label(step=4000)
    ('minute_30', 'step_4000')
    """
    return f"minute_{minute:g}" if step is None else f"step_{step}"


class Checkpoints(keras.callbacks.Callback):
    """Writes the training state every `minutes` or `steps`, at snapshots, at the end.

    One clock, from the first `fit` call (plus `elapsed_minutes` trained
    before a resume), decides the writes by minutes; with `steps` instead
    of `minutes`, the optimizer's step count decides the regular ones: a
    checkpoint at each multiple of `steps`. A write due at the last batch
    of an epoch waits for the epoch's end, so its record holds the epoch's
    logs. A snapshot at a step is taken at that very step: after its batch
    (or at its epoch's end, the same step). Each checkpoint is
    `directory/ckpt-STEP` (`training_checkpoint`),
    with `{**record(), "minutes": ..., "snapshots": ...}` as its record; the
    manager keeps the `keep` newest. No state is written whose weights are
    not finite, nor any after a batch whose loss was not (a warning says so
    once): the newest checkpoint stays the last good one.

    Args:
        directory: where the checkpoints go; created if needed.
        minutes: minutes between checkpoints (the paper: 10).
        steps: optimizer steps between checkpoints, instead of `minutes`:
            the same checkpoints on any machine, however fast.
        keep: how many checkpoints to keep: at least the number averaged
            at the end, plus one to fall back to if the newest is damaged.
        record: returns a JSON-serializable dict to save with each one.
        snapshot_minutes: after each of these minutes of training, a
            checkpoint is written and the newest `snapshot_keep` are kept in
            `snapshot_dir/minute_M/` for good (`write_snapshot_model` turns
            them into a model).
        snapshot_steps: the same at each of these optimizer steps, into
            `snapshot_dir/step_S/`. One a resumed run has passed without
            taking it (a recipe changed) is left out, with a warning.
        snapshot_dir: the snapshots' folder (required with snapshots).
        snapshot_keep: how many checkpoints a snapshot keeps (and averages).
        elapsed_minutes: minutes trained before (by a run now resumed).
        snapshots: `{label: step}` of the snapshots written before, by
            `snapshot_label` (a bare number is a minute, as records of
            earlier versions hold).
        write: `False` on the workers of a multi-worker run that do not
            write (they hold the same state as the chief; reading it takes
            no collective operation, so the chief saves alone).
        best_dir: the folder of a `BestCheckpoints`; a snapshot also keeps
            its checkpoints then, in `minute_M/best/`.

    Example:

    >>> import tempfile, numpy as np
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="adam", loss="mse")
    >>> folder = tempfile.mkdtemp()
    >>> checkpoints = Checkpoints(folder, minutes=10, record=lambda: {"a": 1})
    >>> _ = model.fit(np.zeros((4, 2)), np.zeros((4, 1)), batch_size=2,
    ...               epochs=2, verbose=0, callbacks=[checkpoints])
    >>> [os.path.basename(p) for p in checkpoints.checkpoints]
    ['ckpt-4']
    >>> sorted(restore_latest(folder, model).items())[0]
    ('a', 1)
    """

    def __init__(
        self,
        directory: str | os.PathLike,
        minutes: float | None = None,
        keep: int = 2,
        record: Callable[[], dict] | None = None,
        snapshot_minutes: Sequence[float] = (),
        snapshot_steps: Sequence[int] = (),
        snapshot_dir: str | os.PathLike | None = None,
        snapshot_keep: int = 1,
        elapsed_minutes: float = 0.0,
        snapshots: dict | None = None,
        write: bool = True,
        best_dir: str | os.PathLike | None = None,
        steps: int | None = None,
    ) -> None:
        super().__init__()
        if (minutes is None) == (steps is None):
            raise ValueError(
                "Pass exactly one of `minutes` and `steps`. "
                f"Received: minutes={minutes}, steps={steps}"
            )
        if minutes is not None and minutes <= 0:
            raise ValueError(f"`minutes` must be > 0. Received: minutes={minutes}")
        if steps is not None and (
            isinstance(steps, bool) or not isinstance(steps, int) or steps < 1
        ):
            raise ValueError(
                f"`steps` must be an integer >= 1. Received: steps={steps}"
            )
        for name, value in (("keep", keep), ("snapshot_keep", snapshot_keep)):
            if value < 1:
                raise ValueError(f"`{name}` must be >= 1. Received: {name}={value}")
        snapshot_minutes = sorted(snapshot_minutes)
        if any(isinstance(m, bool) or m < 0 for m in snapshot_minutes):
            raise ValueError(
                "`snapshot_minutes` must hold numbers >= 0. "
                f"Received: snapshot_minutes={snapshot_minutes}"
            )
        snapshot_steps = sorted(set(snapshot_steps))
        if any(
            isinstance(s, bool) or not isinstance(s, int) or s < 1
            for s in snapshot_steps
        ):
            raise ValueError(
                "`snapshot_steps` must hold integers >= 1. "
                f"Received: snapshot_steps={snapshot_steps}"
            )
        for name, value in (
            ("snapshot_minutes", snapshot_minutes),
            ("snapshot_steps", snapshot_steps),
        ):
            if value and snapshot_dir is None:
                raise ValueError(f"`{name}` needs a `snapshot_dir`.")
        self.directory = os.fspath(directory)
        self.minutes = minutes
        self.steps = steps
        self.keep = max(keep, snapshot_keep)
        self.record = record or dict
        self.snapshot_minutes = snapshot_minutes
        self.snapshot_steps = snapshot_steps
        self.snapshot_dir = snapshot_dir and os.fspath(snapshot_dir)
        self.snapshot_keep = snapshot_keep
        self.elapsed_before = elapsed_minutes
        self.snapshots = {_as_label(k): int(s) for k, s in (snapshots or {}).items()}
        self.write = write
        self.best_dir = best_dir and os.fspath(best_dir)
        self._start = None
        self._last = None  # elapsed minutes at the last write
        self._last_step = None  # and its step
        self._due_at_epoch_end = False
        self._manager = None
        self._record = None
        self._diverged = False
        self._passed = set()  # step snapshots a resumed run was already past

    @property
    def checkpoints(self) -> list[str]:
        """The checkpoints on disk, oldest first (their prefixes)."""
        return checkpoint_prefixes(self.directory) if self.write else []

    def elapsed_minutes(self) -> float:
        """Minutes trained: before a resume, and since the first `fit`."""
        if self._start is None:
            return self.elapsed_before
        return self.elapsed_before + (_clock() - self._start) / 60

    def on_train_begin(self, logs=None):
        if self._start is None:
            self._start = _clock()
            self._last = self.elapsed_before
        if self.steps:
            self._last_step = self._step()  # (resumed: the restored step)
        self._due_at_epoch_end = False
        self.finish_snapshots()
        step = self._step_if_pending()
        for label in self._pending(-math.inf, step):
            # Its step is past (a run resumed there under another recipe):
            # taken now, it would hold a later model than its name says.
            self._passed.add(label)
            if self.write:
                logger.warning(
                    "No snapshot %s: training resumes at step %d.", label, step
                )

    def finish_snapshots(self) -> None:
        """Finishes the snapshots a run stopped in the middle of writing.

        A snapshot is in the record of its checkpoint before its folder is
        complete; a run killed in between finishes it when training begins
        again, or (a budget already spent: no training) when the caller
        calls this.
        """
        if self.write:
            for label, step in self.snapshots.items():
                if not os.path.exists(self._snapshot_file(label)):
                    self._keep_snapshot(label, step)

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(loss):
            self._stop_writing()  # nothing from here on is worth keeping
        elapsed = self.elapsed_minutes()
        step = self._step() if self.steps else self._step_if_pending()
        if self._due(elapsed, step) or self._pending(elapsed, step):
            if batch + 1 == (self.params or {}).get("steps"):
                self._due_at_epoch_end = True
            else:
                self.save(elapsed)

    def on_epoch_end(self, epoch, logs=None):
        if self._due_at_epoch_end:
            self._due_at_epoch_end = False
            self.save()

    def on_train_end(self, logs=None):
        self.save()

    def save(self, elapsed: float | None = None) -> None:
        """Writes a checkpoint now, and the snapshots that are due.

        Args:
            elapsed: the minutes trained now, if just read off the clock.
        """
        if elapsed is None:
            elapsed = self.elapsed_minutes()
        self._last = elapsed
        step = self._last_step = self._step()
        if not self.write:
            return
        if self._diverged or not all_finite(self.model.trainable_variables):
            self._stop_writing()
            return
        due = self._pending(elapsed, step)
        for label in due:
            self.snapshots[label] = step
        record = {**self.record(), "minutes": elapsed, "snapshots": self.snapshots}
        manager = self._get_manager()
        self._record.assign(json.dumps(record))
        manager.save(checkpoint_number=step)
        for label in due:
            self._keep_snapshot(label, step)

    def _stop_writing(self) -> None:
        if not self._diverged and self.write:
            step = self._step()
            logger.warning(
                "Not writing the training state of step %d or later: the loss or "
                "the weights are not finite (the last state written stays the "
                "newest).",
                step,
            )
        self._diverged = True

    def _step(self) -> int:
        return int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))

    def _step_if_pending(self) -> int | None:
        """The step, read only while a snapshot at a step is still to come."""
        for s in self.snapshot_steps:
            label = snapshot_label(step=s)
            if label not in self.snapshots and label not in self._passed:
                return self._step()
        return None

    def _due(self, elapsed: float, step: int | None) -> bool:
        if self.steps is None:
            return elapsed - self._last >= self.minutes
        # A multiple of `steps` passed since the last write (the step
        # stands still when a loss-scale optimizer skips one).
        return step // self.steps > self._last_step // self.steps

    def _pending(self, elapsed: float, step: int | None) -> list[str]:
        """The labels of the snapshots due now and not taken yet."""
        due = [snapshot_label(minute=m) for m in self.snapshot_minutes if elapsed >= m]
        if step is not None:
            due += [snapshot_label(step=s) for s in self.snapshot_steps if step >= s]
        taken = self.snapshots.keys() | self._passed
        return [label for label in due if label not in taken]

    def _get_manager(self) -> tf.train.CheckpointManager:
        if self._manager is None:
            self._record = tf.Variable("", dtype=tf.string, trainable=False)
            self._manager = tf.train.CheckpointManager(
                training_checkpoint(self.model, self._record),
                self.directory,
                max_to_keep=self.keep,
                checkpoint_name=CHECKPOINT_NAME,
            )
        return self._manager

    def _snapshot_file(self, label: str) -> str:
        return os.path.join(self.snapshot_dir, label, SNAPSHOT_FILE)

    def _keep_snapshot(self, label: str, step: int) -> None:
        """Hard-links the newest `snapshot_keep` checkpoints up to `step`."""
        suffix = f"-{step}"
        kept = [p for p in self.checkpoints if int(p.rsplit("-", 1)[1]) <= step]
        kept = kept[-self.snapshot_keep :]
        if not kept or not kept[-1].endswith(suffix):
            logger.warning("Snapshot %s: no checkpoint left.", label)
            return
        folder = os.path.dirname(self._snapshot_file(label))
        os.makedirs(folder, exist_ok=True)
        for prefix in kept:
            for name in os.listdir(self.directory):
                if name.startswith(os.path.basename(prefix) + "."):
                    target = os.path.join(folder, name)
                    if os.path.exists(target):
                        os.remove(target)
                    _link_or_copy(os.path.join(self.directory, name), target)
        if self.best_dir and os.path.isdir(self.best_dir):
            # The best ones up to the snapshot's step, with their scores.
            scores = {
                name: score
                for name, score in read_scores(self.best_dir).items()
                if int(name.rsplit("-", 1)[1]) <= step
            }
            best = os.path.join(folder, BEST_DIR)
            shutil.rmtree(best, ignore_errors=True)
            os.makedirs(best)
            for name in os.listdir(self.best_dir):
                if name.split(".", 1)[0] in scores:
                    _link_or_copy(
                        os.path.join(self.best_dir, name), os.path.join(best, name)
                    )
            text = (json.dumps(scores, indent=1) + "\n").encode()
            write_atomically(os.path.join(best, SCORES_FILE), lambda f: f.write(text))
        kind, value = label.split("_", 1)
        info = {"minutes": float(value)} if kind == "minute" else {}
        info |= {"step": step, "checkpoints": [os.path.basename(p) for p in kept]}
        text = (json.dumps(info) + "\n").encode()
        write_atomically(self._snapshot_file(label), lambda f: f.write(text))
        logger.info("Snapshot %s (step %d).", label, step)


def write_snapshot_model(
    model: keras.Model,
    folder: str | os.PathLike,
    score: Callable[[], float] | None = None,
) -> str:
    """Turns a snapshot's checkpoints into `folder/model.keras`.

    Without `score`, or when the snapshot kept no best checkpoints, the
    model is the average of its checkpoints (the newest when it was taken).
    With `score` (validation, lower is better) and the best checkpoints
    kept then (`best_dir` of `Checkpoints`), it is the best on `score` of
    that average, the best ones' average and the best one (`choose_final`),
    and `snapshot.json` says which.

    Args:
        model: a model of the run's architecture; its weights are replaced.
        folder: a snapshot folder written by `Checkpoints` (`minute_30`).
        score: the validation score of the model's current weights.

    Returns:
        The path of the saved model.
    """
    folder = os.fspath(folder)
    info_file = os.path.join(folder, SNAPSHOT_FILE)
    with open(info_file, encoding="utf-8") as f:
        info = json.load(f)
    last = [os.path.join(folder, n) for n in info["checkpoints"]]
    best_folder = os.path.join(folder, BEST_DIR)
    ranked = sorted(read_scores(best_folder).items(), key=lambda item: item[1])
    best = [os.path.join(best_folder, name) for name, _ in ranked]
    if score is not None and best:
        candidates = {"last": last, "best_average": best, "best": best[:1]}
        info["final_model"] = choose_final(model, candidates, score)
        text = (json.dumps(info) + "\n").encode()
        write_atomically(info_file, lambda f: f.write(text))
    else:
        average_checkpoints(model, last)
    path = os.path.join(folder, "model.keras")
    save_model_atomically(model, path)
    return path


def _as_label(key: str | float) -> str:
    """A snapshot's label from a record: `minute_30`, or a bare minute."""
    key = str(key)
    if key.startswith(("minute_", "step_")):
        return key
    return snapshot_label(minute=float(key))


def _seed_states(model: keras.Model) -> dict:
    """The model's random-seed variables, named by the layer that owns them.

    A seed variable's path is `MODEL/LAYER/.../seed_generator_N/...`; the
    model's name and `N` depend on what else the process built, so the key
    is the owner's path alone (`encoder.layer_0`), numbered when one
    owner has several.
    """
    weights = {id(v) for v in model.weights}
    metrics = {id(v) for v in getattr(model, "metrics_variables", [])}
    states = {}
    for variable in model.variables:
        if id(variable) in weights or id(variable) in metrics:
            continue
        owner = ".".join(variable.path.split("/")[1:-2]) or "model"
        key, n = owner, 1
        while key in states:
            key, n = f"{owner}_{n}", n + 1
        states[key] = variable
    return states


def _set_aside(prefix: str) -> None:
    """Moves the files of checkpoint `prefix` into `damaged/` beside it."""
    directory, name = os.path.split(prefix)
    damaged = os.path.join(directory, DAMAGED_DIR)
    os.makedirs(damaged, exist_ok=True)
    for file in os.listdir(directory):
        if file.startswith(name + "."):
            os.replace(os.path.join(directory, file), os.path.join(damaged, file))


def _link_or_copy(source: str, target: str) -> None:
    """Hard-links a checkpoint's data file; copies its small index file.

    TensorFlow replaces a data file by renaming a new one into place, but
    rewrites an index file in place: a checkpoint written again at the same
    step (at an epoch's end, then when training ends) would otherwise change
    the index of the snapshot's copy under its old data.
    """
    if ".data-" in os.path.basename(source):
        try:
            os.link(source, target)
            return
        except OSError:  # a file system without hard links
            pass
    shutil.copyfile(source, target)
