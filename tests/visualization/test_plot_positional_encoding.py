"""Tests for keras_transformer.visualization.plot_positional_encoding."""

import matplotlib
import numpy as np
import pytest
from matplotlib import pyplot as plt
from matplotlib.figure import Figure

from keras_transformer.layers import positional_encoding
from keras_transformer.visualization import plot_positional_encoding


def test_backend_is_headless():
    assert matplotlib.get_backend().lower() == "agg"


def test_axes_layout():
    fig = plot_positional_encoding(length=30, depth=16, dimensions=(2, 3))
    assert isinstance(fig, Figure)
    heat_ax, curve_ax, colorbar_ax = fig.axes
    assert len(heat_ax.images) == 1
    assert len(curve_ax.images) == 0 and len(curve_ax.get_lines()) == 2
    assert colorbar_ax.get_ylabel() == "PE(pos, dim)"
    assert heat_ax.get_xlabel().startswith("Depth")
    assert heat_ax.get_ylabel() == "Position"


def test_heatmap_is_the_table():
    fig = plot_positional_encoding(length=40, depth=12)
    image = fig.axes[0].images[0]
    np.testing.assert_array_equal(image.get_array(), positional_encoding(40, 12))
    assert image.get_clim() == (-1.0, 1.0)


def test_defaults_match_the_table():
    fig = plot_positional_encoding()
    image = fig.axes[0].images[0]
    np.testing.assert_array_equal(image.get_array(), positional_encoding(100, 128))
    assert len(fig.axes[1].get_lines()) == 4


@pytest.mark.parametrize("dimensions", [(0, 1), (4, 5, 6, 7), (15,)])
def test_curves_are_table_columns(dimensions):
    table = positional_encoding(25, 16)
    fig = plot_positional_encoding(25, 16, dimensions=dimensions)
    lines = fig.axes[1].get_lines()
    assert len(lines) == len(dimensions)
    for line, d in zip(lines, dimensions, strict=True):
        np.testing.assert_array_equal(line.get_xdata(), np.arange(25))
        np.testing.assert_array_equal(line.get_ydata(), table[:, d])
        kind = "sin" if d % 2 == 0 else "cos"
        assert line.get_label() == f"dim {d} ({kind})"


def test_no_dimensions_draws_no_curve():
    fig = plot_positional_encoding(10, 4, dimensions=())
    assert fig.axes[1].get_lines() == []
    assert fig.axes[1].get_legend() is None


def test_accepts_numpy_integers():
    fig = plot_positional_encoding(np.int64(8), np.int32(6), dimensions=[np.int64(5)])
    assert fig.axes[0].images[0].get_array().shape == (8, 6)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(length=0), "length"),
        (dict(depth=0), "depth"),
        (dict(length=2.5), "length"),
        (dict(depth=8, dimensions=(3, 8)), r"dimensions.*depth=8.*\[8\]"),
        (dict(depth=8, dimensions=(-1,)), "dimensions"),
    ],
)
def test_invalid_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        plot_positional_encoding(**kwargs)


def test_no_window_opens():
    plt.close("all")
    fig = plot_positional_encoding(10, 8)
    assert fig.canvas.manager is None
    assert plt.get_fignums() == []
