"""Tests for keras_transformer.visualization.diagrams."""

import re
from pathlib import Path

import numpy as np
import pytest
from keras import ops
from matplotlib import pyplot as plt
from matplotlib.figure import Figure
from matplotlib.text import Text

from keras_transformer.layers.masking import causal_mask, merge_masks, padding_mask
from keras_transformer.visualization import (
    plot_attention_masks,
    plot_multi_head_diagram,
    plot_sublayer_diagram,
    plot_transformer_diagram,
)
from keras_transformer.visualization.diagrams import main

ROOT = Path(__file__).resolve().parents[2]


def texts(fig):
    return [t.get_text() for t in fig.findobj(Text)]


FIGURE_1 = [
    "Inputs (source_ids)",
    "Outputs, shifted right (target_in)",
    "Input Embedding",
    "Output Embedding",
    "Positional Encoding",
    "Encoder.positional_encoding",
    "Decoder.positional_encoding",
    "Multi-Head Attention",
    "Masked Multi-Head Attention",
    "Feed Forward",
    "EncoderLayer.self_attention",
    "EncoderLayer.self_attention_norm",
    "EncoderLayer.feed_forward",
    "EncoderLayer.feed_forward_norm",
    "DecoderLayer.self_attention",
    "DecoderLayer.self_attention_norm",
    "DecoderLayer.cross_attention",
    "DecoderLayer.cross_attention_norm",
    "DecoderLayer.feed_forward",
    "DecoderLayer.feed_forward_norm",
    "memory (B, S, D)",
    "Linear",
    "Transformer.embedding(x, reverse=True)",
    "Softmax",
    "Output Probabilities",
]


def test_transformer_diagram_has_figure_1_labels():
    fig = plot_transformer_diagram()
    assert isinstance(fig, Figure)
    labels = texts(fig)
    missing = [label for label in FIGURE_1 if label not in labels]
    assert not missing
    assert labels.count("Add & Norm") == 5  # 2 encoder + 3 decoder sublayers
    assert labels.count("N×") == 2
    assert any(label.startswith("tied:") for label in labels)
    assert "Encoder.final_norm" not in labels


def test_transformer_diagram_pre_ln():
    labels = texts(plot_transformer_diagram(norm_first=True, num_layers=6))
    assert "Add & Norm" not in labels
    assert labels.count("Layer Norm") == 5 + 2  # one per sublayer, one per stack
    assert {"Encoder.final_norm", "Decoder.final_norm"} <= set(labels)
    assert labels.count("6×") == 2


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("kind, sublayers", [("encoder", 2), ("decoder", 3)])
def test_sublayer_diagram(kind, sublayers, norm_first):
    fig = plot_sublayer_diagram(kind, norm_first=norm_first)
    assert isinstance(fig, Figure)
    labels = texts(fig)
    layer = "EncoderLayer" if kind == "encoder" else "DecoderLayer"
    assert labels.count("LayerNorm") == sublayers
    assert labels.count("Dropout") == sublayers
    assert labels.count(f"{layer}.residual_dropout") == sublayers
    assert f"{layer}.feed_forward_norm" in labels
    assert ("memory (B, S, D)" in labels) == (kind == "decoder")
    rule = (
        "x + Dropout(Sublayer(LayerNorm(x)))"
        if norm_first
        else ("LayerNorm(x + Dropout(Sublayer(x)))")
    )
    assert any(rule in label for label in labels)


def test_sublayer_order_follows_the_code():
    # Post-LN: sublayer, dropout, add, norm from bottom to top; pre-LN: norm first.
    for norm_first, order in [
        (
            False,
            [
                "EncoderLayer.self_attention",
                "EncoderLayer.residual_dropout",
                "EncoderLayer.self_attention_norm",
            ],
        ),
        (
            True,
            [
                "EncoderLayer.self_attention_norm",
                "EncoderLayer.self_attention",
                "EncoderLayer.residual_dropout",
            ],
        ),
    ]:
        fig = plot_sublayer_diagram("encoder", norm_first=norm_first)
        heights = {}
        for text in fig.axes[0].texts:
            heights.setdefault(text.get_text(), text.get_position()[1])
        assert sorted(order, key=heights.get) == order


def _library_masks(source_length, target_length, source_padding, target_padding):
    source = np.array([[5] * (source_length - source_padding) + [0] * source_padding])
    target = np.array([[5] * (target_length - target_padding) + [0] * target_padding])
    source_mask, target_mask = padding_mask(source), padding_mask(target)
    masks = [
        merge_masks(key_mask=source_mask),
        merge_masks(key_mask=target_mask, attention_mask=causal_mask(target_length)),
        merge_masks(key_mask=source_mask),
    ]
    shapes = [
        (source_length, source_length),
        (target_length, target_length),
        (target_length, source_length),
    ]
    return [
        np.broadcast_to(ops.convert_to_numpy(mask)[0], shape)
        for mask, shape in zip(masks, shapes, strict=True)
    ]


@pytest.mark.parametrize("sizes", [(5, 4, 1, 1), (3, 6, 0, 2), (1, 1, 0, 0)])
def test_mask_panels_are_the_library_masks(sizes):
    fig = plot_attention_masks(*sizes)
    assert isinstance(fig, Figure)
    for ax, expected in zip(fig.axes[:3], _library_masks(*sizes), strict=True):
        (image,) = ax.images
        np.testing.assert_array_equal(image.get_array(), expected.astype(int))
        assert ax.get_xlabel().startswith("keys")
        assert ax.get_ylabel().startswith("queries")


def test_mask_panels_defaults():
    causal = plot_attention_masks().axes[1].images[0].get_array()
    np.testing.assert_array_equal(
        causal, [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 0]]
    )


def test_multi_head_diagram():
    fig = plot_multi_head_diagram(num_heads=4, d_model=64)
    labels = texts(fig)
    for name in ("query", "key", "value"):
        assert f"{name}_dense ('{name}')" in "\n".join(labels)
    assert "output_dense ('attention_output')" in "\n".join(labels)
    assert "h = 4" in labels
    assert any("d_k = d_v = 16" in label for label in labels)
    assert {"Concat", "Scaled Dot-Product Attention", "Mask (opt.)"} <= set(labels)
    wide = texts(plot_multi_head_diagram(num_heads=3, d_model=10, key_dim=7))
    assert any("d_k = d_v = 7" in label for label in wide)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: plot_sublayer_diagram("attention"), "kind"),
        (lambda: plot_sublayer_diagram(norm_first="yes"), "norm_first"),
        (lambda: plot_transformer_diagram(norm_first=1), "norm_first"),
        (lambda: plot_transformer_diagram(num_layers=0), "num_layers"),
        (lambda: plot_attention_masks(source_length=0), "source_length"),
        (lambda: plot_attention_masks(target_length=2.0), "target_length"),
        (lambda: plot_attention_masks(source_padding=5), r"source_padding.*\[0, 5\)"),
        (lambda: plot_attention_masks(target_padding=-1), "target_padding"),
        (lambda: plot_multi_head_diagram(num_heads=3, d_model=512), "divisible"),
        (lambda: plot_multi_head_diagram(num_heads=0), "num_heads"),
        (lambda: plot_multi_head_diagram(key_dim=0), "key_dim"),
    ],
)
def test_invalid_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_no_window_opens():
    plt.close("all")
    plot_transformer_diagram()
    plot_attention_masks()
    assert plt.get_fignums() == []


def test_committed_diagrams_are_current(tmp_path):
    """docs/img holds what `main` writes now: the same files, the same labels.

    The labels, not the bytes: coordinates may move with matplotlib's version.
    Regenerate with `python -m keras_transformer.visualization.diagrams docs/img`.
    """
    main([str(tmp_path)])
    fresh = {p.name: _svg_texts(p) for p in tmp_path.glob("*.svg")}
    committed = {p.name: _svg_texts(p) for p in (ROOT / "docs" / "img").glob("*.svg")}
    assert sorted(committed) == sorted(fresh)
    for name, labels in fresh.items():
        assert committed[name] == labels, name
    assert "EncoderLayer.self_attention" in fresh["transformer.svg"]


def _svg_texts(path):
    # Text is written as text (svg.fonttype "none"): one <text> per line.
    return sorted(re.findall(r"<text[^>]*>([^<]*)</text>", path.read_text("utf-8")))
