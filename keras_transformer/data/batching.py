"""Teacher-forcing batches, bucketed by length under a token budget."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from keras_transformer.data.corpus import ParallelCorpus
from keras_transformer.data.tokenizer import END_ID, PAD_ID, START_ID, Tokenizer

logger = logging.getLogger(__name__)

# Pairs are tokenized this many at a time (one TensorFlow op call per batch).
_TOKENIZE_BATCH = 1024
_MAX_SHUFFLE_BUFFER = 1 << 17


@dataclasses.dataclass(frozen=True)
class BatchStats:
    """What `make_batches` did with the pairs of one epoch (Python ints).

    Args:
        pairs: pairs received.
        kept: pairs in the batches, each exactly once per epoch.
        too_long: pairs dropped because `source_ids` or `target_in` would
            be longer than `max_length` tokens.
        empty: pairs dropped because the source or the target has no token.
        source_tokens: non-padding `source_ids` tokens in the kept pairs
            (each source plus its end id).
        target_tokens: non-padding `target_out` tokens (each target plus its
            end id).
        padded_tokens: token positions per epoch in the batches of
            `source_ids` and of `target_in` (each), padding included (and
            the empty rows added for `replicas`).
        batches: batches per epoch.
        bucket_lengths: padded length of each bucket.
        batch_sizes: number of pairs in a full batch of each bucket.

    Example:
        >>> stats = BatchStats(2, 2, 0, 0, 5, 7, 16, 1, (8,), (2,))
        >>> stats.source_tokens + stats.target_tokens
        12
    """

    pairs: int
    kept: int
    too_long: int
    empty: int
    source_tokens: int
    target_tokens: int
    padded_tokens: int
    batches: int
    bucket_lengths: tuple[int, ...]
    batch_sizes: tuple[int, ...]


def default_bucket_lengths(max_length: int) -> tuple[int, ...]:
    """Padded lengths of the buckets used when `boundaries` is None.

    From 8, steps of a quarter of the current power of two (at least 4):
    8, 12, ..., 32, 40, ..., 64, 80, ..., 128, 160, ..., ending at
    `max_length`. A padded sequence is thus at most a quarter padding
    (lengths 9-12 in bucket 12), and typically about a tenth. The number of
    buckets stays small (15 up to 128), and `keras.Model.fit` reads batches
    through a dataset iterator, so their shapes do not cause retracing.

    Args:
        max_length: the longest sequence kept.

    Returns:
        Increasing lengths, the last one `max_length`.

    Example:
        >>> default_bucket_lengths(128)
        (8, 12, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112, 128)
        >>> default_bucket_lengths(50)
        (8, 12, 16, 20, 24, 28, 32, 40, 48, 50)
    """
    lengths = []
    length = 8
    while length < max_length:
        lengths.append(length)
        power = 1 << (length.bit_length() - 1)  # largest power of 2 <= length
        length += max(4, power // 4)
    lengths.append(max_length)
    return tuple(lengths)


def make_batches(
    pairs: tf.data.Dataset | ParallelCorpus,
    tokenizer: Tokenizer,
    max_length: int = 128,
    token_budget: int = 4096,
    boundaries: Sequence[int] | None = None,
    shuffle: bool = True,
    shuffle_buffer: int | None = None,
    seed: int | None = None,
    cache: bool = True,
    with_stats: bool = False,
    epochs_from: int | None = None,
    replicas: int = 1,
) -> tf.data.Dataset | tuple[tf.data.Dataset, BatchStats]:
    """Teacher-forcing batches, bucketed by length under a token budget.

    Each pair `(x, y)` of token lists becomes `source_ids = x + [END]`,
    `target_in = [START] + y` and `target_out = y + [END]` (docs/design.md;
    the source ends with the end id, as `decoding.Translator` gives it at
    inference). A pair goes to the bucket of the smallest length `L` in
    `boundaries` with `max(len(x), len(y)) + 1 <= L` and is padded with 0
    to exactly `L`; a bucket's batches hold `token_budget // L` pairs, so
    every batch has at most `token_budget` token positions in `source_ids`
    and as many in `target_in` (the paper used about 25000 each). Batches
    thus come in a few fixed shapes: one per bucket, plus the last, smaller
    batch of each bucket in an epoch.

    The pairs are tokenized once, when this function is called, and kept in
    memory padded to their bucket length: three `int32` matrices, 12 bytes
    per padded position (about 7 MB for Multi30k, gigabytes for WMT). Pairs
    whose `source_ids` or `target_in` would exceed `max_length` tokens, and
    pairs with an empty side, are dropped and counted: the counts are logged
    as a warning and returned in `BatchStats` with `with_stats=True`. Every
    other pair is in exactly one batch per epoch. With `shuffle`, each epoch
    shuffles the pairs within each bucket and interleaves the buckets'
    batches at random.

    Args:
        pairs: `(source, target)` `tf.string` scalar pairs (any loader of
            this package) or a `ParallelCorpus`.
        tokenizer: a `Tokenizer` (or anything with the same `tokenize`).
        max_length: longest `source_ids` and `target_in` kept, in tokens.
        token_budget: token positions per batch in `source_ids` (and in
            `target_in`), padding included; at least `max_length`.
        boundaries: padded lengths of the buckets; lengths above
            `max_length` are ignored and `max_length` is always one. When
            None, `default_bucket_lengths(max_length)`.
        shuffle: reshuffle every epoch.
        shuffle_buffer: cap on each bucket's shuffle buffer; when None, each
            bucket is shuffled completely.
        seed: seed of the shuffles, for reproducible epochs.
        cache: when not shuffling (e.g. validation), keep the padded batches
            in memory after the first epoch. The tokenized pairs are always
            kept.
        with_stats: also return the `BatchStats`.
        epochs_from: instead of one epoch, the endless stream of epochs
            from this one on, each shuffled by a seed made of `seed` and its
            number: the stream from epoch `e` is the stream from epoch 0
            without its first `e` epochs, so a resumed run reads exactly the
            batches an uninterrupted one would (`stream.skip(n)` from inside
            an epoch). Needs `shuffle` and `seed`.
        replicas: the number of replicas each batch is split between
            (`strategy.num_replicas_in_sync`). Every batch then has a
            multiple of `replicas` rows, so that each replica gets a part of
            the same shape (Keras averages the replicas' first batches of
            each `fit` and `evaluate`, which fails on parts of different
            shapes): full batches hold the largest multiple of `replicas`
            pairs within the budget (at least `replicas`), and each bucket's
            last batch is padded with empty rows (all `PAD_ID`), which the
            masked loss and metrics leave out.

    Returns:
        A `tf.data.Dataset` of `((source_ids, target_in), target_out)`, all
        `int32` `(B, L)`, with 0 padding, whose cardinality is the number of
        batches per epoch (infinite with `epochs_from`); with `with_stats`,
        the pair `(dataset, stats)`.

    Raises:
        ValueError: `token_budget` is smaller than `max_length`, a bucket
            length is not positive, or no pair is left.

    Example:
        >>> corpus = ParallelCorpus(("one two", "three"), ("eins zwei", "drei"))
        >>> tokenizer = Tokenizer.train(corpus, vocab_size=300)
        >>> batches, stats = make_batches(
        ...     corpus, tokenizer, max_length=32, token_budget=64, with_stats=True
        ... )
        >>> stats.kept, stats.too_long
        (2, 0)
        >>> (source_ids, target_in), target_out = next(iter(batches))
        >>> source_ids.shape[1] in stats.bucket_lengths
        True
        >>> bool(tf.reduce_all(target_in[:, 0] == START_ID))
        True
        >>> sorted(
        ...     sentence
        ...     for _, target_out in batches
        ...     for sentence in tokenizer.detokenize(target_out).numpy()
        ... )
        [b'drei', b'eins zwei']
    """
    if max_length < 1:
        raise ValueError(f"max_length must be positive. Received: {max_length}")
    if epochs_from is not None and (not shuffle or seed is None or epochs_from < 0):
        raise ValueError(
            "epochs_from needs shuffle=True, a seed and a number >= 0. Received: "
            f"epochs_from={epochs_from}, shuffle={shuffle}, seed={seed}"
        )
    if token_budget < max_length:
        raise ValueError(
            "token_budget must hold at least one sequence of max_length tokens. "
            f"Received: token_budget={token_budget}, max_length={max_length}"
        )
    bucket_lengths = _bucket_lengths(max_length, boundaries)
    if replicas < 1:
        raise ValueError(f"replicas must be positive. Received: {replicas}")
    batch_sizes = tuple(
        max(replicas, token_budget // length // replicas * replicas)
        for length in bucket_lengths
    )

    source, target = _tokenize_all(pairs, tokenizer)
    # (N,) token counts of x and y; the tensors have one id more each.
    source_lengths = np.diff(source.row_splits.numpy())
    target_lengths = np.diff(target.row_splits.numpy())
    empty = (source_lengths == 0) | (target_lengths == 0)
    lengths = np.maximum(source_lengths, target_lengths) + 1
    too_long = ~empty & (lengths > max_length)
    kept = ~empty & ~too_long
    # Bucket of each pair: the first bucket length >= its length.
    bucket_of = np.searchsorted(np.asarray(bucket_lengths), lengths, side="left")

    # (N, None) each: x + [END], [START] + y, y + [END].
    source_ids = tf.concat([source, _column(source.nrows(), END_ID)], axis=1)
    target_in = tf.concat([_column(target.nrows(), START_ID), target], axis=1)
    target_out = tf.concat([target, _column(target.nrows(), END_ID)], axis=1)

    padded_buckets = []  # (bucket, batch size, (source_ids, target_in, target_out))
    batch_counts = []
    padded_tokens = 0
    for bucket, (length, size) in enumerate(
        zip(bucket_lengths, batch_sizes, strict=True)
    ):
        indices = np.flatnonzero(kept & (bucket_of == bucket))
        if indices.size == 0:
            continue
        # The bucket's pairs, padded once: three (n, L) tensors. An epoch
        # then only shuffles row numbers and gathers rows, one op per batch.
        padded = tuple(
            tf.gather(ids, indices).to_tensor(
                default_value=PAD_ID, shape=[indices.size, length]
            )
            for ids in (source_ids, target_in, target_out)
        )
        padded_buckets.append((bucket, size, padded))
        batch_counts.append(-(-indices.size // size))
        padded_tokens += length * -(-indices.size // replicas) * replicas

    stats = BatchStats(
        pairs=int(source_lengths.size),
        kept=int(kept.sum()),
        too_long=int(too_long.sum()),
        empty=int(empty.sum()),
        source_tokens=int((source_lengths[kept] + 1).sum()),
        target_tokens=int((target_lengths[kept] + 1).sum()),
        padded_tokens=padded_tokens,
        batches=int(sum(batch_counts)),
        bucket_lengths=bucket_lengths,
        batch_sizes=batch_sizes,
    )
    _log(stats, max_length, getattr(pairs, "name", ""))

    if not padded_buckets:
        raise ValueError(
            f"No pair left to batch: {stats.pairs} pairs, {stats.too_long} "
            f"longer than max_length={max_length}, {stats.empty} empty"
        )

    def epoch(epoch_seed, reshuffle):
        """One epoch's batches, reshuffled at every iteration."""
        buckets = []
        for bucket, size, padded in padded_buckets:
            rows = tf.data.Dataset.range(padded[0].shape[0])
            if shuffle:
                rows = rows.shuffle(
                    min(padded[0].shape[0], shuffle_buffer or padded[0].shape[0]),
                    seed=None if epoch_seed is None else epoch_seed + bucket,
                    reshuffle_each_iteration=reshuffle,
                )
            buckets.append(
                rows.batch(size).map(
                    lambda rows, padded=padded: tuple(
                        tf.gather(ids, rows) for ids in padded
                    ),
                    num_parallel_calls=tf.data.AUTOTUNE,
                    deterministic=True,
                )
            )
        if shuffle and len(buckets) > 1:
            # Buckets are drawn in proportion to their batches, so they tend
            # to run out together; the draw changes every epoch.
            return tf.data.Dataset.sample_from_datasets(
                buckets,
                weights=[count / sum(batch_counts) for count in batch_counts],
                seed=epoch_seed,
                stop_on_empty_dataset=False,
                rerandomize_each_iteration=reshuffle,
            )
        dataset = buckets[0]
        for batches in buckets[1:]:
            dataset = dataset.concatenate(batches)
        return dataset

    def seeded_epoch(number):
        """Epoch `number`, shuffled by stateless ops seeded by (seed, number)."""
        buckets = []
        for bucket, size, padded in padded_buckets:
            order = tf.random.experimental.stateless_shuffle(
                tf.range(padded[0].shape[0], dtype=tf.int64),
                seed=tf.stack([tf.constant(seed, tf.int64) + bucket, number]),
            )
            buckets.append(
                tf.data.Dataset.from_tensor_slices(order)
                .batch(size)
                .map(
                    lambda rows, padded=padded: tuple(
                        tf.gather(ids, rows) for ids in padded
                    )
                )
            )
        return _interleaved(buckets, batch_counts, seed, number)

    if epochs_from is None:
        dataset = epoch(seed, reshuffle=True)
    else:
        # Epoch e is shuffled by seeds made of `seed` and e alone, so the
        # stream from any epoch is the same as from the first one.
        dataset = tf.data.Dataset.counter(epochs_from).flat_map(seeded_epoch)
    dataset = dataset.map(
        lambda source_ids, target_in, target_out: (
            (_pad_rows(source_ids, replicas), _pad_rows(target_in, replicas)),
            _pad_rows(target_out, replicas),
        )
    )
    if epochs_from is None:
        # The exact number of batches, so that Keras knows the epoch's length.
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(stats.batches))
    if cache and not shuffle:
        dataset = dataset.cache()
    return _prefetched(dataset, stats, with_stats)


def _bucket_lengths(max_length: int, boundaries: Sequence[int] | None) -> tuple:
    """The buckets' padded lengths: `boundaries` below `max_length`, and it."""
    if boundaries is None:
        return default_bucket_lengths(max_length)
    if any(int(length) < 1 for length in boundaries):
        raise ValueError(
            f"Bucket lengths must be positive. Received: {list(boundaries)}"
        )
    return tuple(sorted({int(b) for b in boundaries if b < max_length} | {max_length}))


def _prefetched(dataset: tf.data.Dataset, stats: BatchStats, with_stats: bool):
    """`dataset` prefetching two batches, without autotuning (and `stats`)."""
    dataset = dataset.prefetch(2)
    # No tf.data autotuning: its thread can hold up the deletion of a
    # finished iterator, which `fit` does at the end of every epoch, for
    # seconds (14 s at one epoch end of the demo). The work is light (a
    # gather from tensors in memory, or reading shards), needing no tuning.
    options = tf.data.Options()
    options.autotune.enabled = False
    dataset = dataset.with_options(options)
    if with_stats:
        return dataset, stats
    return dataset


def _interleaved(
    buckets: list, batch_counts: Sequence[int], seed: int, number
) -> tf.data.Dataset:
    """Epoch `number`'s batches: each bucket's own, in an order drawn from
    (seed - 1, number), so that every reader of the buckets agrees on it."""
    choices = tf.random.experimental.stateless_shuffle(
        tf.repeat(
            tf.range(len(buckets), dtype=tf.int64),
            tf.constant(batch_counts, tf.int64),
        ),
        seed=tf.stack([tf.constant(seed, tf.int64) - 1, number]),
    )
    return tf.data.Dataset.choose_from_datasets(
        buckets, tf.data.Dataset.from_tensor_slices(choices)
    )


def _pad_rows(ids: tf.Tensor, multiple: int) -> tf.Tensor:
    """`ids` with empty rows (all `PAD_ID`) up to a multiple of `multiple` rows."""
    if multiple == 1:
        return ids
    missing = -tf.shape(ids)[0] % multiple
    return tf.pad(ids, [[0, missing], [0, 0]], constant_values=PAD_ID)


def _column(rows: tf.Tensor, value: int) -> tf.Tensor:
    """A `(rows, 1)` int32 column of `value`."""
    return tf.fill(tf.stack([rows, 1]), tf.constant(value, tf.int32))


def _tokenize_all(
    pairs: tf.data.Dataset | ParallelCorpus, tokenizer: Tokenizer
) -> tuple[tf.RaggedTensor, tf.RaggedTensor]:
    """Tokenizes every pair eagerly: two `(N, None)` int32 ragged tensors."""
    if isinstance(pairs, ParallelCorpus):
        pairs = pairs.dataset()
    tokenized = pairs.batch(_TOKENIZE_BATCH).map(
        lambda sources, targets: (
            tf.cast(tokenizer.tokenize(sources), tf.int32),
            tf.cast(tokenizer.tokenize(targets), tf.int32),
        ),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    parts = ([], [], [], [])
    for source_ids, target_ids in tokenized:
        for part, tensor in zip(
            parts,
            (
                source_ids.flat_values,
                source_ids.row_lengths(),
                target_ids.flat_values,
                target_ids.row_lengths(),
            ),
            strict=True,
        ):
            part.append(tensor.numpy())
    if not parts[0]:
        parts = tuple([np.zeros([0], dtype)] for dtype in (np.int32, np.int64) * 2)
    source = tf.RaggedTensor.from_row_lengths(
        np.concatenate(parts[0]), np.concatenate(parts[1])
    )
    target = tf.RaggedTensor.from_row_lengths(
        np.concatenate(parts[2]), np.concatenate(parts[3])
    )
    return source, target


def _log(stats: BatchStats, max_length: int, name: str) -> None:
    label = f"{name}: " if name else ""
    if stats.too_long:
        logger.warning(
            "%sdropped %d of %d pairs longer than max_length=%d tokens",
            label,
            stats.too_long,
            stats.pairs,
            max_length,
        )
    if stats.empty:
        logger.warning(
            "%sdropped %d of %d pairs with an empty source or target",
            label,
            stats.empty,
            stats.pairs,
        )
    logger.info(
        "%s%d pairs in %d batches per epoch (buckets %s)",
        label,
        stats.kept,
        stats.batches,
        stats.bucket_lengths,
    )
