"""Tests for keras_transformer.visualization.plot_attention_heads."""

import matplotlib
import numpy as np
import pytest
import tensorflow as tf
from matplotlib import pyplot as plt
from matplotlib.figure import Figure

from keras_transformer.models import Transformer
from keras_transformer.visualization import plot_attention_heads

SOURCE = ["▁Ein", "▁Mann", "▁läuft", "."]
TARGET = ["<s>", "▁A", "▁man", "▁walks", "."]


def random_weights(shape, seed=0):
    # Rows sum to one, like softmax outputs.
    weights = np.random.default_rng(seed).random(shape)
    return weights / weights.sum(axis=-1, keepdims=True)


def image_axes(fig):
    return [ax for ax in fig.axes if ax.images]


def tick_texts(labels):
    return [label.get_text() for label in labels]


def test_backend_is_headless():
    assert matplotlib.get_backend().lower() == "agg"


@pytest.mark.parametrize(
    "num_heads, max_cols, rows, cols",
    [(1, 4, 1, 1), (3, 4, 1, 3), (4, 4, 1, 4), (5, 4, 2, 4), (8, 3, 3, 3)],
)
def test_grid_has_exactly_one_axes_per_head(num_heads, max_cols, rows, cols):
    weights = random_weights((num_heads, 5, 4))
    fig = plot_attention_heads(weights, TARGET, SOURCE, max_cols=max_cols)
    heads = image_axes(fig)
    # Unused grid cells are removed: H heatmaps, then one shared colorbar.
    assert len(heads) == num_heads
    assert len(fig.axes) == num_heads + 1
    assert fig.axes[:num_heads] == heads
    assert fig.axes[-1].get_ylabel() == "attention weight"
    assert [ax.get_title() for ax in heads] == [f"head {i}" for i in range(num_heads)]
    spec = heads[0].get_subplotspec().get_gridspec()
    assert (spec.nrows, spec.ncols) == (rows, cols)


def test_images_are_the_weights_and_ticks_are_the_tokens():
    weights = random_weights((3, 5, 4))
    fig = plot_attention_heads(weights, TARGET, SOURCE)
    for head, ax in enumerate(image_axes(fig)):
        np.testing.assert_array_equal(ax.images[0].get_array(), weights[head])
        # Keys along x, queries along y, one tick per token.
        assert tick_texts(ax.get_xticklabels()) == SOURCE
        assert tick_texts(ax.get_yticklabels()) == TARGET
        np.testing.assert_array_equal(ax.get_xticks(), np.arange(4))
        np.testing.assert_array_equal(ax.get_yticks(), np.arange(5))
        assert all(label.get_rotation() == 90 for label in ax.get_xticklabels())


def test_shared_color_scale():
    weights = random_weights((2, 3, 3))
    fig = plot_attention_heads(weights, SOURCE[:3], SOURCE[:3])
    for ax in image_axes(fig):
        assert ax.images[0].get_clim() == (0.0, pytest.approx(weights.max()))


@pytest.mark.parametrize(
    "make",
    [
        lambda w: w[None],  # batch of one (1, H, T, S)
        lambda w: tf.constant(w),  # tensor
        lambda w: tf.constant(w[None], dtype=tf.float32),
        lambda w: w.tolist(),
    ],
    ids=["batch_of_one", "tf_tensor", "tf_batch_float32", "nested_list"],
)
def test_accepted_weight_types(make):
    weights = random_weights((2, 5, 4))
    fig = plot_attention_heads(make(weights), TARGET, SOURCE)
    heads = image_axes(fig)
    assert len(heads) == 2
    np.testing.assert_allclose(heads[1].images[0].get_array(), weights[1], rtol=1e-6)


def test_single_head_matrix():
    weights = random_weights((5, 4))
    fig = plot_attention_heads(weights, TARGET, SOURCE)
    (ax,) = image_axes(fig)
    np.testing.assert_array_equal(ax.images[0].get_array(), weights)


def test_bytes_tokens_are_decoded():
    weights = random_weights((1, 2, 2))
    tokens = ["▁Ein".encode(), b"."]
    fig = plot_attention_heads(weights, tokens, tokens)
    assert tick_texts(fig.axes[0].get_xticklabels()) == ["▁Ein", "."]


def test_title():
    weights = random_weights((2, 2, 2))
    fig = plot_attention_heads(weights, ["a", "b"], ["c", "d"], title="Layer 1")
    assert fig.get_suptitle() == "Layer 1"


def test_real_attention_of_every_kind():
    model = Transformer(
        vocab_size=20, num_layers=1, d_model=8, num_heads=2, d_ff=16, dropout=0.0
    )
    source_ids = np.array([[5, 6, 7, 3]], dtype="int32")
    target_in = np.array([[2, 8, 9, 10, 11]], dtype="int32")
    _, scores = model((source_ids, target_in), return_attention_scores=True)
    for kind, queries, keys in [
        ("encoder", SOURCE, SOURCE),
        ("decoder_self", TARGET, TARGET),
        ("decoder_cross", TARGET, SOURCE),
    ]:
        layer = scores[kind][0]  # (1, H, T, S)
        fig = plot_attention_heads(layer, queries, keys, title=kind)
        heads = image_axes(fig)
        assert len(heads) == 2
        for head, ax in enumerate(heads):
            np.testing.assert_allclose(
                ax.images[0].get_array(), np.asarray(layer)[0, head], rtol=1e-6
            )
            assert tick_texts(ax.get_xticklabels()) == keys
            assert tick_texts(ax.get_yticklabels()) == queries


@pytest.mark.parametrize(
    "queries, keys, match",
    [
        (TARGET[:4], SOURCE, r"len\(query_tokens\)=4.*T=5.*shape=\(2, 5, 4\)"),
        (TARGET, SOURCE + ["x"], r"len\(key_tokens\)=5.*S=4.*shape=\(2, 5, 4\)"),
        # Swapped: both counts are reported.
        (SOURCE, TARGET, r"len\(query_tokens\)=4.*T=5.*len\(key_tokens\)=5.*S=4"),
    ],
)
def test_token_count_mismatch(queries, keys, match):
    with pytest.raises(ValueError, match=match):
        plot_attention_heads(random_weights((2, 5, 4)), queries, keys)


@pytest.mark.parametrize(
    "shape", [(2, 2, 5, 4), (5,), (1, 1, 2, 5, 4), (0, 5, 4), (2, 0, 4)]
)
def test_bad_weight_shapes(shape):
    with pytest.raises(ValueError, match=r"weights.shape="):
        plot_attention_heads(np.zeros(shape), TARGET, SOURCE)


def test_bad_weight_dtype():
    with pytest.raises(ValueError, match="real numbers"):
        plot_attention_heads(np.ones((1, 5, 4), bool), TARGET, SOURCE)


def test_bad_max_cols():
    with pytest.raises(ValueError, match="max_cols"):
        plot_attention_heads(random_weights((2, 5, 4)), TARGET, SOURCE, max_cols=0)


def test_no_window_opens():
    plt.close("all")
    fig = plot_attention_heads(random_weights((2, 5, 4)), TARGET, SOURCE)
    assert isinstance(fig, Figure)
    assert fig.canvas.manager is None
    assert plt.get_fignums() == []
