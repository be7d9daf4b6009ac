"""Checkpoint averaging: the final model is the mean of the last checkpoints."""

import collections
import logging
import os
import time
from collections.abc import Sequence

import keras
import numpy as np

from keras_transformer.training.state import save_weights_atomically

logger = logging.getLogger(__name__)

PathLike = str | os.PathLike

# Wall clock of the every_n_minutes schedule (replaced in tests).
_clock = time.monotonic


def average_checkpoints(model: keras.Model, paths: Sequence[PathLike]) -> keras.Model:
    """Sets the weights of `model` to the element-wise mean of checkpoints.

    Each path is a `.weights.h5` file written by `model.save_weights` or
    `keras.callbacks.ModelCheckpoint(save_weights_only=True)` for a model of
    the same architecture. Every floating-point weight of `model` (trainable
    and non-trainable: `model.weights`) becomes the mean of its values in the
    files, accumulated in float64; a weight of any other dtype (an integer
    counter, say) takes its value from the last file. Only the model's
    weights change: the state of `model.optimizer` stored in the files is
    not loaded, and the optimizer keeps its own.

    Args:
        model: A built model to load into; it is modified in place.
        paths: The checkpoint files, oldest first (the order only matters for
            non-float weights).

    Returns:
        `model`, holding the averaged weights.

    Raises:
        ValueError: If `paths` is empty, the model is not built, or a file
            does not fit the model (the message names the file and, from
            Keras, the variable). The model is left unchanged.
        FileNotFoundError: If a file does not exist (nothing is loaded).
        TypeError: If `paths` is a single path rather than a list.

    Example:

    >>> import os, shutil, tempfile
    >>> import numpy as np
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> directory = tempfile.mkdtemp()
    >>> paths = [os.path.join(directory, f"{i}.weights.h5") for i in range(3)]
    >>> for path, value in zip(paths, [1.0, 2.0, 6.0]):
    ...     model.set_weights([np.full((2, 1), value), np.full((1,), -value)])
    ...     model.save_weights(path)
    >>> model = average_checkpoints(model, paths)
    >>> [w.ravel().tolist() for w in model.get_weights()]
    [[3.0, 3.0], [-3.0]]
    >>> shutil.rmtree(directory)

    References:
        Vaswani et al., "Attention Is All You Need", 2017, section 6.1: the
        base models average the last 5 checkpoints, the big ones the last 20,
        written at 10-minute intervals.
    """
    if isinstance(paths, str | os.PathLike):
        raise TypeError(
            f"paths must be a list of checkpoint files. Received: paths={paths!r}"
        )
    paths = [os.fspath(path) for path in paths]
    if not paths:
        raise ValueError(
            "paths must name at least one checkpoint file. Received: paths=[]"
        )
    missing = [path for path in paths if not os.path.isfile(path)]
    if missing:
        raise FileNotFoundError(f"Checkpoint files not found: {missing}")
    if not model.built:
        raise ValueError(
            f"The model {model.name!r} must be built before checkpoints are "
            "averaged into it; call it on a batch or use `model.build()`."
        )

    variables = model.weights
    originals = [v.numpy() for v in variables]
    is_float = [keras.backend.is_float_dtype(v.dtype) for v in variables]
    sums = [np.zeros(value.shape, np.float64) for value in originals]
    for path in paths:
        try:
            _load_model_weights(model, path)
        except Exception as error:
            _assign(variables, originals)
            if not isinstance(error, ValueError):
                raise
            raise ValueError(
                f"Checkpoint {path!r} does not fit the model {model.name!r}; "
                f"the model was left unchanged. Keras reported: {error}"
            ) from error
        for i, variable in enumerate(variables):
            if is_float[i]:
                sums[i] += variable.numpy().astype(np.float64)

    # Non-float weights keep the value of the last file, loaded just above.
    for variable, total, floating in zip(variables, sums, is_float, strict=True):
        if floating:
            variable.assign(keras.ops.cast(total / len(paths), variable.dtype))
    logger.info("Averaged %d checkpoints into %s.", len(paths), model.name)
    return model


@keras.saving.register_keras_serializable(package="keras_transformer")
class CheckpointAveraging(keras.callbacks.Callback):
    """Saves weights periodically; at the end of training, their average.

    During `fit` the callback writes the model's weights to `directory`:

    - by default after every epoch, as `epoch-000003.weights.h5`;
    - with `every_n_steps`, whenever the optimizer's step count reaches a
      multiple of it, as `step-000500.weights.h5` (the optimizer's step);
    - with `every_n_minutes`, after the first batch that ends at least that
      long after the previous save (or the start of training), also as
      `step-000500.weights.h5`. The paper saves every 10 minutes.

    With `every_n_steps` or `every_n_minutes` the weights at the end of
    training are saved too (unless they were just saved), so the last
    minutes of training are not lost. Files the callback wrote beyond the
    latest `keep` are deleted. When training ends the model's weights become
    the mean of the kept files (`average_checkpoints`; the optimizer's state
    is not touched) and, with `save_averaged`, are written to
    `averaged.weights.h5`. To resume training from the last raw weights
    instead, load `callback.checkpoints[-1]`.

    The list of kept files lives in the callback object and carries over
    from one `fit` call to the next; a resumed run passes the files its
    earlier run kept as `checkpoints`. Other files already in `directory`
    are neither averaged nor deleted (same-named ones are overwritten).
    Each file is written atomically (under a temporary name, then renamed).
    Under a multi-worker strategy every worker writes unless `write=False`,
    so give each writing worker its own `directory`.

    Args:
        directory: Where to write the checkpoints; created if needed.
        keep: How many of the latest checkpoints to keep and average (5 for
            the paper's base models, 20 for the big ones).
        every_n_steps: Save every this many optimizer steps.
        every_n_minutes: Save every this many minutes of training. At most
            one of `every_n_steps` and `every_n_minutes` may be given;
            with neither, the callback saves after every epoch.
        save_averaged: Whether to also write the averaged weights to
            `directory/averaged.weights.h5`.
        average_at_end: Whether to average when training ends; `False`
            leaves that to the caller (`average_checkpoints(model,
            callback.checkpoints)`), e.g. when one training runs as several
            `fit` calls.
        checkpoints: Files written for the same training before (by a run
            that was stopped and resumed), oldest first, kept as if this
            callback had written them.
        write: `False` on workers that must not write files.
        spare: Older files to keep on disk beyond `keep`, not averaged: a
            training state written before the newest checkpoint (one a
            resumed run falls back to) still finds the files it lists.

    Example:

    >>> import os, shutil, tempfile
    >>> import numpy as np
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> directory = tempfile.mkdtemp()
    >>> averaging = CheckpointAveraging(directory, keep=2)
    >>> history = model.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=3,
    ...                     callbacks=[averaging], verbose=0)
    >>> sorted(os.listdir(directory))
    ['averaged.weights.h5', 'epoch-000002.weights.h5', 'epoch-000003.weights.h5']
    >>> shutil.rmtree(directory)

    References:
        Vaswani et al., "Attention Is All You Need", 2017, section 6.1.
    """

    def __init__(
        self,
        directory: PathLike,
        keep: int = 5,
        every_n_steps: int | None = None,
        every_n_minutes: float | None = None,
        save_averaged: bool = True,
        average_at_end: bool = True,
        checkpoints: Sequence[PathLike] = (),
        write: bool = True,
        spare: int = 0,
    ) -> None:
        super().__init__()
        if keep < 1:
            raise ValueError(f"keep must be at least 1. Received: keep={keep}")
        if every_n_steps is not None and every_n_steps < 1:
            raise ValueError(
                "every_n_steps must be None or at least 1. "
                f"Received: every_n_steps={every_n_steps}"
            )
        if every_n_minutes is not None and every_n_minutes <= 0:
            raise ValueError(
                "every_n_minutes must be None or positive. "
                f"Received: every_n_minutes={every_n_minutes}"
            )
        if every_n_steps is not None and every_n_minutes is not None:
            raise ValueError(
                "Give at most one of every_n_steps and every_n_minutes. "
                f"Received: every_n_steps={every_n_steps}, "
                f"every_n_minutes={every_n_minutes}"
            )
        self.directory = os.fspath(directory)
        self.keep = keep
        self.every_n_steps = every_n_steps
        self.every_n_minutes = every_n_minutes
        self.save_averaged = save_averaged
        self.average_at_end = average_at_end
        self.write = write
        self.spare = spare
        self._kept = collections.deque(os.fspath(path) for path in checkpoints)
        self._spares = collections.deque()
        self._last_saved_step = None
        self._last_save_time = None
        self._interval = 0

    @property
    def checkpoints(self) -> list[str]:
        """The kept checkpoint files, oldest first."""
        return list(self._kept)

    def on_train_begin(self, logs=None):
        os.makedirs(self.directory, exist_ok=True)
        self._last_save_time = _clock()
        if self.every_n_steps is not None:
            # A resumed optimizer may start past step 0.
            self._interval = self._step() // self.every_n_steps

    def on_train_batch_end(self, batch, logs=None):
        if self.every_n_steps is not None:
            step = self._step()
            # With steps_per_execution > 1 the step can jump past a multiple.
            interval = step // self.every_n_steps
            if interval > self._interval:
                self._interval = interval
                self._save_step(step)
        elif self.every_n_minutes is not None:
            now = _clock()
            if now - self._last_save_time >= 60.0 * self.every_n_minutes:
                self._last_save_time = now
                self._save_step(self._step())

    def save_now(self) -> None:
        """Saves the current weights as the newest checkpoint, unless the
        checkpoint of this step is already the newest."""
        if self._step() != self._last_saved_step:
            self._save_step(self._step())

    def on_epoch_end(self, epoch, logs=None):
        if self.every_n_steps is None and self.every_n_minutes is None:
            self._save(f"epoch-{epoch + 1:06d}.weights.h5")

    def on_train_end(self, logs=None):
        periodic = self.every_n_steps is not None or self.every_n_minutes is not None
        if periodic:
            self.save_now()
        if not self.average_at_end:
            return
        if not self._kept:
            logger.warning(
                "CheckpointAveraging wrote no checkpoint; the weights are left "
                "as trained."
            )
            return
        average_checkpoints(self.model, self.checkpoints)
        if self.save_averaged and self.write:
            path = os.path.join(self.directory, "averaged.weights.h5")
            save_weights_atomically(self.model, path)

    def get_config(self) -> dict:
        return {
            "directory": self.directory,
            "keep": self.keep,
            "every_n_steps": self.every_n_steps,
            "every_n_minutes": self.every_n_minutes,
            "save_averaged": self.save_averaged,
            "average_at_end": self.average_at_end,
            "checkpoints": self.checkpoints,
            "write": self.write,
            "spare": self.spare,
        }

    def _step(self) -> int:
        return int(self.model.optimizer.iterations.numpy())

    def _save_step(self, step: int) -> None:
        self._save(f"step-{step:06d}.weights.h5")
        self._last_saved_step = step

    def _save(self, filename: str) -> None:
        if not self.write:
            return
        path = os.path.join(self.directory, filename)
        save_weights_atomically(self.model, path)
        if path in self._kept:
            self._kept.remove(path)
        self._kept.append(path)
        while len(self._kept) > self.keep:
            self._spares.append(self._kept.popleft())
        while len(self._spares) > self.spare:
            stale = self._spares.popleft()
            if os.path.exists(stale) and stale not in self._kept:
                os.remove(stale)
        logger.debug("Saved %s; keeping %d checkpoints.", path, len(self._kept))


def _load_model_weights(model: keras.Model, path: str) -> None:
    """Loads the model's own variables from `path`, not the optimizer's."""
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None:
        model.load_weights(path)
    else:
        model.load_weights(path, objects_to_skip=[optimizer])


def _assign(variables, values) -> None:
    for variable, value in zip(variables, values, strict=True):
        variable.assign(value)
