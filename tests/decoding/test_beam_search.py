"""Beam search: toy models with known answers, beam 1 == greedy, cache."""

import math

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding import beam_search, greedy_search, length_penalty

A, B, D = 4, 5, 11
C = (6, 7, 8, 9, 10)
# Greedy takes A (0.6), but every continuation of A is poor (0.2); B (0.4)
# has a sure continuation D, so B D </s> (0.4) beats A C </s> (0.12).
GREEDY_IS_WRONG = {
    2: {A: 0.6, B: 0.4},
    A: {c: 0.2 for c in C},
    B: {D: 1.0},
    **{c: {3: 1.0} for c in C},
    D: {3: 1.0},
}
E, F, G, H = 4, 5, 6, 7
# Short E </s> (p = 0.52) against long F G H </s> (p = 0.48).
SHORT_OR_LONG = {
    2: {E: 0.52, F: 0.48},
    E: {3: 1.0},
    F: {G: 1.0},
    G: {H: 1.0},
    H: {3: 1.0},
}

J, K = 8, 9
# The good A B C </s> (0.7) ends last; junk J </s> and J K </s> (0.15 each)
# end first, each ranked among the step's top 2, and fill a beam of 2.
JUNK_ENDS_FIRST = {
    2: {A: 0.7, J: 0.3},
    A: {B: 1.0},
    B: {6: 1.0},
    6: {3: 1.0},
    J: {3: 0.5, K: 0.5},
    K: {3: 1.0},
}


def test_length_penalty_is_gnmt():
    assert length_penalty(1, 0.6) == 1.0
    assert math.isclose(length_penalty(10, 0.6), (15 / 6) ** 0.6)
    assert length_penalty(10, 0.0) == 1.0
    np.testing.assert_allclose(
        length_penalty(tf.constant([1, 10]), 0.6), [1.0, (15 / 6) ** 0.6], rtol=1e-6
    )


def test_beam_finds_what_greedy_misses(bigram):
    model = bigram(GREEDY_IS_WRONG, 12)
    source = tf.constant([[A, 3]])
    greedy = greedy_search(model, source)
    assert greedy["ids"].numpy()[0, :3].tolist() == [A, C[0], 3]
    np.testing.assert_allclose(greedy["log_probs"], [math.log(0.6 * 0.2)], atol=1e-5)
    beam = beam_search(model, source, beam_size=2)
    assert beam["ids"].numpy()[0, :4].tolist() == [B, D, 3, 0]
    np.testing.assert_allclose(beam["log_probs"], [math.log(0.4)], atol=1e-5)
    np.testing.assert_allclose(
        beam["scores"], [math.log(0.4) / length_penalty(3, 0.6)], atol=1e-5
    )
    assert beam["log_probs"][0] > greedy["log_probs"][0]


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
def test_length_penalty_changes_the_choice(bigram, alpha):
    # By hand: rank log P / ((5 + |Y|) / 6) ** alpha, |Y| counting </s>.
    short = math.log(0.52) / ((5 + 2) / 6) ** alpha
    long = math.log(0.48) / ((5 + 4) / 6) ** alpha
    expected = [E, 3] if short > long else [F, G, H, 3]
    assert (expected == [E, 3]) == (alpha == 0.0)  # the toy is balanced so
    out = beam_search(bigram(SHORT_OR_LONG, 8), tf.constant([[E, 3]]), 2, alpha)
    assert out["ids"].numpy()[0, : len(expected)].tolist() == expected
    np.testing.assert_allclose(out["scores"], [max(short, long)], atol=1e-5)


def test_stops_early_when_no_alive_beam_can_win(bigram):
    model = bigram(SHORT_OR_LONG, 8)
    # alpha = 0: after step 2, E </s> (0.52) beats anything F... (<= 0.48).
    beam_search(model, tf.constant([[E, 3]]), beam_size=2, alpha=0.0)
    assert model.decode_calls == 2
    # alpha = 0.6: F G H </s> may still win; it finishes at step 4, which
    # fills the beam's 2 finished slots.
    model.decode_calls = 0
    beam_search(model, tf.constant([[E, 3]]), beam_size=2, alpha=0.6)
    assert model.decode_calls == 4


def test_poor_early_finishers_do_not_stop_the_search(bigram):
    # Stopping once beam_size hypotheses have finished returned J </s> here
    # (and, on the demo model, 'bihundertvier' for 'bis zum ...').
    model = bigram(JUNK_ENDS_FIRST, 12)
    greedy = greedy_search(model, tf.constant([[A, 3]]))
    model.decode_calls = 0
    beam = beam_search(model, tf.constant([[A, 3]]), beam_size=2, alpha=0.6)
    assert greedy["ids"].numpy()[0, :4].tolist() == [A, B, 6, 3]
    np.testing.assert_array_equal(beam["ids"], greedy["ids"])
    np.testing.assert_allclose(beam["log_probs"], [math.log(0.7)], atol=1e-5)
    assert model.decode_calls == 4  # It still stops once A B C </s> is found.


def test_default_max_length_and_cut_hypotheses(bigram):
    never_ends = {2: {4: 0.5, 5: 0.5}, 4: {5: 1.0}, 5: {4: 1.0}}
    sources = tf.constant([[6, 6, 3], [3, 0, 0]])
    out = beam_search(bigram(never_ends, 8, max_length=52), sources, beam_size=3)
    assert out["ids"].shape == (2, 52)
    assert out["lengths"].numpy().tolist() == [52, 51]
    np.testing.assert_allclose(out["log_probs"], [math.log(0.5)] * 2, atol=1e-5)


def test_beam_size_one_is_greedy(model, sources):
    greedy = greedy_search(model, sources, max_length=8)
    beam = beam_search(model, sources, beam_size=1, alpha=0.6, max_length=8)
    np.testing.assert_array_equal(beam["ids"], greedy["ids"])
    np.testing.assert_array_equal(beam["log_probs"], greedy["log_probs"])


@pytest.mark.parametrize("toy", [GREEDY_IS_WRONG, SHORT_OR_LONG])
def test_beam_size_one_is_greedy_on_toys(bigram, toy):
    # With alpha = 0.6 the long F G H </s> would outscore greedy's E </s>,
    # but one finished hypothesis fills a beam of one.
    model = bigram(toy, 12)
    greedy = greedy_search(model, tf.constant([[4, 3]]))
    beam = beam_search(model, tf.constant([[4, 3]]), beam_size=1, alpha=0.6)
    np.testing.assert_array_equal(beam["ids"], greedy["ids"])
    np.testing.assert_array_equal(beam["log_probs"], greedy["log_probs"])


def test_cached_equals_uncached(model, sources):
    cached = beam_search(model, sources, beam_size=3, max_length=8)
    uncached = beam_search(model, sources, beam_size=3, max_length=8, use_cache=False)
    for key in ("ids", "lengths"):
        np.testing.assert_array_equal(cached[key], uncached[key])
    for key in ("scores", "log_probs"):
        np.testing.assert_allclose(cached[key], uncached[key], atol=1e-5)


def test_restricted_attention_cached_equals_uncached(make_transformer, sources):
    # The window counts positions from the cache index in cached decoding.
    model = make_transformer(sliding_window=2)
    cached = beam_search(model, sources, beam_size=3, max_length=8)
    uncached = beam_search(model, sources, beam_size=3, max_length=8, use_cache=False)
    for key in ("ids", "lengths"):
        np.testing.assert_array_equal(cached[key], uncached[key])
    np.testing.assert_allclose(cached["scores"], uncached["scores"], atol=1e-5)


def test_output_is_zero_padded_after_end(model, sources):
    beam = beam_search(
        model, sources, beam_size=4, max_length=10, return_attention_scores=True
    )
    ids, lengths = beam["ids"].numpy(), beam["lengths"].numpy()
    for row, n in zip(ids, lengths, strict=True):
        assert np.all(row[:n] != 0) and np.all(row[n:] == 0)
        assert 3 not in row[: n - 1]
    np.testing.assert_allclose(
        beam["scores"], beam["log_probs"] / length_penalty(lengths, 0.6), rtol=1e-6
    )
    assert beam["attention"]["cross_attention"][0].shape == (3, 2, 10, 8)


@pytest.mark.parametrize(
    "kwargs, error",
    [
        (dict(beam_size=0), ValueError),
        (dict(beam_size=2.0), ValueError),
        (dict(alpha="0.6"), TypeError),
    ],
)
def test_bad_arguments(bigram, kwargs, error):
    with pytest.raises(error, match=next(iter(kwargs))):
        beam_search(bigram(SHORT_OR_LONG, 8), tf.constant([[3]]), **kwargs)


@pytest.mark.parametrize("graph", [False, True])
def test_compaction_changes_no_output(copy_model, mixed_sources, graph):
    # Sentences leave the running batch as they finish (compact=True, the
    # default outside XLA), with a cache that grows as needed: the same
    # hypotheses as the fixed-shape search, cached and uncached.
    def search(compact, use_cache):
        run = lambda ids: beam_search(  # noqa: E731
            copy_model, ids, beam_size=3, compact=compact, use_cache=use_cache
        )
        return (tf.function(run) if graph else run)(mixed_sources)

    fast = search(True, True)
    assert len(set(fast["lengths"].numpy())) >= 5  # they finish at many steps
    for compact, use_cache in [(False, True), (False, False), (True, False)]:
        plain = search(compact, use_cache)
        for key in ("ids", "lengths"):
            np.testing.assert_array_equal(fast[key], plain[key])
        for key in ("scores", "log_probs"):
            np.testing.assert_allclose(fast[key], plain[key], atol=1e-5)


def test_a_sentence_alone_decodes_as_in_a_batch(copy_model, mixed_sources):
    batch = beam_search(copy_model, mixed_sources, beam_size=3)
    for row in (0, 2, 8):
        source = mixed_sources[row : row + 1]
        width = int(tf.reduce_sum(tf.cast(source != 0, tf.int32)))
        alone = beam_search(copy_model, source[:, :width], beam_size=3)
        n = int(alone["lengths"][0])
        assert n == int(batch["lengths"][row])
        np.testing.assert_array_equal(alone["ids"][0, :n], batch["ids"][row, :n])
