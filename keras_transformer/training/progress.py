"""One progress bar over a whole training budget, in its own units."""

from __future__ import annotations

import math
import sys

import keras
from tqdm.auto import tqdm

from keras_transformer.training.budget import TrainingBudget

# The logs the bar shows, and how it names them.
SHOWN = {"loss": "loss", "perplexity": "ppl", "val_perplexity": "val_ppl"}


class BudgetProgress(keras.callbacks.Callback):
    """A bar in minutes or steps of the budget, where `fit` counts epochs.

    A time-limited run is `fit` for many epochs that a `TrainingBudget`
    cuts short, so Keras's own bar would say `Epoch 1/1000`. This bar's
    total is the budget: its minutes (`12.0/30 min`) or its steps
    (`1200/5000 steps`), or the `steps` given for a run without a budget,
    and it shows the optimizer step, the epoch and the latest loss and
    perplexities. It counts from where a resumed run was. Pass `verbose=0`
    to `fit` with it, so that Keras draws no bar of its own.

    Args:
        budget: the run's `TrainingBudget` (also among `fit`'s callbacks).
        steps: the run's total steps when the budget has neither minutes
            nor steps (e.g. epochs times batches per epoch); `None`: no
            total.
        file: where the bar goes (default: standard error).

    Example:

    >>> import io, numpy as np, keras
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(loss="mse")
    >>> budget, out = TrainingBudget(steps=6), io.StringIO()
    >>> _ = model.fit(np.zeros((8, 2)), np.zeros((8, 1)), batch_size=2,
    ...               epochs=100, verbose=0,
    ...               callbacks=[budget, BudgetProgress(budget, file=out)])
    >>> "6/6 steps" in out.getvalue(), "Epoch" in out.getvalue()
    (True, False)
    """

    def __init__(
        self, budget: TrainingBudget, steps: int | None = None, file=None
    ) -> None:
        super().__init__()
        self.budget = budget
        self.steps = budget.steps or steps
        self.file = file
        self.bar = None
        self.epoch = 0
        self.shown = {}

    def on_train_begin(self, logs=None):
        if self.bar is not None:  # one bar across several `fit` calls
            return
        minutes = self.budget.minutes
        if minutes is not None and self.budget.steps is None:
            total, unit = minutes, "min"
            form = "{desc} {percentage:3.0f}%|{bar}| {n:.1f}/{total:g} min{postfix}"
        else:
            total, unit = self.steps, "step"
            form = "{desc} {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} steps{postfix}"
            if total is None:
                form = "{desc} {n_fmt} steps{postfix}"
        self.unit = unit
        self.bar = tqdm(
            total=total,
            initial=self._position(),
            desc="training",
            bar_format=form,
            file=self.file or sys.stderr,
            dynamic_ncols=True,
            mininterval=1.0,
        )

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        self._show(logs)

    def on_epoch_end(self, epoch, logs=None):
        self._show(logs, refresh=True)

    def on_train_end(self, logs=None):
        self._show(logs, refresh=True)

    def close(self):
        """Ends the bar (when training is over)."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def _position(self) -> float:
        if self.unit == "min":
            return self.budget.elapsed_minutes
        return int(self.model.optimizer.iterations.numpy())

    def _show(self, logs, refresh=False):
        for key, name in SHOWN.items():
            value = (logs or {}).get(key)
            if value is not None and math.isfinite(float(value)):
                self.shown[name] = f"{float(value):.3g}"
        postfix = [f"epoch {self.epoch + 1}"]
        if self.unit == "min":
            step = int(self.model.optimizer.iterations.numpy())
            postfix.insert(0, f"step {step}")
        postfix += [f"{name} {value}" for name, value in self.shown.items()]
        self.bar.set_postfix_str(", ".join(postfix), refresh=False)
        position = self._position()
        if self.bar.total is not None:
            position = min(position, self.bar.total)
        self.bar.update(position - self.bar.n)  # redraws at most once a second
        if refresh:
            self.bar.refresh()
