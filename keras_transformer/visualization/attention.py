"""Plots of attention weights, one heatmap per head."""

import math
from collections.abc import Sequence

import keras
import numpy as np
from matplotlib.figure import Figure

from keras_transformer.validation import check_positive_int

# Sizes in inches: one heatmap cell, the smallest heatmap side, one character
# of a 10 pt tick label.
_CELL = 0.22
_MIN_PANEL = 1.6
_CHAR = 0.085


def plot_attention_heads(
    weights,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str],
    title: str | None = None,
    max_cols: int = 4,
) -> Figure:
    """Draws the attention weights of one layer, one heatmap per head.

    Works for every attention kind of the model: encoder self-attention
    (queries and keys are source tokens), decoder self-attention (target
    tokens, lower triangular) and cross-attention (target queries, source
    keys). Take one layer and one example from the scores returned by
    `Transformer(..., return_attention_scores=True)`, e.g.
    `scores["decoder_cross"][layer][example]`.

    Layout: heads fill a grid of at most `max_cols` columns, row by row; grid
    cells left over in the last row are removed, so `fig.axes` holds exactly
    `H` heatmap axes (`fig.axes[i]` shows `weights[i]`, titled `"head i"`),
    followed by one colorbar shared by all heads (same color scale: from
    `min(0, weights.min())` to `weights.max()`). Keys are on the x axis (labels
    rotated), queries on the y axis, first query at the top. The figure is
    built with matplotlib's object API: no pyplot window or global state.

    Args:
        weights: attention weights of one layer, `(H, T, S)`; a batch of one
            `(1, H, T, S)` or a single head `(T, S)` is accepted too. A NumPy
            array, a tensor or nested lists.
        query_tokens: `T` labels of the query positions (rows); `bytes`
            are decoded as UTF-8.
        key_tokens: `S` labels of the key positions (columns).
        title: optional title above the whole grid.
        max_cols: largest number of heads per row.

    Returns:
        A `matplotlib.figure.Figure`.

    Raises:
        ValueError: if `weights` does not have one of the shapes above, or
            the numbers of tokens differ from `T` or `S`.

    Example:

    >>> import numpy as np
    >>> weights = np.full((2, 3, 4), 0.25)  # (H, T, S)
    >>> fig = plot_attention_heads(
    ...     weights, ["▁Ein", "▁Mann", "</s>"], ["▁A", "▁man", "▁walks", "</s>"]
    ... )
    >>> len(fig.axes)  # two heads, then the colorbar
    3
    >>> fig.axes[1].get_title()
    'head 1'
    >>> [label.get_text() for label in fig.axes[0].get_xticklabels()]
    ['▁A', '▁man', '▁walks', '</s>']
    """
    check_positive_int("max_cols", max_cols)
    weights = _as_heads(weights)
    num_heads, query_len, key_len = weights.shape
    query_tokens = [_as_label(token) for token in query_tokens]
    key_tokens = [_as_label(token) for token in key_tokens]
    mismatches = []
    if len(query_tokens) != query_len:
        mismatches.append(
            f"len(query_tokens)={len(query_tokens)} but weights have "
            f"T={query_len} query positions"
        )
    if len(key_tokens) != key_len:
        mismatches.append(
            f"len(key_tokens)={len(key_tokens)} but weights have "
            f"S={key_len} key positions"
        )
    if mismatches:
        raise ValueError(
            "The tokens must match the (H, T, S) weights: "
            + "; ".join(mismatches)
            + f". Received: weights.shape={weights.shape}"
        )

    cols = min(num_heads, max_cols)
    rows = math.ceil(num_heads / cols)
    fig = Figure(
        figsize=_figure_size(rows, cols, query_tokens, key_tokens, bool(title)),
        layout="constrained",
    )
    grid = fig.subplots(rows, cols, squeeze=False)
    axes = list(grid.flat)
    for ax in axes[num_heads:]:
        ax.remove()
    axes = axes[:num_heads]

    vmin = min(0.0, float(weights.min()))
    vmax = float(weights.max())
    if vmax <= vmin:
        vmax = vmin + 1.0
    for head, ax in enumerate(axes):
        image = ax.imshow(
            weights[head],
            cmap="viridis",
            vmin=vmin,
            vmax=vmax,
            aspect="equal",
            interpolation="nearest",
        )
        ax.set_title(f"head {head}")
        ax.set_xticks(range(key_len), labels=key_tokens, rotation=90)
        ax.set_yticks(range(query_len), labels=query_tokens)
        ax.tick_params(length=0)
    fig.colorbar(image, ax=axes, label="attention weight", shrink=0.8)
    fig.supxlabel("key")
    fig.supylabel("query")
    if title:
        fig.suptitle(title)
    return fig


def _as_heads(weights) -> np.ndarray:
    # Any tensor or array-like -> float NumPy (H, T, S).
    array = np.asarray(keras.ops.convert_to_numpy(weights))
    if array.ndim == 4 and array.shape[0] == 1:
        array = array[0]
    elif array.ndim == 2:
        array = array[None]
    if array.ndim != 3 or 0 in array.shape:
        raise ValueError(
            "`weights` must be the attention of one layer and one example, "
            "shaped (num_heads, query_len, key_len), (1, num_heads, query_len, "
            "key_len) or (query_len, key_len); for a batch, pick one example "
            f"with weights[i]. Received: weights.shape={array.shape}"
        )
    if not np.issubdtype(array.dtype, np.number) or np.issubdtype(
        array.dtype, np.complexfloating
    ):
        raise ValueError(
            f"`weights` must be real numbers. Received: dtype={array.dtype}"
        )
    return array.astype(np.float64, copy=False)


def _figure_size(
    rows: int, cols: int, query_tokens: list, key_tokens: list, titled: bool
) -> tuple[float, float]:
    # Square cells; room for the query labels left of each heatmap, the rotated
    # key labels below it and its title; then the colorbar and axis labels.
    panel_w = max(_MIN_PANEL, _CELL * len(key_tokens))
    panel_h = max(_MIN_PANEL, _CELL * len(query_tokens))
    labels_w = _CHAR * max(map(len, query_tokens), default=1) + 0.25
    labels_h = _CHAR * max(map(len, key_tokens), default=1) + 0.25
    width = cols * (panel_w + labels_w + 0.15) + 1.3
    height = rows * (panel_h + labels_h + 0.35) + 0.35 + (0.4 if titled else 0.0)
    return width, height


def _as_label(token) -> str:
    if isinstance(token, bytes):
        return token.decode("utf-8", errors="replace")
    return str(token)
