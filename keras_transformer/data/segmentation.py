"""Segmentations of a word by a unigram subword model, drawn with a seed.

Subword regularization (Kudo, 2018) trains on segmentations drawn from the
unigram model's distribution `P(x) ∝ exp(alpha * score(x))` over all ways
`x` of writing a sentence with the vocabulary's pieces. SentencePiece has
such a draw, but since version 0.2.2 its generator (`absl::BitGen`) is
salted anew in each process: one seed gives other draws in another run, so
a prepared corpus could not be rebuilt. `WordLattice` draws from the same
distribution with a NumPy generator instead: the draw is a function of the
generator's seed, in any process and on any machine.

A word's lattice has one node per vocabulary piece found in it (normal and
user-defined pieces; a user-defined piece scores `0.1 * (length - 1)`, as in
SentencePiece), plus an unknown node for each character that no one-character
piece covers, scored 10 below the lowest piece. With byte fallback, an
unknown node writes the character's UTF-8 byte pieces.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Iterator, Mapping

import numpy as np
from sentencepiece import sentencepiece_model_pb2

UNKNOWN_PENALTY = 10.0
"""How far below the lowest piece score an unknown character scores."""


class WordLattice:
    """All segmentations of one normalized word, to draw from or to rank.

    Args:
        word: the normalized text (SentencePiece's, `"▁"` for spaces).
        pieces: `piece -> (ids, score)` for every piece that may be used;
            `ids` is a tuple (one id).
        longest: length in characters of the longest piece.
        unknown: `character -> ids` written for a character no piece covers.
        unknown_score: the score of such a character.

    Example:
        >>> pieces = {"▁a": ((5,), -1.0), "▁": ((4,), -2.0), "a": ((6,), -2.0)}
        >>> lattice = WordLattice("▁a", pieces, 2, lambda c: (1,), -12.0)
        >>> lattice.best()
        [5]
        >>> sorted(lattice.paths())
        [(-4.0, (4, 6)), (-1.0, (5,))]
        >>> uniforms = iter(np.random.default_rng(0).random(2))
        >>> lattice.sample(1.0, uniforms) in ([5], [4, 6])
        True
    """

    def __init__(
        self,
        word: str,
        pieces: Mapping[str, tuple[tuple[int, ...], float]],
        longest: int,
        unknown,
        unknown_score: float,
    ) -> None:
        self.word = word
        # ends[j]: the nodes ending before character j, as (start, ids, score).
        self.ends: list[list[tuple[int, tuple[int, ...], float]]] = [
            [] for _ in range(len(word) + 1)
        ]
        for start in range(len(word)):
            covered = False
            for end in range(start + 1, min(len(word), start + longest) + 1):
                found = pieces.get(word[start:end])
                if found is not None:
                    self.ends[end].append((start, *found))
                    covered = covered or end == start + 1
            if not covered:
                self.ends[start + 1].append(
                    (start, tuple(unknown(word[start])), unknown_score)
                )
        self._tables: dict[float, list] = {}

    def best(self) -> list[int]:
        """The ids of the highest-scoring segmentation (Viterbi)."""
        score = [0.0] + [-math.inf] * (len(self.word))
        back = [None] * (len(self.word) + 1)
        for end in range(1, len(self.word) + 1):
            for node in self.ends[end]:
                if score[node[0]] + node[2] > score[end]:
                    score[end], back[end] = score[node[0]] + node[2], node
        chosen = []
        end = len(self.word)
        while end > 0:
            end, ids, _ = back[end]
            chosen.append(ids)
        return [i for ids in reversed(chosen) for i in ids]

    def sample(self, alpha: float, uniforms: Iterator[float]) -> list[int]:
        """The ids of one segmentation, drawn with probability `∝ exp(alpha *
        score)` by forward filtering, backward sampling.

        Args:
            alpha: the smoothing, in `(0, 1]` (smaller is more uniform).
            uniforms: numbers drawn uniformly from `[0, 1)`, one taken per
                piece (at most one per character of the word).
        """
        # (A NumPy float equal to a Python one finds the same tables: both
        # are made in double precision.)
        alpha = float(alpha)
        tables = self._tables.get(alpha)
        if tables is None:
            tables = self._tables[alpha] = self._sampling_tables(alpha)
        chosen = []
        end = len(self.word)
        while end > 0:
            cumulative, nodes = tables[end]
            end, ids, _ = nodes[bisect.bisect_right(cumulative, next(uniforms))]
            chosen.append(ids)
        return [i for ids in reversed(chosen) for i in ids]

    def paths(self) -> list[tuple[float, tuple[int, ...]]]:
        """Every segmentation as `(score, ids)`: exponentially many, for tests
        and short words."""
        found = [[(0.0, ())]] + [[] for _ in range(len(self.word))]
        for end in range(1, len(self.word) + 1):
            for start, ids, score in self.ends[end]:
                found[end] += [(s + score, p + ids) for s, p in found[start]]
        return found[-1]

    def _sampling_tables(self, alpha: float) -> list:
        # forward[j]: log of the summed weights of all segmentations of
        # word[:j]. tables[j]: the cumulative probabilities of the node that
        # ends at j, given the segmentation of word[j:].
        forward = [0.0] + [-math.inf] * len(self.word)
        tables = [None]
        for end in range(1, len(self.word) + 1):
            nodes = self.ends[end]
            logits = np.array([forward[start] + alpha * s for start, _, s in nodes])
            top = logits.max()
            weights = np.exp(logits - top)
            forward[end] = top + math.log(weights.sum())
            cumulative = np.cumsum(weights / weights.sum())[:-1].tolist()
            tables.append((cumulative, nodes))
        return tables


class UnigramVocabulary:
    """The pieces and scores of a SentencePiece unigram model, as lattices.

    Args:
        model_proto: a serialized SentencePiece model of type unigram.

    Raises:
        ValueError: the model is not a unigram model (a BPE model's sampled
            segmentation is BPE-dropout, which this does not draw).

    Attributes:
        byte_fallback: unknown characters are written as UTF-8 byte pieces.
        split_words: no piece holds `"▁"` past its first character, so a
            sentence's segmentation is its words' (`words`), each drawn on
            its own.

    Example:
        >>> import tensorflow as tf
        >>> from keras_transformer.data.tokenizer import Tokenizer
        >>> tokenizer = Tokenizer.train(["ein kleines Beispiel"] * 20, vocab_size=300)
        >>> vocabulary = UnigramVocabulary(tokenizer.model_proto)
        >>> vocabulary.words("▁ein▁kleines▁Beispiel")
        ['▁ein', '▁kleines', '▁Beispiel']
        >>> ids = vocabulary.lattice("▁kleines").best()
        >>> ids == tokenizer.tokenize(tf.constant(["kleines"]))[0].numpy().tolist()
        True
    """

    def __init__(self, model_proto: bytes) -> None:
        model = sentencepiece_model_pb2.ModelProto.FromString(model_proto)
        spec = sentencepiece_model_pb2.TrainerSpec
        if model.trainer_spec.model_type != spec.UNIGRAM:
            kind = spec.ModelType.Name(model.trainer_spec.model_type).lower()
            raise ValueError(
                f"Sampled segmentations need a unigram model. Received: {kind}"
            )
        types = sentencepiece_model_pb2.ModelProto.SentencePiece
        self.pieces: dict[str, tuple[tuple[int, ...], float]] = {}
        self.byte_ids: dict[int, int] = {}
        lowest = math.inf
        for i, piece in enumerate(model.pieces):
            if piece.type == types.NORMAL:
                self.pieces[piece.piece] = ((i,), piece.score)
                lowest = min(lowest, piece.score)
            elif piece.type == types.USER_DEFINED:
                self.pieces[piece.piece] = ((i,), 0.1 * (len(piece.piece) - 1))
            elif piece.type == types.BYTE:
                self.byte_ids[int(piece.piece[3:5], 16)] = i
            elif piece.type == types.UNKNOWN:
                self.unknown_id = i
        self.unknown_score = lowest - UNKNOWN_PENALTY
        self.longest = max(len(p) for p in self.pieces)
        self.byte_fallback = model.trainer_spec.byte_fallback
        self.split_words = not any("▁" in p[1:] for p in self.pieces)
        self._lattices: dict[str, WordLattice] = {}

    def words(self, normalized: str) -> list[str]:
        """The units of a normalized sentence that no piece crosses."""
        if not self.split_words:
            return [normalized] if normalized else []
        return _WORDS.findall(normalized)

    def lattice(self, word: str) -> WordLattice:
        """The (cached) lattice of one unit."""
        lattice = self._lattices.get(word)
        if lattice is None:
            if len(self._lattices) >= LATTICE_CACHE_SIZE:
                self._lattices.clear()
            lattice = self._lattices[word] = WordLattice(
                word, self.pieces, self.longest, self._unknown, self.unknown_score
            )
        return lattice

    def _unknown(self, character: str) -> tuple[int, ...]:
        if not self.byte_fallback:
            return (self.unknown_id,)
        return tuple(self.byte_ids[b] for b in character.encode("utf-8"))


LATTICE_CACHE_SIZE = 1 << 18
"""Word lattices a `UnigramVocabulary` keeps (it forgets them all past this)."""

_WORDS = re.compile("▁[^▁]*|[^▁]+")
