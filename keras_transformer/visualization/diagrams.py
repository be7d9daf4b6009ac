"""Diagrams of the architecture: Figures 1 and 2 of the paper, layers, masks.

Drawn with matplotlib (`visualization/drawing.py`) and labelled with the
library's own names (`EncoderLayer.self_attention`,
`MultiHeadAttention.query_dense`, ...), so that every box can be found in the
code; the masks are computed by `keras_transformer.layers.masking`.
`python -m keras_transformer.visualization.diagrams DIR` writes them all as
SVG files into `DIR` (the docs keep them in `docs/img`).
"""

import argparse
import operator
from pathlib import Path

import matplotlib
import numpy as np
from keras import ops
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from keras_transformer.layers.masking import causal_mask, merge_masks, padding_mask
from keras_transformer.visualization import drawing as draw
from keras_transformer.visualization.drawing import Item

_SOURCE_PADDING = "mask: source padding (keys)"
_CAUSAL = "mask: causal ∧ target padding"
_CROSS = "queries: x; keys, values: memory\n" + _SOURCE_PADDING
# (title, attribute, how the stream enters, note): the sublayers of each layer.
_SUBLAYERS = {
    "encoder": [
        ("Multi-Head Attention", "self_attention", "attention", _SOURCE_PADDING),
    ],
    "decoder": [
        ("Masked Multi-Head Attention", "self_attention", "attention", _CAUSAL),
        ("Multi-Head Attention", "cross_attention", "cross", _CROSS),
    ],
}
_FEED_FORWARD = ("Feed Forward", "feed_forward", "box", "max(0, x W1 + b1) W2 + b2")
# What goes into each stack: the ids, the embedding, its code name.
_INPUTS = {
    "encoder": ("Inputs (source_ids)", "Input Embedding", "(SharedEmbedding)"),
    "decoder": ("Outputs, shifted right (target_in)", "Output Embedding", "(the same)"),
}
_MASK_TITLES = (
    "Encoder self-attention\nEncoderLayer.self_attention\n" + _SOURCE_PADDING,
    "Masked decoder self-attention\nDecoderLayer.self_attention\n" + _CAUSAL,
    "Encoder-decoder attention\nDecoderLayer.cross_attention\n" + _SOURCE_PADDING,
)
_ALLOWED, _MASKED = "#7fc4a4", "#4a4a4a"


def plot_transformer_diagram(
    norm_first: bool = False, num_layers: int | None = None
) -> Figure:
    """Draws the whole model, Figure 1 of the paper, in the library's names.

    Encoder on the left, decoder on the right, data flowing upward: the
    shared embedding, the positional encoding (⊕) and the embedding dropout,
    `N` layers of residual sublayers (each residual connection an arrow
    around its sublayer), the memory arrow from the encoder's output to the
    keys and values of the decoder's encoder-decoder attention, the output
    projection tied to the embedding, and the softmax. Each box carries, in
    small type, the attribute that computes it.

    Args:
        norm_first: draw the pre-LN variant (the layers' `norm_first=True`):
            LayerNorm before each sublayer, a plain residual add after it,
            and a final LayerNorm after each stack. Default: the paper's
            post-LN "Add & Norm".
        num_layers: written as "6×" beside the stacks; default "N×".

    Returns:
        A `matplotlib.figure.Figure` with one axes of boxes, arrows and text.

    Example:

    >>> fig = plot_transformer_diagram()
    >>> labels = {text.get_text() for text in fig.axes[0].texts}
    >>> {"Masked Multi-Head Attention", "DecoderLayer.cross_attention"} <= labels
    True

    References:
        Vaswani et al. 2017, "Attention Is All You Need", Figure 1.
    """
    _check_bool("norm_first", norm_first)
    repeat = "N×" if num_layers is None else f"{_count('num_layers', num_layers)}×"
    fig, ax = draw.canvas()
    xe, xd, width, between = 2.8, 6.6, 2.4, 4.7
    encoder_out = _stack(ax, xe, width, "encoder", norm_first, repeat)
    # Encoder output -> up, across, down beside the decoder: the memory.
    memory_y = encoder_out + 0.45
    draw.line(ax, [(xe, encoder_out), (xe, memory_y), (between, memory_y)])
    draw.label(ax, 3.75, memory_y + 0.1, "memory (B, S, D)", fontsize=8)
    memory = (between, memory_y)
    out = _stack(ax, xd, width, "decoder", norm_first, repeat, memory)
    linear_code = "Transformer.embedding(x, reverse=True)"
    linear = draw.box(ax, xd, out + 0.6, "Linear", linear_code, "linear", width)
    draw.arrow(ax, [(xd, out), (xd, linear.bottom)])
    tied = "tied: the shared embedding's\nmatrix U, logits = x Uᵀ"
    draw.label(ax, linear.edge("left") - 0.15, linear.y, tied, "note", ha="right")
    softmax_code = "log_softmax in loss and search"
    y = linear.top + 0.55
    softmax = draw.box(ax, xd, y, "Softmax", softmax_code, "softmax", width)
    draw.arrow(ax, [(xd, linear.top), (xd, softmax.bottom)])
    draw.arrow(ax, [(xd, softmax.top), (xd, softmax.top + 0.35)])
    draw.label(ax, xd, softmax.top + 0.5, "Output Probabilities")
    height = softmax.top + 1.35
    variant = "pre-LN (norm_first=True)" if norm_first else "post-LN, as in the paper"
    title = f"The Transformer (Figure 1 of Vaswani et al. 2017), {variant}"
    draw.label(ax, 4.8, height - 0.35, title, "title")
    code = "keras_transformer.models.Transformer"
    draw.label(ax, 4.8, height - 0.62, code, "code")
    rule = (
        "Pre-LN sublayer: x + Dropout(Sublayer(LayerNorm(x))), a final LayerNorm "
        "after each stack"
        if norm_first
        else "Add & Norm: LayerNorm(x + Dropout(Sublayer(x)))"
    )
    rule += "; Dropout: <Layer>.residual_dropout"
    draw.label(ax, 4.8, 0.25, rule, fontsize=7.5)
    return draw.fit(fig, ax, 9.6, height)


def plot_sublayer_diagram(kind: str = "encoder", norm_first: bool = False) -> Figure:
    """Draws one `EncoderLayer` or `DecoderLayer` as the library computes it.

    Every residual sublayer is drawn in full, in a shaded block, beside the
    `TransformerLayer` method that runs it and the mask its attention uses.
    Post-LN: `x -> Sublayer -> Dropout -> ⊕ x -> LayerNorm`, that is
    `LayerNorm(x + Dropout(Sublayer(x)))`; pre-LN (`norm_first=True`):
    `x -> LayerNorm -> Sublayer -> Dropout -> ⊕ x`, that is
    `x + Dropout(Sublayer(LayerNorm(x)))`. The decoder's cross-attention
    takes its keys and values from the encoder's memory.

    Args:
        kind: `"encoder"` or `"decoder"`.
        norm_first: pre-LN instead of the paper's post-LN.

    Returns:
        A `matplotlib.figure.Figure` with one axes.

    Example:

    >>> fig = plot_sublayer_diagram("decoder", norm_first=True)
    >>> labels = [text.get_text() for text in fig.axes[0].texts]
    >>> labels.count("LayerNorm"), "DecoderLayer.cross_attention_norm" in labels
    (3, True)
    """
    if kind not in _SUBLAYERS:
        raise ValueError(f'`kind` must be "encoder" or "decoder". Received: {kind!r}')
    _check_bool("norm_first", norm_first)
    layer = f"{kind.capitalize()}Layer"
    length = "S" if kind == "encoder" else "T"
    fig, ax = draw.canvas()
    x, width = 2.4, 2.6
    draw.label(ax, x, 0.35, f"x  (B, {length}, D)")
    cur = 0.55
    for title, name, entry, note in [*_SUBLAYERS[kind], _FEED_FORWARD]:
        face = "feed_forward" if name == "feed_forward" else "attention"
        sublayer = Item(title, f"{layer}.{name}", face, entry)
        norm = Item("LayerNorm", f"{layer}.{name}_norm", "norm")
        dropout = Item("Dropout", f"{layer}.residual_dropout", "dropout")
        add = Item("+", kind="plus")
        order = [sublayer, dropout, add, norm]
        if norm_first:
            order = [norm, sublayer, dropout, add]
        start = cur
        cur, boxes = draw.residual_block(ax, x, cur, order, "right", width)
        draw.frame(ax, x + 0.075, start + 0.08, width + 0.75, cur + 0.04, edge="none")
        method = "attention" if face == "attention" else "feed_forward"
        note = f"TransformerLayer.{method}_sublayer\n{note}"
        draw.label(ax, x + width / 2 + 0.6, (start + cur) / 2, note, "note")
        if entry == "cross":
            draw.label(ax, 0.35, 0.35, "memory (B, S, D)", ha="left", fontsize=8)
            draw.memory_into(ax, boxes[order.index(sublayer)], 0.35, 0.55)
    draw.arrow(ax, [(x, cur), (x, cur + 0.3)])
    draw.label(ax, x, cur + 0.45, f"output  (B, {length}, D)")
    height = cur + 1.45
    variant = "pre-LN, norm_first=True" if norm_first else "post-LN, norm_first=False"
    rule = "LayerNorm(x + Dropout(Sublayer(x)))"
    if norm_first:
        rule = "x + Dropout(Sublayer(LayerNorm(x)))"
    draw.label(ax, 0.2, height - 0.35, f"{layer} ({variant})", "title", ha="left")
    rule = f"each sublayer: x ← {rule}"
    draw.label(ax, 0.2, height - 0.65, rule, fontsize=8.5, ha="left")
    return draw.fit(fig, ax, 6.4, height)


def plot_attention_masks(
    source_length: int = 5,
    target_length: int = 4,
    source_padding: int = 1,
    target_padding: int = 1,
) -> Figure:
    """Draws the masks of the three attentions for one padded sentence pair.

    The masks are built by `keras_transformer.layers.masking` as the model
    builds them (`True` = may attend):
    `merge_masks(key_mask=padding_mask(source_ids))` for the encoder's
    self-attention and for the encoder-decoder attention, and
    `merge_masks(key_mask=padding_mask(target_ids), attention_mask=causal_mask(T))`
    for the decoder's masked self-attention. Queries are rows, keys columns.
    Rows of padded queries are not masked: their outputs are ignored.

    `fig.axes[:3]` are the encoder self-attention `(S, S)`, decoder
    self-attention `(T, T)` and encoder-decoder attention `(T, S)` panels,
    each with one image, the mask as 0/1; `fig.legends[0]` tells the colors.

    Args:
        source_length: `S`, source positions, at least 1.
        target_length: `T`, target positions, at least 1.
        source_padding: padding ids at the end of the source, fewer than `S`.
        target_padding: padding ids at the end of the target, fewer than `T`.

    Returns:
        A `matplotlib.figure.Figure`.

    Example:

    >>> fig = plot_attention_masks(source_length=3, target_length=2)
    >>> fig.axes[1].images[0].get_array().tolist()  # causal, last key padded
    [[1, 0], [1, 0]]
    """
    lengths = {
        "source": _count("source_length", source_length),
        "target": _count("target_length", target_length),
    }
    paddings = {
        "source": _padding("source_padding", source_padding, lengths["source"]),
        "target": _padding("target_padding", target_padding, lengths["target"]),
    }
    source_mask, target_mask = (
        padding_mask(_padded_ids(lengths[side], paddings[side]))
        for side in ("source", "target")
    )
    causal = causal_mask(lengths["target"])
    source_keys = merge_masks(key_mask=source_mask)
    decoder_self = merge_masks(key_mask=target_mask, attention_mask=causal)
    # (queries, keys, mask) of each attention, as the layers build them.
    panels = [
        ("source", "source", source_keys),
        ("target", "target", decoder_self),
        ("target", "source", source_keys),
    ]
    tokens = {
        side: [f"{side[0]}{i + 1}" for i in range(lengths[side] - paddings[side])]
        + ["pad"] * paddings[side]
        for side in ("source", "target")
    }
    fig = Figure(figsize=(10.0, 4.8), layout="constrained")
    ratios = (lengths["source"], lengths["target"], lengths["source"])
    axes = fig.subplots(1, 3, width_ratios=ratios)
    colors = ListedColormap([_MASKED, _ALLOWED])
    for ax, title, (queries, keys, mask) in zip(
        axes, _MASK_TITLES, panels, strict=True
    ):
        shape = (lengths[queries], lengths[keys])
        # (1, T or 1, S) -> (T, S): a padding mask is the same for every query.
        mask = np.broadcast_to(ops.convert_to_numpy(mask)[0], shape).astype(int)
        ax.imshow(mask, cmap=colors, vmin=0, vmax=1)
        ax.set_xticks(range(shape[1]), tokens[keys])
        ax.set_yticks(range(shape[0]), tokens[queries])
        ax.set_xticks(np.arange(shape[1] + 1) - 0.5, minor=True)
        ax.set_yticks(np.arange(shape[0] + 1) - 0.5, minor=True)
        ax.grid(which="minor", color="white", linewidth=2)
        ax.tick_params(which="minor", length=0)
        ax.set_xlabel(f"keys ({keys})")
        ax.set_ylabel(f"queries ({queries})")
        ax.set_title(title, fontsize=9)
    fig.suptitle(
        "Attention masks from keras_transformer.layers.masking (True = may attend)"
        f"\nsource of {lengths['source']} positions ({paddings['source']} padded), "
        f"target of {lengths['target']} ({paddings['target']} padded); rows of "
        "padded queries are not masked: their outputs are ignored",
        fontsize=10,
    )
    legend = [
        Patch(color=_ALLOWED, label="may attend (True)"),
        Patch(color=_MASKED, label="masked (False)"),
    ]
    fig.legend(handles=legend, loc="outside lower center", ncols=2, frameon=False)
    return fig


def plot_multi_head_diagram(
    num_heads: int = 8, d_model: int = 512, key_dim: int | None = None
) -> Figure:
    """Draws multi-head attention, Figure 2 of the paper, with its shapes.

    Left: scaled dot-product attention, `softmax(Q Kᵀ / √d_k) V`, with the
    optional mask. Right: `MultiHeadAttention`. Its `query_dense`,
    `key_dense` and `value_dense` `EinsumDense` sublayers project all heads
    at once, `(B, T, D) -> (B, T, h, d_k)` (the stacked boxes are the `h`
    heads), the heads attend in parallel, and `output_dense` (Keras's
    `attention_output`) concatenates them and projects back,
    `(B, T, h, d_v) -> (B, T, D)`.

    Args:
        num_heads: `h`, at least 1.
        d_model: `D`, at least 1.
        key_dim: `d_k = d_v`; default `d_model // num_heads`, which must
            then divide exactly.

    Returns:
        A `matplotlib.figure.Figure` with one axes.

    Example:

    >>> fig = plot_multi_head_diagram(num_heads=4, d_model=64)
    >>> any("d_k = d_v = 16" in t.get_text() for t in fig.axes[0].texts)
    True

    References:
        Vaswani et al. 2017, "Attention Is All You Need", section 3.2, Figure 2.
    """
    num_heads = _count("num_heads", num_heads)
    d_model = _count("d_model", d_model)
    if key_dim is None:
        if d_model % num_heads:
            raise ValueError(
                "d_model must be divisible by num_heads. "
                f"Received: d_model={d_model}, num_heads={num_heads}"
            )
        key_dim = d_model // num_heads
    key_dim = _count("key_dim", key_dim)
    fig, ax = draw.canvas()
    _scaled_dot_product_panel(ax, 1.7)
    x, shadows = 6.8, min(num_heads, 6) - 1
    sources = "Q: the layer's input x;  K = V: x (self-attention) or the memory "
    draw.label(ax, x, 0.3, sources + "(encoder-decoder attention)", fontsize=7)
    heads = None
    for xi, name, letter, length in (
        (5.0, "value", "V", "S"),
        (6.8, "key", "K", "S"),
        (8.6, "query", "Q", "T"),
    ):
        size = "d_v" if letter == "V" else "d_k"
        draw.label(ax, xi, 0.65, f"{letter}  (B, {length}, D)")
        code = f"{name}_dense ('{name}')\n(B,{length},D)→(B,{length},h,{size})"
        projection = draw.box(
            ax, xi, 1.55, "Linear", code, "linear", 1.6, None, shadows
        )
        draw.arrow(ax, [(xi, 0.8), (xi, projection.bottom)])
        if heads is None:
            code = "each head: weights (B, h, T, S), output (B, h, T, d_v)"
            title = "Scaled Dot-Product Attention"
            heads = draw.box(ax, x, 3.05, title, code, "attention", 5.0, None, shadows)
        draw.arrow(ax, [(xi, projection.top), (xi, heads.bottom)])
    back = 0.07 * shadows  # the last head's box, behind the first
    corner = (heads.edge("right") + back + 0.1, heads.top + back)
    draw.label(ax, *corner, f"h = {num_heads}", ha="left", va="top")
    code = "(B, T, h, d_v) ≡ (B, T, h·d_v)"
    concat = draw.box(ax, x, 4.15, "Concat", code, width=2.8)
    draw.arrow(ax, [(x, heads.top + back), (x, concat.bottom)])
    code = "output_dense ('attention_output')\n(B, T, h, d_v) → (B, T, D)"
    output = draw.box(ax, x, 5.15, "Linear", code, "linear", 2.8)
    draw.arrow(ax, [(x, concat.top), (x, output.bottom)])
    draw.arrow(ax, [(x, output.top), (x, output.top + 0.3)])
    draw.label(ax, x, output.top + 0.42, "MultiHead(Q, K, V)  (B, T, D)")
    draw.label(ax, x, 6.55, "Multi-Head Attention", "title")
    draw.label(ax, x, 6.3, "keras_transformer.layers.MultiHeadAttention", "code")
    sizes = f"h = {num_heads} heads, D = d_model = {d_model}, d_k = d_v = {key_dim}"
    draw.label(ax, 5.3, 6.95, f"{sizes}   (Figure 2 of Vaswani et al. 2017)")
    return draw.fit(fig, ax, 10.6, 7.25)


def main(argv=None):
    """Writes every diagram as an SVG file into a folder (the docs' images)."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("out_dir", type=Path, help="folder to write, e.g. docs/img")
    out_dir = parser.parse_args(argv).out_dir
    figures = {
        "transformer": plot_transformer_diagram(),
        "transformer_pre_ln": plot_transformer_diagram(norm_first=True),
        "encoder_layer": plot_sublayer_diagram("encoder"),
        "encoder_layer_pre_ln": plot_sublayer_diagram("encoder", norm_first=True),
        "decoder_layer": plot_sublayer_diagram("decoder"),
        "attention_masks": plot_attention_masks(),
        "multi_head_attention": plot_multi_head_diagram(),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    # Text as text (small, searchable files); fixed ids, no date and no
    # matplotlib version, so an unchanged diagram is an unchanged file.
    style = {"svg.fonttype": "none", "svg.hashsalt": "keras_transformer"}
    with matplotlib.rc_context(style):
        for name, fig in figures.items():
            path = out_dir / f"{name}.svg"
            fig.savefig(path, metadata={"Date": None, "Creator": None})


def _stack(ax, x, width, kind, norm_first, repeat, memory=None):
    """Embedding, ⊕ positions, dropout and the N layers; returns the output y."""
    stack, layer = kind.capitalize(), f"{kind.capitalize()}Layer"
    side = "left" if kind == "encoder" else "right"  # residuals and labels
    sign = -1 if side == "left" else 1
    inputs, title, which = _INPUTS[kind]
    draw.label(ax, x, 0.7, inputs, fontsize=8.5)
    code = f"Transformer.embedding {which}"
    embedding = draw.box(ax, x, 1.35, title, code, "embedding", width)
    draw.arrow(ax, [(x, 0.85), (x, embedding.bottom)])
    add = draw.plus(ax, x, embedding.top + 0.35)
    draw.arrow(ax, [(x, embedding.top), (x, add.bottom)])
    title, code = "Positional Encoding", f"{stack}.positional_encoding"
    positions = draw.box(ax, x + sign * 1.6, add.y, title, code, width=1.75)
    inner = positions.edge("right" if side == "left" else "left")
    draw.arrow(ax, [(inner, add.y), (add.edge(side), add.y)])
    code = f"{stack}.embedding_dropout"
    dropout = draw.box(ax, x, add.top + 0.5, "Dropout", code, "dropout", width)
    draw.arrow(ax, [(x, add.top), (x, dropout.bottom)])
    sublayers = [(t, n, e) for t, n, e, _ in [*_SUBLAYERS[kind], _FEED_FORWARD]]
    bottom = cur = dropout.top
    for title, name, entry in sublayers:
        face = "feed_forward" if name == "feed_forward" else "attention"
        sublayer = Item(title, f"{layer}.{name}", face, entry)
        code = f"{layer}.{name}_norm"
        order = [Item("Layer Norm", code, "norm"), sublayer, Item("+", kind="plus")]
        if not norm_first:
            order = [sublayer, Item("Add & Norm", code, "norm", "add")]
        cur, boxes = draw.residual_block(ax, x, cur, order, side, width)
        if entry == "cross":
            draw.memory_into(ax, boxes[order.index(sublayer)], *memory)
    top = cur + 0.14
    draw.frame(ax, x, bottom + 0.06, width + 0.72, top)
    # Beside the frame: N×, and which attribute holds the stack.
    label_x, align = x + sign * (width / 2 + 0.5), "right" if side == "left" else "left"
    middle = (bottom + top) / 2
    draw.label(ax, label_x, middle, repeat, ha=align, va="center", fontsize=13)
    draw.label(ax, label_x, middle - 0.3, f"{stack}.layers", "code", ha=align)
    draw.label(ax, label_x, top - 0.25, stack, ha=align, weight="bold")
    draw.label(ax, label_x, top - 0.45, f"Transformer.{kind}", "code", ha=align)
    if not norm_first:
        return cur
    final = draw.box(
        ax, x, top + 0.5, "Layer Norm", f"{stack}.final_norm", "norm", width
    )
    draw.arrow(ax, [(x, cur), (x, final.bottom)])
    return final.top


def _scaled_dot_product_panel(ax, x):
    """Left half of Figure 2: softmax(Q Kᵀ / √d_k) V, with the optional mask."""
    for dx, letter in ((-0.55, "Q"), (0.55, "K"), (1.45, "V")):
        draw.label(ax, x + dx, 0.65, letter)
    steps = [
        ("MatMul", "Q Kᵀ: (B, h, T, S)", "linear"),
        ("Scale", "÷ √d_k", "plain"),
        ("Mask (opt.)", "where(mask, ·, -1e9)", "plain"),
        ("SoftMax", "weights, rows sum to 1", "softmax"),
        ("MatMul", "weights V: (B, h, T, d_v)", "linear"),
    ]
    cur = 0.8
    for i, (title, code, face) in enumerate(steps):
        step = draw.box(ax, x, cur + 0.61, title, code, face, 2.2)
        for dx in (-0.55, 0.55) if i == 0 else (0.0,):
            draw.arrow(ax, [(x + dx, cur), (x + dx, step.bottom)])
        cur = step.top
    # V joins at the last MatMul.
    draw.arrow(ax, [(x + 1.45, 0.8), (x + 1.45, step.y), (step.edge("right"), step.y)])
    draw.arrow(ax, [(x, cur), (x, cur + 0.3)])
    draw.label(ax, x, cur + 0.42, "Attention(Q, K, V)")
    draw.label(ax, x, 6.55, "Scaled Dot-Product Attention", "title")
    draw.label(ax, x, 6.3, "layers.scaled_dot_product_attention", "code")
    draw.label(ax, x, 6.12, "(Keras's MultiHeadAttention computes the same)", "code")


def _padded_ids(length, padding):
    # Real ids from 4 (0-3 are reserved), then `padding` zeros: (1, length).
    ids = np.concatenate([np.arange(4, 4 + length - padding), np.zeros(padding)])
    return ids[None].astype("int32")


def _check_bool(name, value):
    if not isinstance(value, bool):
        raise ValueError(f"`{name}` must be a bool. Received: {name}={value!r}")


def _count(name, value):
    # A positive Python or NumPy integer; bools and floats are refused.
    value = _integer(name, value)
    if value < 1:
        raise ValueError(
            f"`{name}` must be a positive integer. Received: {name}={value!r}"
        )
    return value


def _padding(name, value, length):
    value = _integer(name, value)
    if not 0 <= value < length:
        raise ValueError(
            f"`{name}` must be in [0, {length}), leaving at least one real "
            f"token. Received: {name}={value}"
        )
    return value


def _integer(name, value):
    try:
        if isinstance(value, bool):
            raise TypeError
        return operator.index(value)
    except TypeError:
        raise ValueError(
            f"`{name}` must be an integer. Received: {name}={value!r}"
        ) from None


if __name__ == "__main__":
    main()
