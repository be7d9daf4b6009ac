"""Teacher-forcing batches read from a prepared corpus, in bounded memory."""

from __future__ import annotations

import logging

import tensorflow as tf

from keras_transformer.data.batching import (
    BatchStats,
    _interleaved,
    _log,
    _pad_rows,
    _prefetched,
)
from keras_transformer.data.prepared import PreparedCorpus
from keras_transformer.token_ids import END_ID, PAD_ID, START_ID

logger = logging.getLogger(__name__)

SHUFFLE_BUFFER = 65536
"""Pairs of a bucket shuffled together, by default."""
_CHUNK_ORDER = 1 << 30  # folded into an epoch's seed for its chunk order
_DIRECTION = (1 << 30) + 1  # folded into a group's seed for its pairs' directions


def prepared_batches(
    prepared: PreparedCorpus,
    token_budget: int = 4096,
    seed: int = 0,
    epochs_from: int | None = None,
    shuffle_buffer: int = SHUFFLE_BUFFER,
    replicas: int = 1,
    with_stats: bool = False,
    bidirectional_epochs: int = 0,
) -> tf.data.Dataset | tuple[tf.data.Dataset, BatchStats]:
    """`make_batches`'s seeded batches, read from shards on disk.

    The batches are those `make_batches` describes (same buckets, batch
    sizes, teacher-forcing layout, `replicas` padding, and every kept pair
    exactly once per epoch), but the pairs stay on disk: an epoch reads
    each bucket's chunk files (`prepare_corpus`) in an order drawn from
    `(seed, epoch)`, `shuffle_buffer // chunk_rows` chunks at a time (at
    least one), and shuffles the pairs of those chunks together, so that
    memory holds at most `shuffle_buffer` pairs per bucket. The buckets'
    batches are interleaved in an order drawn from the same seed, as
    `make_batches` draws it.
    A corpus prepared with subword regularization (`SubwordSampling`) is
    read from view `epoch % prepared.views`: the same pairs in the same
    order every epoch would have, each segmented by that view's draw.

    All draws are stateless functions of `seed`, the epoch, the bucket and
    the group of chunks: the stream from epoch `e` is the stream from epoch
    0 without its first `e` epochs, and a resumed run reads the batches an
    uninterrupted one would (`stream.skip(n)`). A bucket that fits in the
    buffer is shuffled whole, by the very draw of `make_batches(...,
    seed=seed, epochs_from=...)`: for a corpus whose buckets all fit, the
    two give the same batches in the same order.

    Args:
        prepared: the shards (`prepare_corpus`).
        token_budget: token positions per batch in `source_ids` (and in
            `target_in`), padding included; at least `prepared.max_length`.
        seed: seed of the order.
        epochs_from: the endless stream of epochs from this one on; when
            None, epoch 0 alone, with its number of batches as cardinality.
        shuffle_buffer: pairs of a bucket shuffled together (rounded down
            to whole chunks, at least one).
        replicas: as in `make_batches`: batches of a multiple of `replicas`
            rows, the last one of each bucket padded with empty rows.
        with_stats: also return the `BatchStats`.
        bidirectional_epochs: epochs, from the first, whose pairs are read
            in a direction drawn at random (0: every pair as it is).

    Returns:
        A `tf.data.Dataset` of `((source_ids, target_in), target_out)`, all
        `int32` `(B, L)`; with `with_stats`, the pair `(dataset, stats)`.

    Raises:
        ValueError: `token_budget` is smaller than `max_length`, or
            `shuffle_buffer`, `replicas`, `epochs_from` or
            `bidirectional_epochs` is out of range.

    Example:
        >>> import tempfile
        >>> from keras_transformer.data import ParallelCorpus, Tokenizer
        >>> from keras_transformer.data.prepared import prepare_corpus
        >>> from keras_transformer.data.streams import stream_pairs
        >>> corpus = ParallelCorpus(("one two", "three"), ("eins zwei", "drei"))
        >>> tokenizer = Tokenizer.train(corpus, vocab_size=300)
        >>> prepared = prepare_corpus(
        ...     stream_pairs(corpus), tokenizer, tempfile.mkdtemp(), max_length=32
        ... )
        >>> batches, stats = prepared_batches(
        ...     prepared, token_budget=64, seed=0, with_stats=True
        ... )
        >>> stats.kept, stats.batches == int(batches.cardinality())
        (2, True)
        >>> sorted(
        ...     sentence
        ...     for _, target_out in batches
        ...     for sentence in tokenizer.detokenize(target_out).numpy()
        ... )
        [b'drei', b'eins zwei']
    """
    if token_budget < prepared.max_length:
        raise ValueError(
            "token_budget must hold at least one sequence of max_length tokens. "
            f"Received: token_budget={token_budget}, "
            f"max_length={prepared.max_length}"
        )
    if replicas < 1:
        raise ValueError(f"replicas must be positive. Received: {replicas}")
    if shuffle_buffer < 1:
        raise ValueError(f"shuffle_buffer must be positive. Received: {shuffle_buffer}")
    if epochs_from is not None and epochs_from < 0:
        raise ValueError(f"epochs_from must be >= 0. Received: {epochs_from}")
    if bidirectional_epochs < 0:
        raise ValueError(
            f"bidirectional_epochs must be >= 0. Received: {bidirectional_epochs}"
        )
    lengths = prepared.bucket_lengths
    batch_sizes = tuple(
        max(replicas, token_budget // length // replicas * replicas)
        for length in lengths
    )
    group = max(1, shuffle_buffer // prepared.chunk_rows)
    buckets = [  # (bucket, length, batch size, chunks), the non-empty ones
        (b, length, size, -(-count // prepared.chunk_rows))
        for b, (length, size, count) in enumerate(
            zip(lengths, batch_sizes, prepared.counts, strict=True)
        )
        if count
    ]
    batch_counts = [-(-prepared.counts[b] // size) for b, _, size, _ in buckets]
    stats = BatchStats(
        pairs=prepared.pairs,
        kept=prepared.kept,
        too_long=prepared.too_long,
        empty=prepared.empty,
        source_tokens=prepared.source_tokens,
        target_tokens=prepared.target_tokens,
        padded_tokens=sum(
            length * -(-prepared.counts[b] // replicas) * replicas
            for b, length, _, _ in buckets
        ),
        batches=sum(batch_counts),
        bucket_lengths=lengths,
        batch_sizes=batch_sizes,
    )
    # Every run that reads the shards says what they leave out, as
    # `make_batches` does, not only the run that wrote them.
    _log(stats, prepared.max_length, prepared.name)
    if prepared.skipped_empty:
        logger.warning(
            "%s: the reader left out %d pairs with an empty line",
            prepared.name,
            prepared.skipped_empty,
        )
    logger.info("%s: read from %s", prepared.name, prepared.path)
    dtype = tf.dtypes.as_dtype(prepared.dtype)

    def bucket_epoch(b, length, size, chunks, number):
        """Bucket `b`'s batches of epoch `number`: (B, 2L) rows as stored."""
        base = tf.stack([tf.constant(seed, tf.int64) + b, number])
        paths = tf.gather(  # of the epoch's view
            tf.constant(
                [
                    [prepared.chunk_path(b, i, view) for i in range(chunks)]
                    for view in range(prepared.views)
                ]
            ),
            number % prepared.views,
        )
        order = tf.range(chunks, dtype=tf.int64)
        if chunks > group:
            order = tf.random.experimental.stateless_shuffle(
                order, seed=tf.random.experimental.stateless_fold_in(base, _CHUNK_ORDER)
            )

        def read(index, ids):
            # The group's chunks, in file order: (rows, 2L).
            files = tf.gather(paths, tf.sort(ids))
            data = tf.strings.reduce_join(
                tf.map_fn(tf.io.read_file, files, fn_output_signature=tf.string)
            )
            rows = tf.reshape(tf.io.decode_raw(data, dtype), [-1, 2 * length])
            # The first group of an epoch is shuffled by (seed + b, epoch),
            # as `make_batches` shuffles a whole bucket.
            group_seed = tf.cond(
                index == 0,
                lambda: base,
                lambda: tf.random.experimental.stateless_fold_in(base, index),
            )
            permutation = tf.random.experimental.stateless_shuffle(
                tf.range(tf.shape(rows, out_type=tf.int64)[0]), seed=group_seed
            )
            rows = tf.gather(rows, permutation)
            if not bidirectional_epochs:
                return rows
            return tf.cond(
                number < bidirectional_epochs,
                lambda: either_way(rows, length, group_seed),
                lambda: rows,
            )

        return (
            tf.data.Dataset.from_tensor_slices(order)
            .batch(group)
            .enumerate()
            .map(read)
            .rebatch(size)
        )

    def either_way(rows, length, group_seed):
        """Rows `source_ids | target_out`, some turned `target_out | source_ids`."""
        turned = tf.random.stateless_uniform(
            tf.shape(rows)[:1],
            seed=tf.random.experimental.stateless_fold_in(group_seed, _DIRECTION),
            maxval=2,
            dtype=tf.int32,
        )
        reverse = tf.concat([rows[:, length:], rows[:, :length]], axis=1)
        return tf.where(turned[:, None] == 1, reverse, rows)

    def seeded_epoch(number):
        datasets = [
            bucket_epoch(b, length, size, chunks, number)
            for b, length, size, chunks in buckets
        ]
        return _interleaved(datasets, batch_counts, seed, number)

    def teacher_forcing(rows):
        rows = tf.cast(rows, tf.int32)
        length = tf.shape(rows)[1] // 2
        source_ids, target_out = rows[:, :length], rows[:, length:]
        # [START] + y: target_out shifted right, its end id dropped.
        shifted = target_out[:, :-1]
        shifted = tf.where(shifted == END_ID, tf.constant(PAD_ID, tf.int32), shifted)
        start = tf.fill(
            tf.stack([tf.shape(rows)[0], 1]), tf.constant(START_ID, tf.int32)
        )
        target_in = tf.concat([start, shifted], axis=1)
        return (
            (_pad_rows(source_ids, replicas), _pad_rows(target_in, replicas)),
            _pad_rows(target_out, replicas),
        )

    if epochs_from is None:
        dataset = seeded_epoch(tf.constant(0, tf.int64))
    else:
        dataset = tf.data.Dataset.counter(epochs_from).flat_map(seeded_epoch)
    dataset = dataset.map(teacher_forcing)
    if epochs_from is None:
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(stats.batches))
    return _prefetched(dataset, stats, with_stats)
