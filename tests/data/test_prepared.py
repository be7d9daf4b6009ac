"""Prepared shards: `make_batches`'s batches, read from disk in bounded memory."""

import collections
import json
import logging
import os
import random
import threading
import time

import pytest
from test_batching import IdTokenizer, as_ids, id_corpus, unpack

from keras_transformer.data import (
    ParallelCorpus,
    make_batches,
    prepare_corpus,
    prepared_batches,
    stream_pairs,
)
from keras_transformer.data import prepared as prepared_module


@pytest.fixture(scope="module")
def corpus():
    rng = random.Random(1)
    # Some too long (> 48) and some empty pairs, to be dropped and counted.
    sources = [rng.randint(0, 52) for _ in range(400)]
    targets = [rng.randint(1, 40) for _ in range(400)]
    return id_corpus([max(s, 1) for s in sources], targets)


def prepare(corpus, root, chunk_rows=16, **kwargs):
    return prepare_corpus(
        stream_pairs(corpus),
        IdTokenizer(),
        root,
        max_length=kwargs.pop("max_length", 48),
        chunk_rows=chunk_rows,
        **kwargs,
    )


def rows(batches):
    return [
        tuple(t.numpy().tolist() for t in (source_ids, target_in, target_out))
        for (source_ids, target_in), target_out in batches
    ]


@pytest.mark.parametrize("replicas", [1, 2])
def test_a_corpus_within_the_buffer_gives_make_batches_batches(
    corpus, tmp_path, replicas
):
    # Several chunks per bucket, one group: shuffled whole, as make_batches.
    prepared = prepare(corpus, tmp_path)
    assert max(prepared.chunk_counts()) > 1
    settings = dict(token_budget=250, seed=7, replicas=replicas, with_stats=True)
    for start in (0, 2):
        expected, expected_stats = make_batches(
            corpus, IdTokenizer(), max_length=48, epochs_from=start, **settings
        )
        received, stats = prepared_batches(prepared, epochs_from=start, **settings)
        assert stats == expected_stats
        n = 2 * stats.batches + 3
        assert rows(received.take(n)) == rows(expected.take(n))
    # Without `epochs_from`: epoch 0 alone, of known length.
    one, stats = prepared_batches(prepared, **settings)
    from_zero, _ = prepared_batches(prepared, epochs_from=0, **settings)
    assert int(one.cardinality()) == stats.batches
    assert rows(one) == rows(from_zero.take(stats.batches))


def test_a_small_buffer_keeps_every_pair_once_per_epoch(corpus, tmp_path):
    prepared = prepare(corpus, tmp_path, chunk_rows=8)
    expected = make_batches(
        corpus, IdTokenizer(), max_length=48, token_budget=250, with_stats=True
    )[1]
    batches, stats = prepared_batches(
        prepared,
        token_budget=250,
        seed=3,
        epochs_from=0,
        shuffle_buffer=16,
        with_stats=True,
    )
    assert stats == expected
    per_epoch = stats.batches
    stream = list(batches.take(3 * per_epoch))
    first = rows(stream)
    epochs = [first[e * per_epoch : (e + 1) * per_epoch] for e in range(3)]
    kept = [
        pair for pair in as_ids(corpus) if max(len(pair[0]), len(pair[1])) + 1 <= 48
    ]
    for e in range(3):
        pairs, shapes = unpack(stream[e * per_epoch : (e + 1) * per_epoch])
        assert collections.Counter(pairs) == collections.Counter(kept)
        # One smaller batch at most per bucket and epoch.
        full = dict(zip(stats.bucket_lengths, stats.batch_sizes, strict=True))
        partial = collections.Counter(
            length for size, length in shapes if size < full[length]
        )
        assert max(partial.values()) <= 1
    assert epochs[0] != epochs[1] != epochs[2]
    # Resumed anywhere: the stream from epoch 1, without its first 5 batches.
    later = prepared_batches(
        prepared, token_budget=250, seed=3, epochs_from=1, shuffle_buffer=16
    )
    assert (
        rows(later.skip(5).take(per_epoch)) == first[per_epoch + 5 : 2 * per_epoch + 5]
    )
    other = prepared_batches(
        prepared, token_budget=250, seed=4, epochs_from=0, shuffle_buffer=16
    )
    assert rows(other.take(per_epoch)) != epochs[0]


def test_bidirectional_epochs_read_pairs_either_way_then_as_they_are(corpus, tmp_path):
    prepared = prepare(corpus, tmp_path, chunk_rows=8)
    settings = dict(token_budget=250, seed=3, shuffle_buffer=16)
    plain, stats = prepared_batches(
        prepared, epochs_from=0, with_stats=True, **settings
    )
    turned = prepared_batches(
        prepared, epochs_from=0, bidirectional_epochs=2, **settings
    )
    per_epoch = stats.batches
    plain_stream = list(plain.take(3 * per_epoch))
    turned_stream = list(turned.take(3 * per_epoch))
    directions = []
    for e in range(2):
        epoch = slice(e * per_epoch, (e + 1) * per_epoch)
        expected, expected_shapes = unpack(plain_stream[epoch])
        # Each row keeps the teacher-forcing layout (`unpack` checks it) and
        # the batches their shapes: a pair's bucket is the same both ways.
        received, shapes = unpack(turned_stream[epoch])
        assert shapes == expected_shapes
        # Row by row: the pair as it is, or its sides swapped.
        forward = [pair == same for pair, same in zip(received, expected, strict=True)]
        for pair, same, kept in zip(received, expected, forward, strict=True):
            assert kept or pair == same[::-1]
        assert 0.4 < forward.count(False) / len(forward) < 0.6
        directions.append(forward)
    assert directions[0] != directions[1]  # another epoch, other draws
    # From the third epoch on, the plain stream's batches.
    assert rows(turned_stream[2 * per_epoch :]) == rows(plain_stream[2 * per_epoch :])
    # A resumed run reads what an uninterrupted one would.
    later = prepared_batches(
        prepared, epochs_from=1, bidirectional_epochs=2, **settings
    )
    assert rows(later.skip(5).take(per_epoch)) == rows(
        turned_stream[per_epoch + 5 : 2 * per_epoch + 5]
    )


def test_the_counts_are_logged_and_kept(corpus, tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        prepared = prepare(corpus, tmp_path)
    stats = make_batches(corpus, IdTokenizer(), max_length=48, with_stats=True)[1]
    assert (prepared.pairs, prepared.kept, prepared.too_long) == (
        stats.pairs,
        stats.kept,
        stats.too_long,
    )
    assert prepared.too_long > 0
    assert f"dropped {stats.too_long} of 400 pairs longer than max_length=48" in (
        caplog.text
    )
    assert prepared.dtype == "int32"  # no vocab_size: the ids' range is unknown
    empty = ParallelCorpus(["5 6", " ", "7"], ["8", "9", ""])
    small = prepare(empty, tmp_path / "e", max_length=8)
    assert (small.kept, small.empty) == (1, 2)
    # A run that reads the shards (prepared by another) says it too.
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        prepared_batches(prepared, token_budget=256, seed=0)
    assert f"dropped {stats.too_long} of 400 pairs longer than max_length=48" in (
        caplog.text
    )


def test_prepared_once_then_reused(corpus, tmp_path, monkeypatch):
    first = prepare(corpus, tmp_path)
    meta = os.path.join(first.path, "prepared.json")
    written = os.stat(meta).st_mtime_ns

    def fail(*args):
        raise AssertionError("prepared again")

    monkeypatch.setattr(prepared_module, "_write", fail)
    assert prepare(corpus, tmp_path) == first
    assert os.stat(meta).st_mtime_ns == written
    # What it is made of names it: other data, length or chunks, elsewhere.
    for other in (
        dict(corpus=id_corpus([3, 4], [5, 6])),
        dict(max_length=40),
        dict(chunk_rows=32),
    ):
        with pytest.raises(AssertionError, match="prepared again"):
            prepare(other.pop("corpus", corpus), tmp_path, **other)
    assert os.listdir(tmp_path) == [os.path.basename(first.path)]


def test_damage_and_foreign_content_are_errors(corpus, tmp_path):
    prepared = prepare(corpus, tmp_path)
    meta_path = os.path.join(prepared.path, "prepared.json")
    meta = json.loads(open(meta_path).read())
    meta["identity"]["max_length"] = 40
    with open(meta_path, "w") as f:
        json.dump(meta, f)
    with pytest.raises(ValueError, match="describes other data than its name says"):
        prepare(corpus, tmp_path)
    meta["identity"]["max_length"] = 48
    with open(meta_path, "w") as f:
        json.dump(meta, f)
    chunk = prepared.chunk_path(3, 0)
    with open(chunk, "ab") as f:
        f.write(b"\0\0")
    with pytest.raises(ValueError, match=r"damaged .*000000.bin is \d+ bytes"):
        prepare(corpus, tmp_path)
    os.remove(chunk)
    with pytest.raises(ValueError, match="damaged .*000000.bin is missing"):
        prepare(corpus, tmp_path)


def test_a_failed_preparation_leaves_nothing(tmp_path):
    class Failing(IdTokenizer):
        def tokenize(self, strings):
            raise ValueError("no tokens today")

    with pytest.raises(ValueError, match="no tokens today"):
        prepare_corpus(stream_pairs(id_corpus([3], [3])), Failing(), tmp_path)
    assert os.listdir(tmp_path) == []
    # A killed preparation's directory (of a process gone) is removed.
    stale = tmp_path / f"x-0123.tmp-{prepared_module.socket.gethostname()}-999999999"
    stale.mkdir()
    prepared_module._remove_stale_temporaries(str(tmp_path / "x-0123"))
    assert not stale.exists()
    with pytest.raises(ValueError, match="no pair left to batch: 1 pairs, 1 longer"):
        prepare_corpus(
            stream_pairs(id_corpus([9], [3])), IdTokenizer(), tmp_path, max_length=8
        )
    assert os.listdir(tmp_path) == []


def test_a_worker_waits_for_the_chief(corpus, tmp_path):
    def chief():
        time.sleep(0.5)
        prepare(corpus, tmp_path)

    thread = threading.Thread(target=chief)
    thread.start()
    try:
        waited = prepare(corpus, tmp_path, write=False, poll_seconds=0.05)
    finally:
        thread.join()
    assert waited == prepare(corpus, tmp_path)


def test_a_worker_gives_up_on_a_chief_that_writes_nothing(
    corpus, tmp_path, monkeypatch
):
    monkeypatch.setattr(prepared_module, "WAIT_SECONDS", 0.2)
    with pytest.raises(TimeoutError, match="prepared.json: not there after .* chief"):
        prepare(corpus, tmp_path, write=False, poll_seconds=0.05)
    assert os.listdir(tmp_path) == []


def test_invalid_settings(corpus, tmp_path):
    prepared = prepare(corpus, tmp_path)
    with pytest.raises(ValueError, match="token_budget must hold"):
        prepared_batches(prepared, token_budget=32)
    with pytest.raises(ValueError, match="replicas must be positive. Received: 0"):
        prepared_batches(prepared, replicas=0)
    with pytest.raises(ValueError, match="shuffle_buffer must be positive"):
        prepared_batches(prepared, shuffle_buffer=0)
    with pytest.raises(ValueError, match="bidirectional_epochs must be >= 0"):
        prepared_batches(prepared, bidirectional_epochs=-1)
    with pytest.raises(ValueError, match="chunk_rows must be positive"):
        prepare(corpus, tmp_path, chunk_rows=0)


def test_with_the_real_tokenizer_ids_are_uint16(builtin_tokenizer, tmp_path):
    from keras_transformer.data import builtin_corpus

    corpus = builtin_corpus("val", max_pairs=300)
    prepared = prepare_corpus(
        stream_pairs(corpus), builtin_tokenizer, tmp_path, max_length=64
    )
    assert prepared.dtype == "uint16" and prepared.kept == 300
    batches = prepared_batches(prepared, token_budget=512)
    decoded = [
        sentence.decode()
        for _, target_out in batches
        for sentence in builtin_tokenizer.detokenize(target_out).numpy()
    ]
    assert collections.Counter(decoded) == collections.Counter(corpus.targets)


def test_subword_sampling_writes_views_read_one_per_epoch(builtin_tokenizer, tmp_path):
    from keras_transformer.data import SubwordSampling, builtin_corpus

    corpus = builtin_corpus("val", max_pairs=120)
    sampling = SubwordSampling(alpha=0.1, views=2, seed=4)

    def prepare_in(root, sampling=sampling):
        return prepare_corpus(
            stream_pairs(corpus),
            builtin_tokenizer,
            root,
            max_length=48,
            chunk_rows=64,
            sampling=sampling,
        )

    best = prepare_in(tmp_path / "best", None)
    sampled = prepare_in(tmp_path / "sampled")
    assert sampled.views == 2 and sampled.identity["sampling"] == {
        "alpha": 0.1,
        "views": 2,
        "seed": 4,
    }
    assert "sampling" not in best.identity
    # Every pair in the bucket of its best segmentation, in each view.
    assert (sampled.counts, sampled.kept) == (best.counts, best.kept)
    assert os.path.basename(sampled.path) != os.path.basename(best.path)
    # The draws are a function of the seed: prepared again, the same bytes.
    again = prepare_in(tmp_path / "again")

    def chunks(prepared):
        return [
            open(prepared.chunk_path(b, i, v), "rb").read()
            for v in range(prepared.views)
            for b, count in enumerate(prepared.chunk_counts())
            for i in range(count)
        ]

    assert chunks(again) == chunks(sampled)
    settings = dict(token_budget=256, seed=2)
    n = int(prepared_batches(best, **settings).cardinality())
    epochs = rows(prepared_batches(sampled, epochs_from=0, **settings).take(3 * n))
    plain = rows(prepared_batches(best, epochs_from=0, **settings).take(3 * n))
    # The same batches as without sampling: shapes, and the pairs' text.
    assert [[len(t) for t in r] for r in epochs] == [[len(t) for t in r] for r in plain]
    assert [[len(t[0]) for t in r] for r in epochs] == [
        [len(t[0]) for t in r] for r in plain
    ]

    def text(batches):
        return [
            builtin_tokenizer.detokenize(target_out).numpy().tolist()
            for _, _, target_out in batches
        ]

    assert text(epochs) == text(plain)

    # Epoch e reads view e % 2: other segmentations each epoch, then again.
    def segmentations(epoch):
        return sorted(
            tuple(row)
            for _, _, target_out in epochs[epoch * n : (epoch + 1) * n]
            for row in target_out
        )

    views = [segmentations(e) for e in range(3)]
    assert views[1] != views[0] and views[2] == views[0]
    # A resumed stream reads the views an uninterrupted one would.
    resumed = rows(prepared_batches(sampled, epochs_from=1, **settings).take(2 * n))
    assert resumed == epochs[n : 3 * n]
    # Every view is checked on loading.
    os.remove(sampled.chunk_path(0, 0, view=1))
    with pytest.raises(ValueError, match=r"damaged .*v001.*000000.bin is missing"):
        prepare_in(tmp_path / "sampled")
    with pytest.raises(ValueError, match="views must be positive. Received: 0"):
        SubwordSampling(alpha=0.1, views=0)
    with pytest.raises(ValueError, match=r"alpha must be in \(0, 1\]. Received: 2"):
        SubwordSampling(alpha=2, views=1)
