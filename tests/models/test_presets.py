"""Tests for keras_transformer.models.presets: the paper's Table 3 sizes."""

import numpy as np
import pytest

from keras_transformer.models import PRESETS, Transformer


def expected_parameters(vocab_size, num_layers, d_model, d_ff, **_):
    """Parameters of the paper's post-LN Transformer with tied embeddings.

    One shared `(V, D)` embedding (encoder input, decoder input, output
    projection); sinusoidal positions have none. Per layer, each attention
    has four `(D, D)` projections with biases, the feed-forward network
    `(D, F)` and `(F, D)` with biases, each LayerNorm a scale and an offset
    `(D,)`. Encoder layers: 1 attention, 2 norms; decoder layers: 2
    attentions, 3 norms.
    """
    attention = 4 * (d_model * d_model + d_model)
    feed_forward = 2 * d_model * d_ff + d_ff + d_model
    norm = 2 * d_model
    encoder_layer = attention + feed_forward + 2 * norm
    decoder_layer = 2 * attention + feed_forward + 3 * norm
    return vocab_size * d_model + num_layers * (encoder_layer + decoder_layer)


def count_parameters(name, vocab_size=37000):
    model = Transformer.from_preset(name, vocab_size=vocab_size)
    model.build()
    return model.count_params()


def test_table_3_hyper_parameters():
    # Vaswani et al. 2017, Table 3, rows "base" and "big".
    base, big = PRESETS["base"], PRESETS["big"]
    assert (base["num_layers"], base["d_model"], base["d_ff"]) == (6, 512, 2048)
    assert (base["num_heads"], base["dropout"]) == (8, 0.1)
    assert (big["num_layers"], big["d_model"], big["d_ff"]) == (6, 1024, 4096)
    assert (big["num_heads"], big["dropout"]) == (16, 0.3)
    for name, preset in PRESETS.items():
        assert preset["d_model"] % preset["num_heads"] == 0, name


def test_base_has_about_65m_parameters():
    count = count_parameters("base")
    assert count == expected_parameters(37000, **PRESETS["base"]) == 63_082_496
    # Table 3 says 65M for ~37000 shared tokens. A missing sublayer (no
    # cross-attention: -6.3M), an untied output matrix (+18.9M) or d_ff=1024
    # (-12.6M) leave this band; the exact formula above catches the rest.
    assert 60e6 < count < 66e6


@pytest.mark.slow
def test_big_has_about_213m_parameters():
    count = count_parameters("big")
    assert count == expected_parameters(37000, **PRESETS["big"]) == 214_245_376
    assert 205e6 < count < 220e6  # Table 3: 213M


def test_from_preset_overrides_and_builds():
    model = Transformer.from_preset("tiny", vocab_size=50, dropout=0.0, num_layers=1)
    assert (model.d_model, model.num_layers, model.dropout) == (128, 1, 0.0)
    logits = model((np.array([[5, 6, 3]]), np.array([[2, 7]])))
    assert tuple(logits.shape) == (1, 2, 50)


def test_unknown_preset_names_the_options():
    with pytest.raises(ValueError, match=r"name='huge'.*\['base', 'big'"):
        Transformer.from_preset("huge", vocab_size=100)
