"""Plots of learning-rate schedules, section 5.3 of the paper."""

import inspect
import numbers
from collections.abc import Callable

import keras
import numpy as np
from matplotlib.figure import Figure


def plot_learning_rate(
    schedule: Callable,
    steps=40000,
    warmup_steps: float | None = None,
) -> Figure:
    """Draws a learning-rate schedule against the training step.

    The schedule is called once on the whole array of steps; if that fails
    with a `TypeError` or `ValueError`, or does not return one value per
    step, it is called step by step with Python numbers instead. So any
    callable `step -> learning rate` works: a
    `keras.optimizers.schedules.LearningRateSchedule` such as
    `keras_transformer.schedules.TransformerSchedule`, a NumPy function or a
    plain Python one.

    The end of warm-up is marked by a dashed vertical line at `warmup_steps`,
    labelled in the legend. The figure has one axes, `fig.axes[0]`, whose
    first line is the schedule. It is built with matplotlib's object API: no
    pyplot window or global state is involved.

    Args:
        schedule: callable from step to learning rate.
        steps: number of steps `n`, drawn as steps `1, ..., n` (step 0 is
            left out: the paper's formula is infinite there); or a 1-D
            array of the steps to draw.
        warmup_steps: step where warm-up ends. `None` reads
            `schedule.warmup_steps` when the schedule has that attribute and
            otherwise draws no line.

    Returns:
        A `matplotlib.figure.Figure`.

    Example:

    >>> import numpy as np
    >>> fig = plot_learning_rate(
    ...     lambda step: 512**-0.5 * np.minimum(step**-0.5, step * 40**-1.5),
    ...     steps=200,
    ...     warmup_steps=40,
    ... )
    >>> len(fig.axes)
    1
    >>> schedule_line, warmup_line = fig.axes[0].get_lines()
    >>> int(schedule_line.get_ydata().argmax()) + 1  # the peak, at step 40
    40
    >>> list(warmup_line.get_xdata())
    [40, 40]

    References:
        Vaswani et al. 2017, "Attention Is All You Need", section 5.3.
    """
    if not callable(schedule):
        raise ValueError(
            f"`schedule` must be callable (step -> learning rate). "
            f"Received: {schedule!r}"
        )
    steps = _as_steps(steps)
    values = _evaluate(schedule, steps)
    if warmup_steps is None:
        warmup_steps = getattr(schedule, "warmup_steps", None)
    if warmup_steps is not None and (
        isinstance(warmup_steps, bool) or not isinstance(warmup_steps, numbers.Real)
    ):
        raise ValueError(
            f"`warmup_steps` must be a number. Received: warmup_steps={warmup_steps!r}"
        )

    fig = Figure(figsize=(7.0, 4.0), layout="constrained")
    ax = fig.subplots()
    ax.plot(steps, values, label="learning rate")
    if warmup_steps is not None:
        ax.axvline(
            warmup_steps,
            color="tab:gray",
            linestyle="--",
            label=f"end of warm-up (step {warmup_steps:g})",
        )
        ax.legend(loc="upper right")
    ax.set_title(_describe(schedule))
    ax.set_xlabel("Training step")
    ax.set_ylabel("Learning rate")
    ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
    ax.set_ylim(bottom=0.0 if values.min() >= 0 else None)
    ax.grid(alpha=0.3)
    return fig


def _as_steps(steps) -> np.ndarray:
    if isinstance(steps, numbers.Integral) and not isinstance(steps, bool):
        if steps < 1:
            raise ValueError(
                f"`steps` must be a positive integer or an array of steps. "
                f"Received: steps={steps}"
            )
        return np.arange(1, int(steps) + 1)
    array = np.asarray(keras.ops.convert_to_numpy(steps))
    if array.ndim != 1 or array.size == 0 or not np.issubdtype(array.dtype, np.number):
        raise ValueError(
            "`steps` must be a positive integer or a non-empty 1-D array of "
            f"steps. Received: steps with shape {array.shape} and dtype "
            f"{array.dtype}"
        )
    return array


def _evaluate(schedule: Callable, steps: np.ndarray) -> np.ndarray:
    # One vectorized call when the schedule supports arrays, else per step.
    try:
        values = np.asarray(keras.ops.convert_to_numpy(schedule(steps)))
    except (TypeError, ValueError):
        values = None
    if values is None or values.shape != steps.shape:
        values = np.array(
            [
                float(keras.ops.convert_to_numpy(schedule(step)))
                for step in steps.tolist()
            ]
        )
    return values.astype(np.float64)


def _describe(schedule: Callable) -> str:
    # "TransformerSchedule(d_model=512, warmup_steps=4000, scale=1.0)".
    if inspect.isfunction(schedule) or inspect.ismethod(schedule):
        name = schedule.__name__
        return "Learning rate" if name == "<lambda>" else f"Learning rate: {name}"
    name = type(schedule).__name__
    get_config = getattr(schedule, "get_config", None)
    if get_config is None:
        return f"Learning rate: {name}"
    try:
        config = get_config()
    except NotImplementedError:
        return f"Learning rate: {name}"
    arguments = ", ".join(
        f"{key}={value!r}" for key, value in config.items() if key != "name"
    )
    return f"{name}({arguments})"
