"""Boxes, arrows and residual blocks: what `diagrams` draws its figures with.

One data unit is one inch (`fit` sizes the figure to the drawing), and the
data flow upward, as in the paper's figures.
"""

from typing import NamedTuple

from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch
from matplotlib.path import Path

FACES = {
    "embedding": "#f6cfcf",
    "attention": "#fbdcb4",
    "norm": "#f4eda2",
    "feed_forward": "#c9e3f6",
    "linear": "#dcd3f1",
    "softmax": "#cfead0",
    "dropout": "#e8e8e8",
    "plain": "#ffffff",
}
INK = "#333333"
STYLES = {
    "title": dict(fontsize=11, weight="bold", ha="center"),
    "text": dict(fontsize=9, ha="center"),
    "code": dict(fontsize=6.5, family="monospace", color="#505050", ha="center"),
    "note": dict(fontsize=7, ha="left", va="center", linespacing=1.4),
    "letter": dict(fontsize=6, va="center"),
}


class Box(NamedTuple):
    """A drawn box (or ⊕), by its centre and size."""

    x: float
    y: float
    width: float
    height: float

    @property
    def top(self):
        return self.y + self.height / 2

    @property
    def bottom(self):
        return self.y - self.height / 2

    def edge(self, side):
        return self.x + (-1 if side == "left" else 1) * self.width / 2


class Item(NamedTuple):
    """One element of a residual block; `kind` says how the stream enters it.

    `box`: from below; `attention`: split into V, K, Q; `cross`: as the query
    only (keys and values come from the memory); `add`: a box the residual
    enters from the side; `plus`: a ⊕ the residual enters from the side.
    """

    title: str
    code: str | None = None
    face: str = "plain"
    kind: str = "box"


def canvas():
    """A figure whose one axes fills it, without axis lines."""
    fig = Figure()
    ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))
    ax.set_axis_off()
    return fig, ax


def fit(fig, ax, width, height):
    """Sizes `fig` to the drawing, one data unit per inch."""
    fig.set_size_inches(width, height)
    ax.set_xlim(0.0, width)
    ax.set_ylim(0.0, height)
    return fig


def label(ax, x, y, text, style="text", **kwargs):
    return ax.text(x, y, text, **{**STYLES[style], **kwargs})


def box(ax, x, y, title, code=None, face="plain", width=2.4, height=None, shadows=0):
    """A rounded box centred at `(x, y)`, its code name(s) under the title.

    `shadows` copies are stacked behind it (the heads of an attention).
    """
    lines = [] if code is None else code.split("\n")
    height = height or 0.32 + 0.17 * len(lines)
    for i in range(shadows, -1, -1):
        corner = (x - width / 2 + 0.07 * i, y - height / 2 + 0.07 * i)
        ax.add_patch(
            FancyBboxPatch(
                corner,
                width,
                height,
                boxstyle="round,pad=0,rounding_size=0.07",
                facecolor=FACES[face],
                edgecolor=INK,
                linewidth=1.0,
                zorder=2 - 0.01 * i,
            )
        )
    top = y + (0.17 + 0.12 * len(lines)) / 2
    label(ax, x, top - 0.085, title, va="center", zorder=3)
    for i, line in enumerate(lines):
        label(ax, x, top - 0.23 - 0.12 * i, line, "code", va="center", zorder=3)
    return Box(x, y, width, height)


def frame(ax, x, bottom, width, top, face="#f3f3f3", edge="#9a9a9a"):
    """A shaded rounded rectangle behind a group of boxes."""
    ax.add_patch(
        FancyBboxPatch(
            (x - width / 2, bottom),
            width,
            top - bottom,
            boxstyle="round,pad=0,rounding_size=0.12",
            facecolor=face,
            edgecolor=edge,
            zorder=0.5,
        )
    )


def plus(ax, x, y, radius=0.14):
    """The ⊕ of a residual add or of the positional encoding."""
    ax.add_patch(Circle((x, y), radius, facecolor="white", edgecolor=INK, zorder=2))
    line(ax, [(x - 0.6 * radius, y), (x + 0.6 * radius, y)], zorder=3)
    line(ax, [(x, y - 0.6 * radius), (x, y + 0.6 * radius)], zorder=3)
    return Box(x, y, 2 * radius, 2 * radius)


def arrow(ax, points):
    """A polyline through `points` with an arrowhead at the last one."""
    ax.add_patch(
        FancyArrowPatch(
            path=Path(points),
            arrowstyle="-|>",
            mutation_scale=9,
            color=INK,
            linewidth=1.0,
            shrinkA=0,
            shrinkB=0,
            zorder=2.5,
        )
    )


def line(ax, points, zorder=2.5):
    xs, ys = zip(*points, strict=True)
    ax.plot(xs, ys, color=INK, linewidth=1.0, zorder=zorder, solid_capstyle="butt")


def dot(ax, x, y):
    ax.plot([x], [y], "o", color=INK, markersize=3, zorder=3)


def residual_block(ax, x, y, items, side, width):
    """One residual sublayer, drawn upward from the stream at `(x, y)`.

    The residual leaves the stream just above `y` and enters the `add` or
    `plus` item from `side`. Returns the block's top and the drawn boxes.
    """
    branch, cur, boxes = y + 0.14, y, []
    for item in items:
        if item.kind == "plus":
            drawn = plus(ax, x, cur + 0.42)
        else:
            gap = 0.55 if item.kind in ("attention", "cross") else 0.3
            height = 0.52 if item.code else 0.4
            middle = cur + gap + height / 2
            drawn = box(ax, x, middle, item.title, item.code, item.face, width, height)
        if item.kind == "attention":
            _split_qkv(ax, x, cur, drawn)
        elif item.kind == "cross":
            _query_only(ax, x, cur, drawn)
        else:
            arrow(ax, [(x, cur), (x, drawn.bottom)])
        boxes.append(drawn)
        cur = drawn.top
    add = next(
        b for b, i in zip(boxes, items, strict=True) if i.kind in ("add", "plus")
    )
    around = x + (-1 if side == "left" else 1) * (width / 2 + 0.18)
    dot(ax, x, branch)
    arrow(ax, [(x, branch), (around, branch), (around, add.y), (add.edge(side), add.y)])
    return cur, boxes


def memory_into(ax, attention, x_from, y_from):
    """The memory, from `(x_from, y_from)`, as the keys and values of a box."""
    level = attention.bottom - 0.16
    xv, xk = attention.x - 0.3 * attention.width, attention.x
    line(ax, [(x_from, y_from), (x_from, level), (xv, level)])
    arrow(ax, [(xv, level), (xk, level), (xk, attention.bottom)])
    arrow(ax, [(xv, level), (xv, attention.bottom)])
    dot(ax, xv, level)
    label(ax, xv + 0.04, level + 0.09, "V", "letter")
    label(ax, xk + 0.04, level + 0.09, "K", "letter")


def _split_qkv(ax, x, y, attention):
    # Self-attention: the stream splits into V, K and Q under the box.
    split = attention.bottom - 0.25
    line(ax, [(x, y), (x, split)])
    half = 0.3 * attention.width
    line(ax, [(x - half, split), (x + half, split)])
    for offset, letter in ((-half, "V"), (0.0, "K"), (half, "Q")):
        arrow(ax, [(x + offset, split), (x + offset, attention.bottom)])
        label(ax, x + offset + 0.04, split + 0.12, letter, "letter")


def _query_only(ax, x, y, attention):
    # Cross-attention: the stream is the query, entering on the right.
    turn, xq = attention.bottom - 0.34, x + 0.3 * attention.width
    arrow(ax, [(x, y), (x, turn), (xq, turn), (xq, attention.bottom)])
    label(ax, xq + 0.04, turn + 0.17, "Q", "letter")
