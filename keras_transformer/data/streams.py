"""`PairStream`: a parallel corpus read in batches, never whole in memory."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import os
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import tensorflow as tf
import tqdm

from keras_transformer.data.corpus import ParallelCorpus
from keras_transformer.data.sampling import reservoir_sample

_GZIP_MAGIC = b"\x1f\x8b"
# The characters Python's `str.isspace` accepts, as an RE2 class: the
# stream strips lines as `load_parallel_files` does (`str.strip()`).
_SPACE = "[\t-\r\x1c- \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
_STRIP = f"^{_SPACE}+|{_SPACE}+$"

READ_BATCH = 8192
"""Lines read per batch."""


@dataclasses.dataclass(frozen=True)
class PairStream:
    """Sentence pairs read as a stream of batches, in bounded memory.

    Made by `stream_parallel_files` (two text files, plain or gzip, read
    in blocks of 1 MiB) or `stream_pairs` (any `tf.data` dataset of
    pairs, e.g. `load_tfds`, or a `ParallelCorpus`). `iterate` yields the
    pairs in batches, in corpus order; `prepare_corpus` tokenizes them once
    into shards on disk. Nothing of the corpus is kept in memory but the
    batch being read.

    Args:
        name: a label for logs and the prepared directory's name.
        identity: plain data (JSON) that changes when the pairs do: the
            files' names, sizes and SHA-256 sums, a TFDS name, version and
            split; it names the prepared shards and the tokenizer trained on
            the stream, so that stale ones are never reused.
        open_batches: makes the `tf.data.Dataset` of `((sources, targets),
            info)`: two `(B,)` `tf.string` tensors and a dict: `skipped`,
            the number of empty pairs left out (int64), and `error`, a
            message when the data cannot be read (a string, empty if not),
            which ends the stream. Takes the batch size.
        files: the source and target files, when the stream reads files.

    Example:
        >>> corpus = ParallelCorpus(("one", "two"), ("eins", "zwei"), name="toy")
        >>> stream = stream_pairs(corpus)
        >>> [pairs for pairs, _ in stream.iterate(batch_size=1)]
        [(array([b'one'], dtype=object), array([b'eins'], dtype=object)), \
(array([b'two'], dtype=object), array([b'zwei'], dtype=object))]
    """

    name: str
    identity: dict
    open_batches: Callable[[int], tf.data.Dataset]
    files: tuple[str, str] | None = None

    def batches(
        self,
        batch_size: int = READ_BATCH,
        map_fn: Callable | None = None,
    ) -> tf.data.Dataset:
        """The `tf.data` form: `(map_fn(sources, targets), info)` batches.

        Args:
            batch_size: pairs (lines) read per batch; a batch holds fewer
                when empty pairs were left out.
            map_fn: applied to each batch's two `(B,)` string tensors, in
                parallel on the CPUs (e.g. tokenization); identity if None.

        Returns:
            A `tf.data.Dataset`; read it through `iterate` to have its
            errors raised.
        """
        dataset = self.open_batches(batch_size)
        if map_fn is not None:
            dataset = dataset.map(
                lambda pairs, info: (map_fn(*pairs), info),
                num_parallel_calls=tf.data.AUTOTUNE,
                deterministic=True,
            )
        return dataset.prefetch(2)

    def iterate(
        self, batch_size: int = READ_BATCH, map_fn: Callable | None = None
    ) -> Iterator[tuple[Any, int]]:
        """Yields each batch as NumPy, with the number of empty pairs left out.

        Args:
            batch_size: pairs read per batch.
            map_fn: as in `batches`.

        Yields:
            `(value, skipped)`: `map_fn(sources, targets)` (by default the
            pair `(sources, targets)` of `bytes` object arrays) as NumPy,
            and how many pairs of the batch were left out as empty.

        Raises:
            ValueError: a file is not UTF-8 (names the file and the line),
                is a corrupt gzip file, or the files have different numbers
                of lines (names both and both counts).
        """
        for value, info in self.batches(batch_size, map_fn).as_numpy_iterator():
            if info["error"]:
                raise ValueError(info["error"].decode("utf-8"))
            yield value, int(info["skipped"])

    def sample_sentences(
        self, size: int, seed: int = 0, batch_size: int = READ_BATCH
    ) -> tuple[list[str], int]:
        """A uniform random sample of the stream's sentences, both sides.

        The sentences are taken in the order `Tokenizer.train` reads pairs
        (source, target, source, ...), so a stream of at most `size`
        sentences gives them all, in that order. One pass; memory holds the
        sample (`reservoir_sample`).

        Args:
            size: sentences to keep.
            seed: seed of the draw.
            batch_size: pairs read per batch.

        Returns:
            `(sentences, total)`: the sample (strings) and the number of
            sentences in the stream.

        Example:
            >>> corpus = ParallelCorpus(("one", "two"), ("eins", "zwei"))
            >>> stream_pairs(corpus).sample_sentences(10)
            (['one', 'eins', 'two', 'zwei'], 4)
        """

        def chunks():
            progress = tqdm.tqdm(
                desc=f"Sampling sentences of {self.name}",
                unit=" pairs",
                disable=None,
                leave=False,
            )
            with progress:
                for (sources, targets), skipped in self.iterate(batch_size):
                    progress.update(len(sources) + skipped)
                    yield np.stack([sources, targets], axis=1).reshape(-1)

        sample, total = reservoir_sample(chunks(), size, seed=seed)
        return [text.decode("utf-8") for text in sample], total


def stream_parallel_files(
    source_path: str | os.PathLike,
    target_path: str | os.PathLike,
    name: str | None = None,
) -> PairStream:
    """Streams aligned source and target files, one sentence per line.

    Reads what `load_parallel_files` reads (with its defaults), pair for
    pair, without holding the files in memory: UTF-8 text, plain or gzip
    (recognized by its magic bytes); lines split at `"\\n"` only; a byte
    order mark at the start of a file and the `"\\r"` of Windows line ends
    removed; each sentence stripped of leading and trailing whitespace
    (`str.strip()`), and a pair with an empty side left out and counted.

    Args:
        source_path: file of source sentences.
        target_path: file of target sentences.
        name: a label; defaults to the two file names.

    Returns:
        A `PairStream` whose identity holds the files' names, sizes and
        SHA-256 sums.

    Raises:
        FileNotFoundError: a file is missing.

    Example:
        >>> import pathlib, tempfile
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (d / "src.txt").write_text("Hello .\\n\\nTwo words\\n", "utf-8")
        >>> _ = (d / "tgt.txt").write_text("Hallo .\\nLeer\\nZwei Wörter\\n", "utf-8")
        >>> stream = stream_parallel_files(d / "src.txt", d / "tgt.txt")
        >>> [(list(s), list(t), skipped) for (s, t), skipped in stream.iterate()]
        [([b'Hello .', b'Two words'], [b'Hallo .', b'Zwei W\\xc3\\xb6rter'], 1)]
    """
    paths = (os.fspath(source_path), os.fspath(target_path))
    for path in paths:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"No such file: {path}")
    if name is None:
        name = "+".join(os.path.basename(path) for path in paths)
    identity = {
        "kind": "files",
        "files": [
            {
                "name": os.path.basename(path),
                "size": os.path.getsize(path),
                "sha256": file_sha256(path),
            }
            for path in paths
        ],
    }
    return PairStream(
        name=name,
        identity=identity,
        open_batches=lambda size: _file_batches(*paths, size),
        files=paths,
    )


def stream_pairs(
    pairs: tf.data.Dataset | ParallelCorpus,
    name: str | None = None,
    identity: dict | None = None,
) -> PairStream:
    """Streams a `tf.data` dataset of pairs, or a `ParallelCorpus`, as it is.

    Pairs are passed on unchanged (no stripping; empty ones are left to the
    tokenized counts, as `make_batches` does).

    Args:
        pairs: `(source, target)` `tf.string` scalar pairs (e.g. `load_tfds`)
            or a `ParallelCorpus`.
        name: a label; the corpus's own name by default.
        identity: what identifies the data (see `PairStream`); required for
            a dataset; for a `ParallelCorpus`, the SHA-256 of its sentences.

    Returns:
        A `PairStream`.

    Raises:
        ValueError: a dataset without `identity`.

    Example:
        >>> corpus = ParallelCorpus(("one",), ("eins",), name="toy")
        >>> stream_pairs(corpus).identity["kind"]
        'sentences'
    """
    if isinstance(pairs, ParallelCorpus):
        digest = hashlib.sha256()
        for source, target in pairs:
            digest.update(f"{len(source)}:{source}{len(target)}:{target}".encode())
        identity = {
            "kind": "sentences",
            "pairs": len(pairs),
            "sha256": digest.hexdigest(),
        }
        name = name or pairs.name or "corpus"
        pairs = pairs.dataset()
    elif identity is None:
        raise ValueError(
            "stream_pairs needs an identity for a tf.data dataset (what names "
            "its data, e.g. a TFDS name, version and split)"
        )
    info = {"skipped": tf.constant(0, tf.int64), "error": tf.constant("")}
    return PairStream(
        name=name or "pairs",
        identity=identity,
        open_batches=lambda size: pairs.batch(size).map(lambda s, t: ((s, t), info)),
    )


def file_sha256(path: str | os.PathLike) -> str:
    """The SHA-256 of a file's bytes, read in blocks (hex).

    Example:
        >>> import pathlib, tempfile
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "a.txt"
        >>> _ = path.write_bytes(b"")
        >>> file_sha256(path)[:12]
        'e3b0c44298fc'
    """
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _is_gzip(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == _GZIP_MAGIC


class _Lines:
    """The lines of a text file, plain or gzip, read in blocks (`read_lines`'s).

    Lines split at `"\n"` only; the final newline opens no line; a UTF-8
    byte order mark at the start is removed. Each block of whole lines is
    checked to be UTF-8 (`ValueError` naming the file and line otherwise),
    and a gzip file must be whole (Python's `gzip` checks its end; TensorFlow's
    reader stops quietly at a truncation).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.file = (gzip.open if _is_gzip(path) else open)(path, "rb")
        self.lines: list[bytes] = []
        self.rest = b""
        self.number = 0  # lines read from the file so far
        self.first = True
        self.done = False

    def take(self, count: int) -> list[bytes]:
        """Up to `count` next lines (fewer only at the end of the file)."""
        while len(self.lines) < count and not self.done:
            self._read()
        taken, self.lines = self.lines[:count], self.lines[count:]
        return taken

    def count_rest(self) -> int:
        """Reads to the end: the number of lines the file has in all."""
        while not self.done:
            self._read()
            self.lines = []
        return self.number

    def close(self) -> None:
        self.file.close()

    def _read(self) -> None:
        try:
            block = self.file.read(_BLOCK)
        except (OSError, EOFError, zlib.error) as error:
            raise ValueError(f"{self.path}: not a valid gzip file ({error})") from None
        if not block:
            self.done = True
            block, self.rest = self.rest, b""
            if not block:
                return
            whole = block
        else:
            block = self.rest + block
            end = block.rfind(b"\n") + 1
            whole, self.rest = block[:end], block[end:]
            if not whole:
                return
        try:
            whole.decode("utf-8")
        except UnicodeDecodeError as error:
            line = self.number + whole.count(b"\n", 0, error.start) + 1
            column = error.start - (whole.rfind(b"\n", 0, error.start) + 1) + 1
            raise ValueError(
                f"{self.path}: invalid UTF-8 at line {line}, byte {column} of the "
                f"line ({error.reason}: {whole[error.start : error.end]!r})"
            ) from None
        if self.first:
            whole = whole.removeprefix(b"\xef\xbb\xbf")
            self.first = False
        lines = whole.split(b"\n")
        if lines[-1] == b"":
            lines.pop()
        self.number += len(lines)
        self.lines += lines


_BLOCK = 1 << 20


def _read_pairs(source: str, target: str, batch_size: int):
    """Yields `(sources, targets, error)`: lines of both files in step."""
    readers = []
    try:
        readers = [_Lines(source)]
        readers.append(_Lines(target))
        while True:
            sources, targets = (reader.take(batch_size) for reader in readers)
            if len(sources) != len(targets):
                counts = [reader.count_rest() for reader in readers]
                raise ValueError(
                    "Source and target files must have the same number of lines. "
                    f"Received: {source} has {counts[0]} lines, "
                    f"{target} has {counts[1]} lines"
                )
            if not sources:
                return
            yield sources, targets, ""
    except ValueError as error:
        yield [], [], str(error)
    finally:
        for reader in readers:
            reader.close()


def _file_batches(source: str, target: str, batch_size: int) -> tf.data.Dataset:
    lines = tf.data.Dataset.from_generator(
        lambda: _read_pairs(source, target, batch_size),
        output_signature=(
            tf.TensorSpec([None], tf.string),
            tf.TensorSpec([None], tf.string),
            tf.TensorSpec([], tf.string),
        ),
    )

    def clean(sources, targets, error):
        # `str.strip()` of each sentence; a pair with an empty side goes.
        sources = tf.strings.regex_replace(sources, _STRIP, "")
        targets = tf.strings.regex_replace(targets, _STRIP, "")
        keep = (tf.strings.length(sources) > 0) & (tf.strings.length(targets) > 0)
        info = {
            "skipped": tf.size(keep, tf.int64) - tf.math.count_nonzero(keep),
            "error": error,
        }
        return (tf.boolean_mask(sources, keep), tf.boolean_mask(targets, keep)), info

    return lines.map(clean, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
