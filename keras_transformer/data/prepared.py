"""Tokenized pairs in length-bucketed shards on disk, prepared once and reused.

`prepare_corpus` reads a `PairStream` once, tokenizes it in parallel
batches and writes each length bucket's pairs, padded to the bucket's
length, into chunk files of `chunk_rows` pairs: plain little-endian arrays
(`uint16` ids when the vocabulary allows, else `int32`), each row the
bucket's `source_ids` then its `target_out` (docs/design.md). fairseq
binarizes a corpus once in the same spirit; the chunks are small files so
that `prepared_batches` reads any of them, in any order, with one
`tf.io.read_file`.

With subword regularization (`SubwordSampling`), the corpus is written
`views` times, each pair segmented by another draw (`Tokenizer.
tokenize_sampled`), view `v` under `v{v:03d}/`. A pair is in the bucket of
its best segmentation, at the same place, in every view (each draw is from
the segmentations that fit that bucket), so that every view gives an epoch
the same batches as the corpus prepared without sampling.

The directory is named by a hash of what it is made of: the stream's
identity (the files' SHA-256 sums, a TFDS name, version and split), the
tokenizer's model, `max_length`, the bucket lengths and `chunk_rows`. A
change of any of them names another directory, so a stale one is never
read; `prepared.json` inside repeats the identity, and is checked on
reading. The directory is written under a temporary name and renamed when
complete: a killed preparation leaves no directory that would be taken for a
finished one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import logging
import os
import re
import shutil
import socket
import time
from collections.abc import Sequence

import numpy as np
import tensorflow as tf
import tqdm

from keras_transformer.data.batching import _bucket_lengths
from keras_transformer.data.streams import PairStream
from keras_transformer.token_ids import END_ID

logger = logging.getLogger(__name__)

FORMAT = 1
"""Version of the layout; part of the identity."""
META_FILE = "prepared.json"
CHUNK_ROWS = 4096
"""Pairs per chunk file, by default."""
_TOKENIZE_BATCH = 4096
_WAIT_LOG_SECONDS = 60.0
# How long a worker waits for the chief's shards (or tokenizer) before it
# gives up: a chief that failed writes nothing, and says why in its own log.
WAIT_SECONDS = 3600.0


@dataclasses.dataclass(frozen=True)
class SubwordSampling:
    """Subword regularization of a prepared corpus: `views` sampled copies.

    Args:
        alpha: `Tokenizer.tokenize_sampled`'s smoothing, in `(0, 1]`.
        views: segmentations drawn per pair; epoch `e` reads view
            `e % views` (`prepared_batches`).
        seed: seed of the draws.

    Example:
        >>> SubwordSampling(alpha=0.1, views=16, seed=0).identity()
        {'alpha': 0.1, 'views': 16, 'seed': 0}
    """

    alpha: float
    views: int
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.alpha <= 1:
            raise ValueError(f"alpha must be in (0, 1]. Received: {self.alpha}")
        if self.views < 1:
            raise ValueError(f"views must be positive. Received: {self.views}")

    def identity(self) -> dict:
        """Plain data, for `prepared_identity`."""
        return {"alpha": float(self.alpha), "views": int(self.views), "seed": self.seed}


class NoPairsError(ValueError):
    """A stream left no pair to batch; `pairs` says how many it held."""

    def __init__(self, message: str, pairs: int) -> None:
        super().__init__(message)
        self.pairs = pairs


@dataclasses.dataclass(frozen=True)
class PreparedCorpus:
    """A prepared directory's description, as `prepared.json` holds it.

    Args:
        path: the directory.
        name: the stream's name.
        identity: what the shards are made of (see the module docstring).
        bucket_lengths: padded length of each bucket.
        counts: pairs in each bucket.
        chunk_rows: pairs per chunk file (the last of a bucket has fewer).
        dtype: `"uint16"` or `"int32"`, the ids' type on disk.
        pairs: pairs tokenized.
        kept: pairs in the buckets (`sum(counts)`).
        too_long: pairs left out as longer than `max_length`.
        empty: pairs left out with a side of no token.
        skipped_empty: pairs the reader left out, empty or only
            whitespace on a side (not in `pairs`).
        source_tokens: `source_ids` tokens of the kept pairs, end ids
            included (the mean over the views, rounded).
        target_tokens: `target_out` tokens of the kept pairs (the same).
        max_length: the longest `source_ids` and `target_in` kept.
        views: segmentations of each pair (`SubwordSampling.views`; 1
            without subword regularization).

    Example:
        >>> import tempfile
        >>> from keras_transformer.data import ParallelCorpus, Tokenizer
        >>> from keras_transformer.data.streams import stream_pairs
        >>> corpus = ParallelCorpus(("one two", "three"), ("eins zwei", "drei"))
        >>> tokenizer = Tokenizer.train(corpus, vocab_size=300)
        >>> prepared = prepare_corpus(
        ...     stream_pairs(corpus), tokenizer, tempfile.mkdtemp(), max_length=16
        ... )
        >>> prepared.kept, sum(prepared.counts), prepared.dtype
        (2, 2, 'uint16')
        >>> PreparedCorpus.load(prepared.path) == prepared
        True
    """

    path: str
    name: str
    identity: dict
    bucket_lengths: tuple[int, ...]
    counts: tuple[int, ...]
    chunk_rows: int
    dtype: str
    pairs: int
    kept: int
    too_long: int
    empty: int
    skipped_empty: int
    source_tokens: int
    target_tokens: int
    max_length: int
    views: int = 1

    def chunk_counts(self) -> tuple[int, ...]:
        """The number of chunk files of each bucket."""
        return tuple(-(-count // self.chunk_rows) for count in self.counts)

    def chunk_path(self, bucket: int, index: int, view: int = 0) -> str:
        """The file of chunk `index` of bucket `bucket` (of view `view`)."""
        return os.path.join(
            _bucket_dir(self.path, view, self.views, bucket), f"{index:06d}.bin"
        )

    @classmethod
    def load(cls, path: str | os.PathLike) -> PreparedCorpus:
        """Reads `prepared.json`, and checks every chunk file is there, whole.

        Raises:
            FileNotFoundError: no `prepared.json` in `path`.
            ValueError: a chunk file is missing or of the wrong size, or the
                description is not of this version's format.
        """
        path = os.fspath(path)
        with open(os.path.join(path, META_FILE), encoding="utf-8") as f:
            meta = json.load(f)
        if meta.get("identity", {}).get("format") != FORMAT:
            raise ValueError(f"{path}: not a prepared corpus of format {FORMAT}")
        fields = {field.name for field in dataclasses.fields(cls)} - {"path"}
        prepared = cls(
            path=path,
            **{
                key: tuple(value) if isinstance(value, list) else value
                for key, value in meta.items()
                if key in fields and key != "identity"
            },
            identity=meta["identity"],
        )
        itemsize = np.dtype(prepared.dtype).itemsize
        for bucket, (count, length) in enumerate(
            zip(prepared.counts, prepared.bucket_lengths, strict=True)
        ):
            for index, view in itertools.product(
                range(-(-count // prepared.chunk_rows)), range(prepared.views)
            ):
                rows = min(prepared.chunk_rows, count - index * prepared.chunk_rows)
                chunk = prepared.chunk_path(bucket, index, view)
                size = os.path.getsize(chunk) if os.path.exists(chunk) else None
                if size != rows * 2 * length * itemsize:
                    raise ValueError(
                        f"{path}: the prepared corpus is damaged ({chunk} is "
                        f"{'missing' if size is None else f'{size} bytes'}); "
                        "remove the directory to prepare it again"
                    )
        return prepared


def prepared_identity(
    stream: PairStream,
    tokenizer,
    max_length: int,
    bucket_lengths: Sequence[int],
    chunk_rows: int,
    sampling: SubwordSampling | None = None,
) -> dict:
    """What a prepared directory is made of (plain data; hashed into its name).

    A tokenizer is identified by the SHA-256 of its `model_proto`; one
    without (a test double) by its class name. `sampling` is named only
    when given.

    Example:
        >>> from keras_transformer.data import ParallelCorpus
        >>> from keras_transformer.data.streams import stream_pairs
        >>> stream = stream_pairs(ParallelCorpus(("a",), ("b",)))
        >>> sorted(prepared_identity(stream, None, 8, (8,), 16))[:3]
        ['bucket_lengths', 'chunk_rows', 'corpus']
    """
    proto = getattr(tokenizer, "model_proto", None)
    identity = {
        "format": FORMAT,
        "corpus": stream.identity,
        "tokenizer": (
            hashlib.sha256(proto).hexdigest()
            if proto is not None
            else type(tokenizer).__qualname__
        ),
        "max_length": int(max_length),
        "bucket_lengths": [int(length) for length in bucket_lengths],
        "chunk_rows": int(chunk_rows),
    }
    if sampling is not None:
        identity["sampling"] = sampling.identity()
    return identity


def identity_key(identity: dict) -> str:
    """A short hash of plain data, for directory names.

    Example:
        >>> identity_key({"a": 1}) == identity_key({"a": 1})
        True
        >>> len(identity_key({"a": 1}))
        16
    """
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def prepared_path(root: str | os.PathLike, name: str, identity: dict) -> str:
    """`root/NAME-KEY`: where the corpus of `identity` is prepared."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")[:60] or "corpus"
    return os.path.join(os.fspath(root), f"{safe}-{identity_key(identity)}")


def prepare_corpus(
    stream: PairStream,
    tokenizer,
    root: str | os.PathLike,
    max_length: int = 128,
    boundaries: Sequence[int] | None = None,
    chunk_rows: int = CHUNK_ROWS,
    write: bool = True,
    poll_seconds: float = 1.0,
    sampling: SubwordSampling | None = None,
) -> PreparedCorpus:
    """Tokenizes a stream once into bucketed shards under `root`, or reuses them.

    The pairs are read in batches and tokenized in parallel; each kept pair
    (`source_ids = x + [END]`, `target_out = y + [END]`, as `make_batches`
    makes them) goes to the bucket of the smallest length `L` with
    `max(len(x), len(y)) + 1 <= L`, padded with 0 to `L`. Pairs with a side
    of no token, or longer than `max_length`, are left out and counted,
    with a warning. Memory holds one read batch and at most `chunk_rows`
    pairs per bucket, whatever the size of the corpus.

    When the directory for this stream, tokenizer and layout exists, it is
    read instead (nothing is tokenized). With `write=False` (the workers of
    a multi-worker run other than the chief), this waits for another
    process to write it.

    Args:
        stream: the pairs (`stream_parallel_files`, `stream_pairs`).
        tokenizer: a `Tokenizer` (or anything with `tokenize`).
        root: the directory that holds prepared corpora; created if needed.
        max_length: longest `source_ids` and `target_in` kept, in tokens.
        boundaries: bucket lengths (`make_batches`'s); when None,
            `default_bucket_lengths(max_length)`.
        chunk_rows: pairs per chunk file.
        write: prepare the corpus if it is missing; else wait for it.
        poll_seconds: how often a waiting process looks for it.
        sampling: write `sampling.views` sampled segmentations of the
            pairs instead of their best one (see the module docstring).

    Returns:
        The `PreparedCorpus`.

    Raises:
        ValueError: the stream's errors (see `PairStream.iterate`), no pair
            in the stream, an id too large for the ids' type, or a
            directory of this name that describes other data.
    """
    if max_length < 1:
        raise ValueError(f"max_length must be positive. Received: {max_length}")
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be positive. Received: {chunk_rows}")
    bucket_lengths = _bucket_lengths(max_length, boundaries)
    identity = prepared_identity(
        stream, tokenizer, max_length, bucket_lengths, chunk_rows, sampling
    )
    path = prepared_path(root, stream.name, identity)
    if not os.path.exists(os.path.join(path, META_FILE)):
        if not write:
            _wait_for(path, poll_seconds)
        else:
            _write(
                stream, tokenizer, path, identity, bucket_lengths, chunk_rows, sampling
            )
    else:
        logger.info("Reusing the prepared corpus %s", path)
    prepared = PreparedCorpus.load(path)
    if prepared.identity != identity:
        raise ValueError(
            f"{path}: describes other data than its name says; remove it to "
            "prepare the corpus again"
        )
    return prepared


def _wait_for(path: str, poll_seconds: float) -> None:
    wait_for_file(os.path.join(path, META_FILE), "prepare", poll_seconds)


def wait_for_file(path: str, what: str, poll_seconds: float = 1.0) -> None:
    """Waits until `path` exists, written by the chief (worker 0).

    Raises:
        TimeoutError: after `WAIT_SECONDS`, naming the file: the chief
            failed, or writes where this worker does not read.
    """
    start = last_log = time.monotonic()
    logger.info("Waiting for the chief to %s %s", what, path)
    while not os.path.exists(path):
        now = time.monotonic()
        if now - start > WAIT_SECONDS:
            raise TimeoutError(
                f"{path}: not there after {now - start:.0f} s of waiting for the "
                f"chief to {what} it; see the chief's log (did it fail? is "
                "data.prepared_dir shared by every worker?)"
            )
        time.sleep(poll_seconds)
        if time.monotonic() - last_log > _WAIT_LOG_SECONDS:
            last_log = time.monotonic()
            logger.info("Still waiting for %s (%.0f s)", path, last_log - start)


def _write(
    stream, tokenizer, path, identity, bucket_lengths, chunk_rows, sampling
) -> None:
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    _remove_stale_temporaries(path)
    temporary = f"{path}.tmp-{socket.gethostname()}-{os.getpid()}"
    shutil.rmtree(temporary, ignore_errors=True)
    os.makedirs(temporary)
    try:
        meta = _write_shards(
            stream, tokenizer, temporary, identity, bucket_lengths, chunk_rows, sampling
        )
        with open(os.path.join(temporary, META_FILE), "w", encoding="utf-8") as f:
            json.dump(meta, f, indent=1)
            f.write("\n")
        try:
            os.rename(temporary, path)
        except OSError:
            if not os.path.exists(os.path.join(path, META_FILE)):
                raise
            # Another process prepared the same corpus meanwhile: the same
            # content, by its name.
            shutil.rmtree(temporary)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise


def _remove_stale_temporaries(path: str) -> None:
    """Removes what a killed preparation of `path` on this host left."""
    prefix = f"{os.path.basename(path)}.tmp-{socket.gethostname()}-"
    parent = os.path.dirname(path)
    for entry in os.listdir(parent):
        if not entry.startswith(prefix):
            continue
        pid = entry[len(prefix) :]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(os.path.join(parent, entry), ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class _Bucket:
    """One bucket's pending rows, written out in chunks of `chunk_rows`."""

    def __init__(self, directory: str, chunk_rows: int) -> None:
        self.directory, self.chunk_rows = directory, chunk_rows
        self.pending: list[np.ndarray] = []
        self.pending_rows = self.count = self.chunks = 0

    def add(self, rows: np.ndarray) -> None:
        self.pending.append(rows)
        self.pending_rows += len(rows)
        self.count += len(rows)
        if self.pending_rows >= self.chunk_rows:
            rows = np.concatenate(self.pending)
            whole = len(rows) // self.chunk_rows * self.chunk_rows
            for start in range(0, whole, self.chunk_rows):
                self._write(rows[start : start + self.chunk_rows])
            self.pending = [rows[whole:]] if whole < len(rows) else []
            self.pending_rows = len(rows) - whole

    def close(self) -> None:
        if self.pending_rows:
            self._write(np.concatenate(self.pending))
        self.pending, self.pending_rows = [], 0

    def _write(self, rows: np.ndarray) -> None:
        os.makedirs(self.directory, exist_ok=True)
        name = os.path.join(self.directory, f"{self.chunks:06d}.bin")
        with open(name, "wb") as f:
            f.write(rows.astype(rows.dtype.newbyteorder("<"), copy=False).tobytes())
        self.chunks += 1


def _view_dir(path: str, view: int, views: int) -> str:
    """Where view `view`'s buckets are: `path` itself when there is one view."""
    return path if views == 1 else os.path.join(path, f"v{view:03d}")


def _bucket_dir(path: str, view: int, views: int, bucket: int) -> str:
    return os.path.join(_view_dir(path, view, views), f"b{bucket:02d}")


def _sampled(tokenizer, sampling: SubwordSampling):
    """`(strings, longest, view, side) -> ids`: `tokenize_sampled`'s draws as
    a ragged `int32` tensor, seeded by `sampling.seed`, the view, the side
    and the sentences (the batches are tokenized in parallel: each draw is
    the same whichever thread makes it)."""

    def draw(strings, longest, view, side):
        digest = hashlib.sha256(
            b"\0".join([f"{sampling.seed}/{view}/{side}".encode(), *strings])
        ).digest()
        ids = tokenizer.tokenize_sampled(
            list(strings),
            sampling.alpha,
            int.from_bytes(digest[:4], "little"),
            longest=longest.tolist(),
        )
        flat = np.fromiter(itertools.chain.from_iterable(ids), np.int32)
        return flat, np.array([len(row) for row in ids], np.int64)

    def sampled(strings, longest, view, side):
        flat, lengths = tf.numpy_function(
            lambda s, n: draw(s, n, view, side),
            [strings, longest],
            [tf.int32, tf.int64],
        )
        flat.set_shape([None])
        lengths.set_shape([None])
        return tf.RaggedTensor.from_row_lengths(flat, lengths)

    return sampled


def _write_shards(
    stream, tokenizer, directory, identity, bucket_lengths, chunk_rows, sampling
):
    max_length = identity["max_length"]
    vocab_size = getattr(tokenizer, "vocab_size", None)
    dtype = np.dtype("uint16" if vocab_size and vocab_size <= 1 << 16 else "int32")
    limit = np.iinfo(dtype).max
    views = sampling.views if sampling is not None else 1
    buckets = [  # [view][bucket]
        [
            _Bucket(_bucket_dir(directory, v, views, b), chunk_rows)
            for b in range(len(bucket_lengths))
        ]
        for v in range(views)
    ]
    sampled = _sampled(tokenizer, sampling) if sampling is not None else None
    tf_lengths = tf.constant(bucket_lengths, tf.int64)

    def tokenize(sources, targets):
        """One batch, in its buckets' rows: all in TensorFlow, in parallel."""
        source = tf.cast(tokenizer.tokenize(sources), tf.int32)
        target = tf.cast(tokenizer.tokenize(targets), tf.int32)
        source_len, target_len = source.row_lengths(), target.row_lengths()
        empty = (source_len == 0) | (target_len == 0)
        need = tf.maximum(source_len, target_len) + 1
        too_long = ~empty & (need > max_length)
        kept = ~empty & ~too_long
        pairs = [(source, target)]
        if sampled is not None:
            # Each view's draws fit the bucket of the best segmentation.
            fits = tf.gather(
                tf_lengths,
                tf.minimum(tf.searchsorted(tf_lengths, need), len(bucket_lengths) - 1),
            )
            longest = tf.maximum(fits - 1, 0)
            pairs = [
                (sampled(sources, longest, v, 0), sampled(targets, longest, v, 1))
                for v in range(sampling.views)
            ]
        # The kept pairs, by bucket (stable: in corpus order within one).
        bucket = tf.searchsorted(tf_lengths, tf.boolean_mask(need, kept))
        order = tf.argsort(bucket, stable=True)
        bucket = tf.gather(bucket, order)
        length = tf.gather(tf_lengths, bucket)  # (K,) each row's L
        end = tf.fill(tf.stack([tf.size(empty), 1]), tf.constant(END_ID, tf.int32))
        width = tf.reduce_max(tf.concat([length, [1]], 0))
        mask = tf.sequence_mask(length, width)

        def rows(ids):
            """The kept pairs' ids + [END], by bucket, padded to `width`."""
            return tf.gather(
                tf.ragged.boolean_mask(tf.concat([ids, end], 1), kept), order
            ).to_tensor(shape=tf.stack([tf.size(order, tf.int64), width]))

        # Per view, row k: source_ids[:L_k] then target_out[:L_k], flat.
        flat = tf.stack(
            [
                tf.boolean_mask(
                    tf.concat([rows(s), rows(t)], 1), tf.concat([mask, mask], 1)
                )
                for s, t in pairs
            ]
        )
        tokens = [
            tf.reduce_sum(tf.boolean_mask(ids.row_lengths() + 1, kept))
            for pair in pairs
            for ids in pair
        ]
        return {
            "flat": flat,
            "counts": tf.math.bincount(
                tf.cast(bucket, tf.int32),
                minlength=len(bucket_lengths),
                maxlength=len(bucket_lengths),
                dtype=tf.int64,
            ),
            "max_id": tf.reduce_max(tf.concat([tf.reshape(flat, [-1]), [0]], 0)),
            "pairs": tf.size(empty, tf.int64),
            "empty": tf.math.count_nonzero(empty),
            "too_long": tf.math.count_nonzero(too_long),
            "source": tf.add_n(tokens[0::2]),
            "target": tf.add_n(tokens[1::2]),
        }

    counts = dict(pairs=0, too_long=0, empty=0, skipped=0, source=0, target=0)
    progress = tqdm.tqdm(
        desc=f"Preparing {stream.name}",
        unit=" pairs",
        disable=None,
        leave=False,
    )
    sizes = 2 * np.asarray(bucket_lengths)
    with progress:
        for batch, skipped in stream.iterate(_TOKENIZE_BATCH, tokenize):
            counts["skipped"] += skipped
            for key in ("pairs", "empty", "too_long", "source", "target"):
                counts[key] += int(batch[key])
            progress.update(int(batch["pairs"]) + skipped)
            if batch["max_id"] > limit:
                raise ValueError(
                    f"{stream.name}: token id {batch['max_id']} does not fit "
                    f"{dtype.name} (vocab_size={vocab_size})"
                )
            ends = np.cumsum(batch["counts"] * sizes)
            for flat, view in zip(batch["flat"].astype(dtype), buckets, strict=True):
                for b in np.flatnonzero(batch["counts"]):
                    rows = flat[ends[b] - batch["counts"][b] * sizes[b] : ends[b]]
                    view[b].add(rows.reshape(-1, sizes[b]))
    for bucket in itertools.chain.from_iterable(buckets):
        bucket.close()
    kept = sum(bucket.count for bucket in buckets[0])
    label = f"{stream.name}: "
    if counts["skipped"]:
        logger.warning(
            "%sskipped %d of %d line pairs with an empty side",
            label,
            counts["skipped"],
            counts["pairs"] + counts["skipped"],
        )
    if counts["too_long"]:
        logger.warning(
            "%sdropped %d of %d pairs longer than max_length=%d tokens",
            label,
            counts["too_long"],
            counts["pairs"],
            max_length,
        )
    if counts["empty"]:
        logger.warning(
            "%sdropped %d of %d pairs with an empty source or target",
            label,
            counts["empty"],
            counts["pairs"],
        )
    if not kept:
        raise NoPairsError(
            f"{stream.name}: no pair left to batch: {counts['pairs']} pairs, "
            f"{counts['too_long']} longer than max_length={max_length}, "
            f"{counts['empty']} empty",
            counts["pairs"],
        )
    logger.info(
        "%sprepared %d pairs in %d buckets%s: %s",
        label,
        kept,
        len(bucket_lengths),
        f", {views} sampled segmentations each" if sampling is not None else "",
        directory,
    )
    return {
        "name": stream.name,
        "identity": identity,
        "bucket_lengths": list(bucket_lengths),
        "counts": [bucket.count for bucket in buckets[0]],
        "chunk_rows": chunk_rows,
        "dtype": dtype.name,
        "pairs": counts["pairs"],
        "kept": kept,
        "too_long": counts["too_long"],
        "empty": counts["empty"],
        "skipped_empty": counts["skipped"],
        "source_tokens": round(counts["source"] / views),
        "target_tokens": round(counts["target"] / views),
        "max_length": max_length,
        "views": views,
    }
