"""Tests for keras_transformer.visualization.plot_learning_rate."""

import math

import matplotlib
import numpy as np
import pytest
import tensorflow as tf
from matplotlib import pyplot as plt
from matplotlib.figure import Figure

from keras_transformer.schedules import TransformerSchedule
from keras_transformer.visualization import plot_learning_rate


def paper_rate(step, d_model=64, warmup_steps=100):
    # Equation (3) of the paper, NumPy reference.
    step = np.asarray(step, dtype=np.float64)
    return d_model**-0.5 * np.minimum(step**-0.5, step * warmup_steps**-1.5)


def test_backend_is_headless():
    assert matplotlib.get_backend().lower() == "agg"


def test_line_is_the_schedule():
    fig = plot_learning_rate(paper_rate, steps=500, warmup_steps=100)
    assert isinstance(fig, Figure)
    (ax,) = fig.axes
    rate_line, warmup_line = ax.get_lines()
    np.testing.assert_array_equal(rate_line.get_xdata(), np.arange(1, 501))
    np.testing.assert_allclose(rate_line.get_ydata(), paper_rate(np.arange(1, 501)))
    assert ax.get_xlabel() == "Training step"
    assert ax.get_ylabel() == "Learning rate"


def test_warmup_line():
    fig = plot_learning_rate(paper_rate, steps=500, warmup_steps=100)
    warmup_line = fig.axes[0].get_lines()[1]
    np.testing.assert_array_equal(warmup_line.get_xdata(), [100, 100])
    assert warmup_line.get_label() == "end of warm-up (step 100)"
    legend = fig.axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == [
        "learning rate",
        "end of warm-up (step 100)",
    ]


def test_no_warmup_line_without_warmup_steps():
    fig = plot_learning_rate(lambda step: 0.001 * np.ones_like(step), steps=10)
    assert len(fig.axes[0].get_lines()) == 1
    assert fig.axes[0].get_legend() is None


def test_explicit_steps_array():
    steps = np.array([1, 10, 100, 1000])
    fig = plot_learning_rate(paper_rate, steps=steps)
    line = fig.axes[0].get_lines()[0]
    np.testing.assert_array_equal(line.get_xdata(), steps)
    np.testing.assert_allclose(line.get_ydata(), paper_rate(steps))


def test_scalar_only_callable():
    # math.sqrt fails on arrays: evaluated step by step instead.
    def rate(step):
        return min(1 / math.sqrt(step), step / 10**1.5)

    fig = plot_learning_rate(rate, steps=30, warmup_steps=10)
    line = fig.axes[0].get_lines()[0]
    np.testing.assert_allclose(line.get_ydata(), [rate(s) for s in range(1, 31)])


def test_tensor_valued_callable():
    fig = plot_learning_rate(lambda step: tf.cast(step, tf.float32) * 1e-3, steps=5)
    line = fig.axes[0].get_lines()[0]
    np.testing.assert_allclose(line.get_ydata(), np.arange(1, 6) * 1e-3, rtol=1e-6)


def test_transformer_schedule():
    schedule = TransformerSchedule(d_model=64, warmup_steps=100)
    # warmup_steps is read from the schedule.
    fig = plot_learning_rate(schedule, steps=400)
    ax = fig.axes[0]
    rate_line, warmup_line = ax.get_lines()
    expected = [float(schedule(step)) for step in (1, 50, 100, 101, 400)]
    np.testing.assert_allclose(
        rate_line.get_ydata()[[0, 49, 99, 100, 399]], expected, rtol=1e-6
    )
    np.testing.assert_allclose(
        rate_line.get_ydata(), paper_rate(np.arange(1, 401)), rtol=1e-5
    )
    np.testing.assert_array_equal(warmup_line.get_xdata(), [100, 100])
    assert ax.get_title().startswith("TransformerSchedule(d_model=64")


def test_explicit_warmup_overrides_the_schedule():
    schedule = TransformerSchedule(d_model=64, warmup_steps=100)
    fig = plot_learning_rate(schedule, steps=300, warmup_steps=250)
    np.testing.assert_array_equal(fig.axes[0].get_lines()[1].get_xdata(), [250, 250])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(schedule=0.001), "callable"),
        (dict(steps=0), "steps"),
        (dict(steps=np.zeros((2, 2))), "steps"),
        (dict(steps=[]), "steps"),
        (dict(warmup_steps="4000"), "warmup_steps"),
    ],
)
def test_invalid_arguments(kwargs, match):
    kwargs = {"schedule": paper_rate, **kwargs}
    with pytest.raises(ValueError, match=match):
        plot_learning_rate(**kwargs)


def test_no_window_opens():
    plt.close("all")
    fig = plot_learning_rate(paper_rate, steps=50, warmup_steps=10)
    assert fig.canvas.manager is None
    assert plt.get_fignums() == []
