"""Greedy search: stopping, padding, lengths, cache, attention, bad input."""

import math

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding import greedy_search


def assert_ends_and_padded(ids, lengths):
    """Each row: non-zero tokens, an end id (unless cut), then only zeros."""
    for row, n in zip(ids, lengths, strict=True):
        assert np.all(row[:n] != 0) and np.all(row[n:] == 0)
        ends = np.flatnonzero(row == 3)
        if ends.size:  # Nothing after the first end id.
            assert ends.tolist() == [n - 1]


def test_follows_the_most_probable_token_and_stops_at_end(bigram):
    model = bigram({2: {5: 0.7, 6: 0.3}, 5: {6: 0.9, 3: 0.1}, 6: {3: 1.0}}, 8)
    out = greedy_search(model, tf.constant([[4, 4, 3]]))
    assert out["ids"].numpy()[0, :4].tolist() == [5, 6, 3, 0]
    assert out["lengths"].numpy().tolist() == [3]
    np.testing.assert_allclose(out["log_probs"], [math.log(0.7 * 0.9)], atol=1e-5)
    np.testing.assert_array_equal(out["scores"], out["log_probs"])


def test_output_is_zero_padded_after_end(model, sources):
    out = greedy_search(model, sources, max_length=12)
    assert out["ids"].shape == (3, 12)
    assert_ends_and_padded(out["ids"].numpy(), out["lengths"].numpy())


def test_default_max_length_is_source_length_plus_50_capped(bigram):
    never_ends = {2: {4: 1.0}, 4: {5: 1.0}, 5: {4: 1.0}}
    sources = tf.constant([[6, 6, 3], [3, 0, 0]])  # lengths 3 and 1
    out = greedy_search(bigram(never_ends, 8, max_length=64), sources)
    assert out["ids"].shape == (2, 53)  # padded width 3 + 50
    assert out["lengths"].numpy().tolist() == [53, 51]
    out = greedy_search(bigram(never_ends, 8, max_length=52), sources)
    assert out["ids"].shape == (2, 52)
    assert out["lengths"].numpy().tolist() == [52, 51]
    assert 3 not in out["ids"].numpy()  # cut, not ended


def test_cached_equals_uncached(model, sources):
    cached = greedy_search(model, sources, max_length=12)
    uncached = greedy_search(model, sources, max_length=12, use_cache=False)
    np.testing.assert_array_equal(cached["ids"], uncached["ids"])
    np.testing.assert_allclose(cached["scores"], uncached["scores"], atol=1e-5)


def test_scores_are_log_probs_of_the_output(model, sources):
    out = greedy_search(model, sources, max_length=8)
    ids, lengths = out["ids"].numpy(), out["lengths"].numpy()
    target_in = np.concatenate([np.full((3, 1), 2), ids[:, :-1]], axis=1)
    log_probs = tf.nn.log_softmax(model((sources, target_in))).numpy()
    expected = [
        sum(log_probs[b, t, ids[b, t]] for t in range(lengths[b])) for b in range(3)
    ]
    np.testing.assert_allclose(out["scores"], expected, atol=1e-4)


def test_attention_scores_are_those_of_the_search_steps(model, sources):
    out = greedy_search(model, sources, max_length=6, return_attention_scores=True)
    ids, lengths = out["ids"].numpy(), out["lengths"].numpy()
    cross = out["attention"]["cross_attention"]
    self_attention = out["attention"]["self_attention"]
    assert len(cross) == len(self_attention) == model.num_layers
    assert cross[0].shape == (3, 2, 6, sources.shape[1])
    assert self_attention[0].shape == (3, 2, 6, 6)
    # Step by step, each step seeing its prefix only, as during the search.
    memory, mask = model.encode(sources)
    tokens = np.concatenate([np.full((3, 1), 2), ids], axis=1)
    for t in range(6):
        _, scores = model.decode(
            tokens[:, : t + 1], memory, mask, return_attention_scores=True
        )
        for b in range(3):
            if t < lengths[b]:
                for layer in range(model.num_layers):
                    np.testing.assert_allclose(
                        cross[layer][b, :, t],
                        scores["cross_attention"][layer][b, :, t],
                        atol=1e-5,
                    )
                    np.testing.assert_allclose(
                        self_attention[layer][b, :, t, : t + 1],
                        scores["self_attention"][layer][b, :, t],
                        atol=1e-5,
                    )
                    assert not np.any(self_attention[layer][b, :, t, t + 1 :])
            else:  # Rows past the output are zero.
                assert not np.any(cross[0][b, :, t])


@pytest.mark.parametrize(
    "source, error, match",
    [
        (np.array([[4.0, 3.0]]), TypeError, "integer"),
        (["a", "b"], TypeError, "integer"),
        (np.array([4, 3]), ValueError, "shape"),
    ],
)
def test_bad_source_ids(bigram, source, error, match):
    model = bigram({2: {3: 1.0}}, 6)
    with pytest.raises(error, match=match):
        greedy_search(model, source)


@pytest.mark.parametrize("max_length", [0, 65, 2.5])
def test_bad_max_length(bigram, max_length):
    model = bigram({2: {3: 1.0}}, 6, max_length=64)
    with pytest.raises((TypeError, ValueError), match="max_length"):
        greedy_search(model, np.array([[3]]), max_length=max_length)


@pytest.mark.parametrize("graph", [False, True])
def test_compaction_changes_no_output(copy_model, mixed_sources, graph):
    def search(compact, use_cache):
        run = lambda ids: greedy_search(  # noqa: E731
            copy_model, ids, compact=compact, use_cache=use_cache
        )
        return (tf.function(run) if graph else run)(mixed_sources)

    fast = search(True, True)
    assert len(set(fast["lengths"].numpy())) >= 5  # they finish at many steps
    for compact, use_cache in [(False, True), (False, False), (True, False)]:
        plain = search(compact, use_cache)
        np.testing.assert_array_equal(fast["ids"], plain["ids"])
        np.testing.assert_allclose(fast["scores"], plain["scores"], atol=1e-5)
