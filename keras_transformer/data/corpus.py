"""`ParallelCorpus`: sentence pairs held in memory, convertible to `tf.data`."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class ParallelCorpus:
    """Aligned (source, target) sentences that fit in memory.

    Returned by `load_parallel_files`, `load_multi30k` and `builtin_corpus`.
    `dataset()` gives the `tf.data` form that every loader of the package
    yields (`load_tfds` returns that form directly), and `make_batches` and
    `Tokenizer.train` accept a `ParallelCorpus` as well.

    Args:
        sources: source sentences.
        targets: target sentences, `targets[i]` translates `sources[i]`.
        name: a label for logs, e.g. `"multi30k/train"`.
        skipped_empty: number of line pairs left out because one side was
            empty (or only whitespace).

    Example:
        >>> corpus = ParallelCorpus(("one", "two"), ("eins", "zwei"), name="toy")
        >>> len(corpus)
        2
        >>> list(corpus)
        [('one', 'eins'), ('two', 'zwei')]
        >>> [(s.numpy(), t.numpy()) for s, t in corpus.dataset().take(1)]
        [(b'one', b'eins')]
    """

    sources: tuple[str, ...]
    targets: tuple[str, ...]
    name: str = ""
    skipped_empty: int = 0

    def __post_init__(self) -> None:
        # Accept lists, but store tuples so the corpus stays immutable.
        object.__setattr__(self, "sources", tuple(self.sources))
        object.__setattr__(self, "targets", tuple(self.targets))
        if len(self.sources) != len(self.targets):
            raise ValueError(
                "sources and targets must have the same length. Received: "
                f"{len(self.sources)} sources and {len(self.targets)} targets"
            )

    def __len__(self) -> int:
        return len(self.sources)

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(zip(self.sources, self.targets, strict=True))

    def texts(self) -> Iterator[str]:
        """Yields every source sentence, then every target sentence.

        Returns:
            An iterator of strings, e.g. to train a shared vocabulary.

        Example:
            >>> list(ParallelCorpus(("one",), ("eins",)).texts())
            ['one', 'eins']
        """
        yield from self.sources
        yield from self.targets

    def dataset(self) -> tf.data.Dataset:
        """The pairs as a `tf.data.Dataset` of `(source, target)` scalars.

        Returns:
            A dataset whose elements are two `tf.string` scalars.

        Example:
            >>> ds = ParallelCorpus(("one",), ("eins",)).dataset()
            >>> ds.element_spec[0]
            TensorSpec(shape=(), dtype=tf.string, name=None)
        """
        return tf.data.Dataset.from_tensor_slices(
            (
                tf.constant(self.sources, dtype=tf.string, shape=[len(self)]),
                tf.constant(self.targets, dtype=tf.string, shape=[len(self)]),
            )
        )
