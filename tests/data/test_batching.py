import collections
import logging
import random

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.data import (
    END_ID,
    PAD_ID,
    START_ID,
    ParallelCorpus,
    builtin_corpus,
    default_bucket_lengths,
    make_batches,
)


class IdTokenizer:
    """Test double: a sentence of integers is its own ids ("7 8 9" -> 7, 8, 9)."""

    def tokenize(self, strings):
        words = tf.strings.split(strings)
        return tf.ragged.map_flat_values(tf.strings.to_number, words, tf.int32)


def id_corpus(source_lengths, target_lengths, seed=0):
    """Pairs of random ids >= 4; the first source id numbers the pair."""
    rng = random.Random(seed)
    sources, targets = [], []
    for number, (s, t) in enumerate(zip(source_lengths, target_lengths, strict=True)):
        source = [1000 + number] + [rng.randrange(4, 999) for _ in range(s - 1)]
        target = [rng.randrange(4, 999) for _ in range(t)]
        sources.append(" ".join(map(str, source)))
        targets.append(" ".join(map(str, target)))
    return ParallelCorpus(sources, targets, name="ids")


def as_ids(corpus):
    return [(tuple(map(int, s.split())), tuple(map(int, t.split()))) for s, t in corpus]


def unpack(batches):
    """Checks the teacher-forcing layout of every row; returns pairs and shapes."""
    pairs, shapes = [], []
    for (source_ids, target_in), target_out in batches:
        assert source_ids.dtype == target_in.dtype == target_out.dtype == tf.int32
        assert source_ids.shape == target_in.shape == target_out.shape
        shapes.append(tuple(source_ids.shape))
        for source, t_in, t_out in zip(
            source_ids.numpy(), target_in.numpy(), target_out.numpy(), strict=True
        ):
            n = int(np.sum(t_out != PAD_ID)) - 1  # target length
            assert t_in[0] == START_ID and t_out[n] == END_ID
            np.testing.assert_array_equal(t_in[1 : n + 1], t_out[:n])
            assert not t_in[n + 1 :].any() and not t_out[n + 1 :].any()
            m = int(np.sum(source != PAD_ID)) - 1  # source length
            assert source[m] == END_ID and not source[m + 1 :].any()
            pairs.append((tuple(source[:m]), tuple(t_out[:n])))
    return pairs, shapes


@pytest.fixture(scope="module")
def corpus():
    rng = random.Random(1)
    return id_corpus(
        [rng.randint(1, 40) for _ in range(300)],
        [rng.randint(1, 40) for _ in range(300)],
    )


def test_every_pair_once_per_epoch_with_teacher_forcing(corpus):
    batches, stats = make_batches(
        corpus,
        IdTokenizer(),
        max_length=48,
        token_budget=256,
        seed=3,
        with_stats=True,
    )
    assert stats.kept == stats.pairs == len(corpus)
    assert stats.too_long == stats.empty == 0
    expected = collections.Counter(as_ids(corpus))
    first_ids = []
    for _ in range(2):
        pairs, _ = unpack(batches)
        assert collections.Counter(pairs) == expected
        first_ids.append([source[0] for source, _ in pairs])
    assert first_ids[0] != first_ids[1]  # reshuffled every epoch


def test_fixed_shapes_within_the_token_budget(corpus):
    budget, max_length = 256, 48
    batches, stats = make_batches(
        corpus,
        IdTokenizer(),
        max_length=max_length,
        token_budget=budget,
        seed=0,
        with_stats=True,
    )
    assert stats.bucket_lengths == default_bucket_lengths(max_length)
    assert stats.batch_sizes == tuple(budget // b for b in stats.bucket_lengths)
    pairs, shapes = unpack(batches)
    assert len(shapes) == stats.batches == int(batches.cardinality())
    partial = collections.Counter()
    for size, length in shapes:
        assert length in stats.bucket_lengths
        assert size * length <= budget
        full = budget // length
        assert size <= full
        partial[length] += size < full
    # One smaller batch at most per bucket and epoch: few distinct shapes.
    assert max(partial.values()) <= 1
    assert len(set(shapes)) <= 2 * len(stats.bucket_lengths)
    # Each pair sits in the smallest bucket that holds it.
    by_source = {
        source: length
        for (source, _), (_, length) in zip(
            pairs, [s for s in shapes for _ in range(s[0])], strict=True
        )
    }
    for source, target in as_ids(corpus):
        need = max(len(source), len(target)) + 1
        bucket = min(b for b in stats.bucket_lengths if b >= need)
        assert by_source[source] == bucket


def test_stats_count_tokens_and_padding(corpus):
    batches, stats = make_batches(
        corpus, IdTokenizer(), max_length=48, token_budget=512, with_stats=True
    )
    source_tokens = target_tokens = padded = 0
    for (source_ids, _), target_out in batches:
        source_tokens += int(tf.math.count_nonzero(source_ids))
        target_tokens += int(tf.math.count_nonzero(target_out))
        padded += int(tf.size(source_ids))
    assert stats.source_tokens == source_tokens
    assert stats.target_tokens == target_tokens
    assert stats.padded_tokens == padded
    assert stats.source_tokens == sum(len(s) + 1 for s, _ in as_ids(corpus))
    assert stats.target_tokens == sum(len(t) + 1 for _, t in as_ids(corpus))


def test_too_long_pairs_are_dropped_and_counted(caplog):
    # max_length=10: a source of 9 ids fits (source_ids = 9 + end), 10 do
    # not; a target of 9 ids fits (target_in = start + 9), 10 do not.
    sources = [9, 10, 5, 5, 12, 3]
    targets = [5, 5, 9, 10, 10, 3]
    corpus = id_corpus(sources, targets)
    with caplog.at_level(logging.WARNING):
        batches, stats = make_batches(
            corpus, IdTokenizer(), max_length=10, token_budget=40, with_stats=True
        )
    assert (stats.pairs, stats.kept, stats.too_long) == (6, 3, 3)
    assert "dropped 3 of 6 pairs longer than max_length=10" in caplog.text
    pairs, _ = unpack(batches)
    kept = [pair for i, pair in enumerate(as_ids(corpus)) if i in (0, 2, 5)]
    assert collections.Counter(pairs) == collections.Counter(kept)


def test_empty_pairs_are_dropped_and_counted(caplog):
    corpus = ParallelCorpus(["5 6", " ", "7"], ["8", "9", ""])
    with caplog.at_level(logging.WARNING):
        batches, stats = make_batches(
            corpus, IdTokenizer(), max_length=8, token_budget=16, with_stats=True
        )
    assert (stats.kept, stats.empty, stats.too_long) == (1, 2, 0)
    assert "dropped 2 of 3 pairs with an empty source or target" in caplog.text
    assert unpack(batches)[0] == [((5, 6), (8,))]


def test_seeded_epochs_are_reproducible(corpus):
    def first_epoch(seed):
        batches = make_batches(
            corpus, IdTokenizer(), max_length=48, token_budget=256, seed=seed
        )
        return [source_ids.numpy().tolist() for (source_ids, _), _ in batches]

    assert first_epoch(5) == first_epoch(5)
    assert first_epoch(5) != first_epoch(6)


def test_the_stream_of_epochs_resumes_anywhere(corpus):
    # With `epochs_from`, epoch e is shuffled by (seed, e) alone: the stream
    # from epoch 2 is the stream from epoch 0 without its first two epochs,
    # so a run resumed at any step reads the batches it would have read.
    def stream(start, seed=5):
        return make_batches(
            corpus,
            IdTokenizer(),
            max_length=48,
            token_budget=256,
            seed=seed,
            epochs_from=start,
            with_stats=True,
        )

    batches, stats = stream(0)
    per_epoch = stats.batches
    first = [s.numpy().tolist() for (s, _), _ in batches.take(4 * per_epoch)]
    later, _ = stream(2)
    resumed = [s.numpy().tolist() for (s, _), _ in later.skip(3).take(per_epoch)]
    assert resumed == first[2 * per_epoch + 3 : 3 * per_epoch + 3]
    # Each epoch holds every pair once, in an order of its own.
    epochs = [unpack(batches.skip(e * per_epoch).take(per_epoch))[0] for e in (0, 1)]
    assert sorted(epochs[0]) == sorted(epochs[1]) == sorted(as_ids(corpus))
    assert epochs[0] != epochs[1]
    other, _ = stream(0, seed=6)
    assert [s.numpy().tolist() for (s, _), _ in other.take(per_epoch)] != first[
        :per_epoch
    ]
    with pytest.raises(ValueError, match="epochs_from needs"):
        make_batches(corpus, IdTokenizer(), max_length=48, epochs_from=0)


def test_no_autotuning_and_an_iterator_left_early_is_freed(corpus):
    # tf.data's autotuning held up the deletion of an iterator left before
    # its end (as `fit` leaves it after `cardinality` steps) for up to 14 s.
    batches = make_batches(corpus, IdTokenizer(), max_length=48, token_budget=256)
    assert batches.options().autotune.enabled is False
    iterator = iter(batches)
    next(iterator)
    del iterator  # Must not hang or fail.
    assert len(list(batches)) == int(batches.cardinality())


def test_without_shuffle_the_order_is_fixed(corpus):
    batches = make_batches(
        corpus, IdTokenizer(), max_length=48, token_budget=256, shuffle=False
    )
    first, _ = unpack(batches)
    second, _ = unpack(batches)
    assert first == second
    assert collections.Counter(first) == collections.Counter(as_ids(corpus))


def test_custom_boundaries_and_dataset_input(corpus):
    batches, stats = make_batches(
        corpus.dataset(),
        IdTokenizer(),
        max_length=48,
        token_budget=480,
        boundaries=[20, 10, 99],
        with_stats=True,
    )
    assert stats.bucket_lengths == (10, 20, 48)
    pairs, shapes = unpack(batches)
    assert {length for _, length in shapes} <= {10, 20, 48}
    assert collections.Counter(pairs) == collections.Counter(as_ids(corpus))


@pytest.mark.parametrize("replicas", [2, 3])
def test_batches_split_evenly_between_replicas(corpus, replicas):
    # Odd budgets: without `replicas`, most buckets' batches have odd sizes.
    batches, stats = make_batches(
        corpus,
        IdTokenizer(),
        max_length=48,
        token_budget=250,
        seed=0,
        with_stats=True,
        replicas=replicas,
    )
    one = make_batches(corpus, IdTokenizer(), max_length=48, token_budget=250)
    assert any(len(target_out) % replicas for _, target_out in one)
    for length, size in zip(stats.bucket_lengths, stats.batch_sizes, strict=True):
        assert size % replicas == 0
        assert size * length <= 250 or size == replicas
    real, padded = [], 0
    for (source_ids, target_in), target_out in batches:
        assert len(target_out) % replicas == 0
        empty = ~np.any(source_ids.numpy(), axis=1)
        # Empty rows are all padding, and only at the end of a batch.
        assert not np.any(target_in.numpy()[empty]) and not np.any(
            target_out.numpy()[empty]
        )
        assert empty.sum() < replicas and not np.any(np.diff(empty.astype(int)) < 0)
        real.append(((source_ids[~empty], target_in[~empty]), target_out[~empty]))
        padded += int(tf.size(source_ids))
    pairs, _ = unpack(real)
    assert collections.Counter(pairs) == collections.Counter(as_ids(corpus))
    assert stats.padded_tokens == padded


def test_invalid_settings():
    corpus = id_corpus([3], [3])
    with pytest.raises(ValueError, match="token_budget"):
        make_batches(corpus, IdTokenizer(), max_length=64, token_budget=32)
    with pytest.raises(ValueError, match="positive"):
        make_batches(corpus, IdTokenizer(), max_length=8, boundaries=[0, 4])
    with pytest.raises(ValueError, match="No pair left"):
        make_batches(id_corpus([9], [3]), IdTokenizer(), max_length=8)
    with pytest.raises(ValueError, match="replicas must be positive. Received: 0"):
        make_batches(corpus, IdTokenizer(), max_length=8, replicas=0)


def test_with_the_real_tokenizer(builtin_tokenizer):
    corpus = builtin_corpus("val", max_pairs=300)
    batches, stats = make_batches(
        corpus,
        builtin_tokenizer,
        max_length=64,
        token_budget=512,
        with_stats=True,
    )
    assert stats.kept == 300
    decoded = [
        sentence.decode()
        for _, target_out in batches
        for sentence in builtin_tokenizer.detokenize(target_out).numpy()
    ]
    assert collections.Counter(decoded) == collections.Counter(corpus.targets)
    # Also after the seed reset that every test of the suite does.
    tf.random.set_seed(0)
    assert sum(int(tf.shape(t)[0]) for _, t in batches) == 300
