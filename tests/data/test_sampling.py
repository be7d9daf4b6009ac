import collections

import pytest

from keras_transformer.data import reservoir_sample


def test_a_short_stream_is_kept_whole_and_in_order():
    assert reservoir_sample([["a", "b"], [], ["c"]], size=3) == (["a", "b", "c"], 3)
    assert reservoir_sample([], size=3) == ([], 0)


def test_the_sample_does_not_depend_on_the_chunks():
    whole = reservoir_sample([range(5000)], size=50, seed=4)
    pieces = reservoir_sample(
        [range(i, min(i + 7, 5000)) for i in range(0, 5000, 7)], 50, 4
    )
    assert whole == pieces
    assert whole[1] == 5000 and len(whole[0]) == 50 == len(set(whole[0]))
    assert reservoir_sample([range(5000)], size=50, seed=5) != whole


def test_every_item_is_equally_likely():
    # 3000 samples of 10 of 100 items: each item is drawn 300 times on
    # average (binomial, standard deviation ~16).
    counts = collections.Counter()
    for seed in range(3000):
        sample, _ = reservoir_sample([range(40), range(40, 100)], size=10, seed=seed)
        counts.update(sample)
    assert len(counts) == 100
    assert 220 < min(counts.values()) and max(counts.values()) < 380


def test_size_must_be_positive():
    with pytest.raises(ValueError, match="size must be positive. Received: size=0"):
        reservoir_sample([[1]], size=0)
