"""Plots of the sinusoidal positional encoding, section 3.5 of the paper."""

import operator
from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from keras_transformer.layers.positional_encoding import positional_encoding
from keras_transformer.validation import check_positive_int


def plot_positional_encoding(
    length: int = 100,
    depth: int = 128,
    dimensions: Sequence[int] = (4, 5, 6, 7),
) -> Figure:
    """Draws the positional-encoding table and a few of its sinusoids.

    The figure has two panels, from top to bottom:

    1. a heatmap of `positional_encoding(length, depth)`, position on the
       y axis (0 at the top) and depth on the x axis, with a colorbar;
    2. the columns `dimensions` of the same table as curves against position:
       even dimensions are sines, odd ones cosines, and the wavelength grows
       with the dimension.

    `fig.axes` is `[heatmap, curves, colorbar]`. The figure is built with
    matplotlib's object API: no pyplot window or global state is involved.

    Args:
        length: number of positions, at least 1.
        depth: model dimension `d_model`, at least 1.
        dimensions: columns of the table to draw as curves, each in
            `[0, depth)`; may be empty.

    Returns:
        A `matplotlib.figure.Figure`.

    Example:

    >>> fig = plot_positional_encoding(50, 16, dimensions=(0, 1))
    >>> len(fig.axes)  # heatmap, curves, colorbar
    3
    >>> fig.axes[0].images[0].get_array().shape
    (50, 16)
    >>> [line.get_label() for line in fig.axes[1].get_lines()]
    ['dim 0 (sin)', 'dim 1 (cos)']

    References:
        Vaswani et al. 2017, "Attention Is All You Need", section 3.5.
    """
    length = _as_int("length", length)
    depth = _as_int("depth", depth)
    check_positive_int("length", length)
    check_positive_int("depth", depth)
    dimensions = [_as_int("dimensions", d) for d in dimensions]
    bad = [d for d in dimensions if not 0 <= d < depth]
    if bad:
        raise ValueError(
            f"`dimensions` must lie in [0, depth). Received: dimensions="
            f"{dimensions} with depth={depth}; out of range: {bad}"
        )
    table = positional_encoding(length, depth)  # (length, depth)

    fig = Figure(figsize=(8.0, 7.0), layout="constrained")
    heat_ax, curve_ax = fig.subplots(2, 1, height_ratios=(3, 2))

    image = heat_ax.imshow(
        table,
        aspect="auto",
        cmap="RdBu_r",
        vmin=-1.0,
        vmax=1.0,
        interpolation="nearest",
    )
    heat_ax.set_title(f"Positional encoding, length={length}, depth={depth}")
    heat_ax.set_xlabel("Depth (dimension)")
    heat_ax.set_ylabel("Position")
    fig.colorbar(image, ax=heat_ax, label="PE(pos, dim)")

    positions = np.arange(length)
    for d in dimensions:
        kind = "sin" if d % 2 == 0 else "cos"
        curve_ax.plot(positions, table[:, d], label=f"dim {d} ({kind})")
    curve_ax.set_xlim(0, max(length - 1, 1))
    curve_ax.set_ylim(-1.1, 1.1)
    curve_ax.set_xlabel("Position")
    curve_ax.set_ylabel("PE(pos, dim)")
    curve_ax.grid(alpha=0.3)
    if dimensions:
        # Above the axes, in rows of four: the curves fill the [-1, 1] band.
        curve_ax.legend(
            loc="lower center",
            bbox_to_anchor=(0.5, 1.0),
            ncols=min(len(dimensions), 4),
            frameon=False,
        )
    return fig


def _as_int(name: str, value) -> int:
    # Accepts Python and NumPy integers; rejects floats and bools.
    if isinstance(value, bool):
        raise ValueError(f"`{name}` must be an integer. Received: {name}={value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise ValueError(
            f"`{name}` must be an integer. Received: {name}={value!r}"
        ) from None
