"""The best checkpoints by validation, and the final model chosen on it.

On a small corpus the last checkpoints of a long run are not the best
ones: the model overfits, and validation perplexity climbs again. So, as
fairseq's `--keep-best-checkpoints` and OpenNMT's early stopping do,
`BestCheckpoints` keeps the `keep` checkpoints with the lowest validation
score, and `choose_final` sets the model to the best of a few candidates
(the average of the last checkpoints, the average of the best ones, the
best one alone), judged on validation too. The test split plays no part.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Callable

import keras

from keras_transformer.training.atomic import write_atomically
from keras_transformer.training.averaging import average_checkpoints

logger = logging.getLogger(__name__)

BEST_DIR = "best"
"""The best checkpoints' folder, inside the training job's checkpoints."""
SCORES_FILE = "scores.json"


class BestCheckpoints(keras.callbacks.Callback):
    """Keeps the `keep` checkpoints of lowest `monitor`, written at epoch ends.

    After every epoch whose logs hold a finite `monitor` (Keras adds
    `val_...` entries when `fit` has validation data), the weights are
    written to `directory/ckpt-STEP` when they rank among the `keep` best
    so far, and the one they push out is deleted. `directory/scores.json`
    lists the kept ones, best first; a resumed run goes on from it.

    Args:
        directory: where the checkpoints go; created if needed.
        keep: how many to keep.
        monitor: the log entry to minimize (default: validation perplexity).
        write: `False` on workers that do not write.

    Example:

    >>> import tempfile, numpy as np
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> best = BestCheckpoints(tempfile.mkdtemp(), keep=2, monitor="val_loss")
    >>> x, y = np.ones((4, 2)), np.ones((4, 1))
    >>> _ = model.fit(x, y, validation_data=(x, y), batch_size=2, epochs=3,
    ...               verbose=0, callbacks=[best])
    >>> [os.path.basename(p) for p in best.best()]  # lowest loss first
    ['ckpt-6', 'ckpt-4']
    """

    def __init__(
        self,
        directory: str | os.PathLike,
        keep: int = 5,
        monitor: str = "val_perplexity",
        write: bool = True,
    ) -> None:
        super().__init__()
        if keep < 1:
            raise ValueError(f"`keep` must be >= 1. Received: keep={keep}")
        self.directory = os.fspath(directory)
        self.keep = keep
        self.monitor = monitor
        self.write = write
        self.scores = read_scores(self.directory)

    def forget_after(self, step: int) -> None:
        """Drops the kept checkpoints past `step` (the state a run resumes from).

        A run killed between two training states may have kept checkpoints
        of training it then lost; the resumed run trains those steps again.
        """
        later = [name for name in self.scores if int(name.rsplit("-", 1)[1]) > step]
        if not later:
            return
        for name in later:
            del self.scores[name]
        if self.write:
            self._write_scores()
            self._delete(later)
        logger.info("Dropped best checkpoints of lost training: %s", later)

    def best(self, count: int | None = None) -> list[str]:
        """The prefixes of the best `count` (all kept: `None`), best first."""
        ranked = sorted(self.scores.items(), key=lambda item: item[1])
        names = [name for name, _ in ranked[:count]]
        return [os.path.join(self.directory, name) for name in names]

    def on_epoch_end(self, epoch, logs=None):
        score = (logs or {}).get(self.monitor)
        if not self.write or score is None or not math.isfinite(float(score)):
            return
        step = int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))
        name = f"ckpt-{step}"
        ranked = sorted(self.scores.values())
        if len(ranked) >= self.keep and float(score) >= ranked[self.keep - 1]:
            return
        from keras_transformer.training.checkpoints import training_checkpoint

        if not all_finite(self.model.trainable_variables):
            return
        os.makedirs(self.directory, exist_ok=True)
        training_checkpoint(self.model).write(os.path.join(self.directory, name))
        self.scores[name] = float(score)
        dropped = [os.path.basename(p) for p in self.best()[self.keep :]]
        for old in dropped:
            del self.scores[old]
        self._write_scores()
        self._delete(dropped)  # after the list no longer names them
        logger.info("Best checkpoints by %s: %s", self.monitor, self.scores)

    def _write_scores(self) -> None:
        text = (json.dumps(self.scores, indent=1) + "\n").encode()
        write_atomically(
            os.path.join(self.directory, SCORES_FILE), lambda f: f.write(text)
        )

    def _delete(self, names) -> None:
        for name in names:
            for file in os.listdir(self.directory):
                if file.startswith(name + "."):
                    os.remove(os.path.join(self.directory, file))


def all_finite(variables) -> bool:
    """Whether every value of `variables` is finite."""
    return all(
        bool(keras.ops.convert_to_numpy(keras.ops.all(keras.ops.isfinite(v))))
        for v in variables
    )


def read_scores(directory: str | os.PathLike) -> dict:
    """`{checkpoint name: score}` of the kept best checkpoints in `directory`.

    Names whose files are gone are left out.
    """
    path = os.path.join(os.fspath(directory), SCORES_FILE)
    try:
        with open(path) as f:
            scores = json.load(f)
    except FileNotFoundError:
        return {}
    return {
        name: float(score)
        for name, score in scores.items()
        if os.path.exists(os.path.join(os.fspath(directory), name + ".index"))
    }


def choose_final(
    model: keras.Model,
    candidates: dict[str, list[str]],
    score: Callable[[], float],
) -> dict:
    """Sets `model` to the candidate with the lowest `score()`, and says which.

    Args:
        model: the model; each candidate's average is loaded into it in turn.
        candidates: `{name: checkpoint prefixes to average}`; empty lists are
            passed over.
        score: the validation score of the model's current weights.

    Returns:
        `{"choice": name, "checkpoints": [names], "scores": {name: score}}`.

    A candidate whose checkpoints cannot be read is passed over, with a
    warning.

    Raises:
        ValueError: no candidate has checkpoints that can be read.
    """
    scores, chosen = {}, None
    for name, prefixes in candidates.items():
        if not prefixes:
            continue
        try:
            average_checkpoints(model, prefixes)
        except (ValueError, OSError, IndexError) as error:  # a damaged file
            logger.warning("Passing over the candidate %s: %s", name, error)
            continue
        scores[name] = round(float(score()), 4)
        if chosen is None or scores[name] < scores[chosen]:
            chosen = name
    if chosen is None:
        raise ValueError("choose_final: no candidate has checkpoints that can be read")
    if chosen != list(scores)[-1]:  # the model holds the last one scored
        average_checkpoints(model, candidates[chosen])
    return {
        "choice": chosen,
        "checkpoints": [os.path.basename(p) for p in candidates[chosen]],
        "scores": scores,
    }
