"""A shared source+target SentencePiece subword vocabulary as a `tf.Module`."""

from __future__ import annotations

import io
import itertools
import logging
import os
import re
import tempfile
from collections.abc import Iterable, Sequence

import numpy as np
import sentencepiece as spm
import tensorflow as tf
import tensorflow_text as tf_text
import tqdm
from sentencepiece import sentencepiece_model_pb2

# The reserved ids (keras_transformer.token_ids), also importable from here.
from keras_transformer.data.sampling import reservoir_sample
from keras_transformer.data.segmentation import UnigramVocabulary
from keras_transformer.token_ids import END_ID, PAD_ID, START_ID, UNK_ID  # noqa: F401

logger = logging.getLogger(__name__)

MODEL_FILENAME = "tokenizer.model"
DEFAULT_SAMPLE_SENTENCES = 2_000_000
"""Sentences `Tokenizer.train` samples from a larger corpus by default."""

# Options that fix the id layout and the normalization contract of
# `Tokenizer`; `Tokenizer.train` refuses to override them.
# SentencePiece's result depends on its number of threads (each sums its
# share of the sentences), so it is fixed, not one per CPU: the same corpus
# gives the same tokenizer on every machine.
_THREADS = 16
_FIXED_OPTIONS = {
    "pad_id": PAD_ID,
    "unk_id": UNK_ID,
    "bos_id": START_ID,
    "eos_id": END_ID,
    "pad_piece": "<pad>",
    "unk_piece": "<unk>",
    "bos_piece": "<s>",
    "eos_piece": "</s>",
    "remove_extra_whitespaces": True,
}
# The one normalization rule: a byte-order mark (U+FEFF, invisible, left by
# editors at the start of files) is removed. A model with no rule at all
# (SentencePiece's "identity") makes SentencePiece log "precompiled_charsmap
# is empty" on stderr each time tensorflow-text loads it.
_NORMALIZATION_RULES = "FEFF\t\n"
_NORMALIZATION_OPTIONS = ("normalization_rule_name", "normalization_rule_tsv")

_SPACES = re.compile(" +")


class Tokenizer(tf.Module):
    """Subword tokenizer shared by source and target, usable in a SavedModel.

    A SentencePiece model (Kudo & Richardson, 2018) trained with the
    `sentencepiece` package and run by `tensorflow_text.SentencepieceTokenizer`,
    so `tokenize` and `detokenize` are TensorFlow ops: a `tf.Module` holding
    the tokenizer can be exported with `tf.saved_model.save` and served
    without Python objects (loading needs `import tensorflow_text`, which
    registers the ops).

    Reserved ids (docs/design.md): `PAD_ID = 0`, `UNK_ID = 1`,
    `START_ID = 2`, `END_ID = 3`.

    Normalization: none on characters but the byte-order mark U+FEFF,
    which is removed (text is cased and accents, ligatures and Unicode forms
    are kept as given), and spaces are folded: leading and trailing U+0020 spaces are
    removed and runs of them become one. Other whitespace such as TAB is
    kept. With byte fallback (the default) characters unseen in training
    become UTF-8 byte pieces instead of `<unk>`. Hence for every string `s`,
    `detokenize(tokenize(s)) == Tokenizer.normalize(s)`, and `== s` when `s`
    has no leading, trailing or repeated spaces.

    Args:
        model_proto: a serialized SentencePiece model whose ids 0-3 are
            `<pad>`, `<unk>`, `<s>`, `</s>` (as made by `Tokenizer.train`).
        name: name of the `tf.Module`.

    Attributes:
        vocab_size: number of ids, reserved ones included (a Python int).
        model_proto: the serialized SentencePiece model (bytes).

    Example:
        >>> tokenizer = Tokenizer.train(
        ...     ["a small example", "ein kleines Beispiel"] * 20, vocab_size=300
        ... )
        >>> ids = tokenizer.tokenize(tf.constant(["ein kleines example"]))
        >>> tokenizer.detokenize(ids).numpy()
        array([b'ein kleines example'], dtype=object)
    """

    def __init__(self, model_proto: bytes, name: str | None = None) -> None:
        super().__init__(name=name)
        self.model_proto = bytes(model_proto)
        self._processor = spm.SentencePieceProcessor(model_proto=self.model_proto)
        self._vocabulary = None  # (made by the first `tokenize_sampled`)
        self.vocab_size = int(self._processor.get_piece_size())
        expected = ["<pad>", "<unk>", "<s>", "</s>"]
        received = [
            self._processor.id_to_piece(i) for i in range(min(4, self.vocab_size))
        ]
        if received != expected:
            raise ValueError(
                "The SentencePiece model must reserve ids 0-3 for "
                f"{expected}. Received: {received}"
            )
        # Trace the accepted id formats now, so they are all exported by
        # `tf.saved_model.save` (a SavedModel keeps traced signatures only).
        for spec in (
            tf.TensorSpec([None, None], tf.int32),
            tf.TensorSpec([None, None], tf.int64),
            tf.RaggedTensorSpec([None, None], tf.int32),
            tf.RaggedTensorSpec([None, None], tf.int64),
        ):
            self.detokenize.get_concrete_function(spec)

    # -- TensorFlow functions (exported) -------------------------------------

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def tokenize(self, strings: tf.Tensor) -> tf.RaggedTensor:
        """Turns sentences into subword ids, without start or end ids.

        Args:
            strings: `(B,)` `tf.string` sentences.

        Returns:
            `(B, None)` `tf.RaggedTensor` of `int32` ids.

        Example:
            >>> tokenizer = Tokenizer.train(["abc abd", "abe"] * 10, vocab_size=300)
            >>> tokenizer.tokenize(tf.constant(["abc"])).shape.as_list()
            [1, None]
        """
        return self._ops().tokenize(strings)

    @tf.function
    def detokenize(self, ids: tf.Tensor | tf.RaggedTensor) -> tf.Tensor:
        """Turns ids back into sentences.

        Padding (0) and start (2) ids are dropped, and so is everything from
        the first end id (3) on, so model outputs can be passed as they are.

        Args:
            ids: `(B, T)` ids, `int32` or `int64`, dense or ragged.

        Returns:
            `(B,)` `tf.string` sentences.

        Example:
            >>> tokenizer = Tokenizer.train(["abc abd", "abe"] * 10, vocab_size=300)
            >>> ids = tokenizer.tokenize(tf.constant(["abc abe"])).to_tensor()
            >>> ids = tf.concat([[[START_ID]], ids, [[END_ID, 7, PAD_ID]]], axis=1)
            >>> tokenizer.detokenize(ids).numpy()
            array([b'abc abe'], dtype=object)
        """
        if isinstance(ids, tf.RaggedTensor):
            ids = ids.to_tensor(default_value=PAD_ID)
        ids = tf.cast(ids, tf.int32)
        # (B, T): True until the first end id.
        before_end = tf.math.cumsum(tf.cast(ids == END_ID, tf.int32), axis=1) == 0
        keep = before_end & (ids != PAD_ID) & (ids != START_ID)
        return self._ops().detokenize(tf.ragged.boolean_mask(ids, keep))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32)])
    def id_to_string(self, ids: tf.Tensor) -> tf.Tensor:
        """The subword piece of each id, e.g. to label attention plots.

        Args:
            ids: `(T,)` `int32` ids.

        Returns:
            `(T,)` `tf.string` pieces (`"▁"` marks a word start).

        Example:
            >>> tokenizer = Tokenizer.train(["abc abd", "abe"] * 10, vocab_size=300)
            >>> tokenizer.id_to_string(tf.constant([0, 2, 3])).numpy()
            array([b'<pad>', b'<s>', b'</s>'], dtype=object)
        """
        return self._ops().id_to_string(ids)

    def _ops(self) -> tf_text.SentencepieceTokenizer:
        # Called while tracing: the SentencePiece resource is then created by
        # each function itself. A resource made eagerly (in `__init__`) is
        # owned by a cached eager kernel and is destroyed when that cache is
        # cleared, as `tf.random.set_seed` and `keras.utils.set_random_seed`
        # do ("Resource ... SentencepieceOp ... does not exist").
        return tf_text.SentencepieceTokenizer(model=self.model_proto, out_type=tf.int32)

    # -- Python helpers ------------------------------------------------------

    def tokenize_sampled(
        self,
        sentences: Sequence[str | bytes],
        alpha: float,
        seed: int,
        longest: Sequence[int] | None = None,
        tries: int = 10,
    ) -> list[list[int]]:
        """Sampled segmentations: subword regularization (Kudo, 2018).

        Each sentence's pieces are drawn from the unigram model's
        distribution over all its segmentations, sharpened by `alpha`
        (`P(x)^alpha`, smaller is more uniform), by a NumPy generator
        (`keras_transformer.data.segmentation`; SentencePiece's own draw
        differs from process to process whatever its seed). The draw is a
        function of `seed` and the sentences, in any process or thread, and
        on any machine whose `exp` rounds alike where a uniform falls
        within rounding of a threshold. Every segmentation detokenizes to
        the same text.

        Args:
            sentences: strings (or UTF-8 bytes).
            alpha: in `(0, 1]`.
            seed: seed of the draw.
            longest: per sentence, the most ids of its segmentation: a
                longer draw is drawn again (the draw is then from the
                segmentations that fit), up to `tries` draws in all, then
                the best segmentation is taken.
            tries: draws per sentence at most, with `longest`.

        Returns:
            One list of ids per sentence, without start or end ids.

        Raises:
            ValueError: `alpha` is out of range, or the model is not a
                unigram model (`Tokenizer.train(model_type="bpe")`).

        Example:
            >>> tokenizer = Tokenizer.train(
            ...     ["a small example", "ein kleines Beispiel"] * 20, vocab_size=300
            ... )
            >>> ids = tokenizer.tokenize_sampled(["ein kleines example"], 0.1, seed=0)
            >>> ids == tokenizer.tokenize_sampled(["ein kleines example"], 0.1, 0)
            True
            >>> tokenizer.detokenize(tf.ragged.constant(ids)).numpy()
            array([b'ein kleines example'], dtype=object)
        """
        if not 0 < alpha <= 1:
            raise ValueError(f"alpha must be in (0, 1]. Received: {alpha}")
        if self._vocabulary is None:
            self._vocabulary = UnigramVocabulary(self.model_proto)
        vocabulary = self._vocabulary
        generator = np.random.default_rng(int(seed) % (1 << 64))
        ids = []
        for i, sentence in enumerate(sentences):
            if isinstance(sentence, bytes):
                sentence = sentence.decode("utf-8")
            normalized = self._processor.normalize(sentence)
            words = [vocabulary.lattice(w) for w in vocabulary.words(normalized)]
            for _ in range(tries if longest is not None else 1):
                uniforms = iter(generator.random(len(normalized)).tolist())
                drawn = self._joined([w.sample(alpha, uniforms) for w in words])
                if longest is None or len(drawn) <= longest[i]:
                    break
            else:
                drawn = self._processor.encode(sentence)
            ids.append(drawn)
        return ids

    def _joined(self, words: list[list[int]]) -> list[int]:
        ids = list(itertools.chain.from_iterable(words))
        if self._vocabulary.byte_fallback:
            return ids
        # Without byte fallback, a run of unknown characters is one <unk>.
        return [i for k, i in enumerate(ids) if i != UNK_ID or ids[k - 1 : k] != [i]]

    def id_to_token(self, token_id: int) -> str:
        """The subword piece of one id.

        Args:
            token_id: an id in `[0, vocab_size)`.

        Returns:
            The piece (`"▁"` marks the start of a word; bytes are `"<0xNN>"`).

        Example:
            >>> tokenizer = Tokenizer.train(["abc abd", "abe"] * 10, vocab_size=300)
            >>> tokenizer.id_to_token(END_ID)
            '</s>'
        """
        token_id = int(token_id)
        if not 0 <= token_id < self.vocab_size:
            raise ValueError(
                f"token_id must be in [0, {self.vocab_size}). Received: {token_id}"
            )
        return self._processor.id_to_piece(token_id)

    def tokens(
        self, ids: Sequence[int] | np.ndarray | tf.Tensor, skip_padding: bool = True
    ) -> list[str]:
        """The pieces of one sentence's ids, e.g. for attention-plot labels.

        Args:
            ids: 1-D ids of one sentence.
            skip_padding: leave out padding ids.

        Returns:
            One string per id, reserved ids as `<s>`, `</s>`, `<unk>`.

        Example:
            >>> tokenizer = Tokenizer.train(["abc abd", "abe"] * 10, vocab_size=300)
            >>> ids = tokenizer.tokenize(tf.constant(["abc"]))[0]
            >>> "".join(tokenizer.tokens(ids)).replace("▁", " ").strip()
            'abc'
        """
        ids = np.asarray(ids).reshape(-1)
        return [
            self.id_to_token(i) for i in ids.tolist() if not (skip_padding and i == 0)
        ]

    @staticmethod
    def normalize(text: str) -> str:
        """What `detokenize(tokenize(text))` returns: spaces folded.

        Byte-order marks (U+FEFF) are removed, then leading and trailing
        U+0020 spaces and runs of them become one; nothing else changes.
        (Tokenizers trained by versions before 2026-11-26 keep U+FEFF.)

        Args:
            text: a sentence.

        Returns:
            The normalized sentence.

        Example:
            >>> Tokenizer.normalize("  Zwei  Hunde\\tim Schnee. ")
            'Zwei Hunde\\tim Schnee.'
        """
        return _SPACES.sub(" ", text.replace("\ufeff", "")).strip(" ")

    # -- Saving and training -------------------------------------------------

    def save(self, directory: str | os.PathLike) -> str:
        """Writes the SentencePiece model as `directory/tokenizer.model`.

        The file is a standard SentencePiece model, also readable by
        `sentencepiece.SentencePieceProcessor(model_file=...)`.

        Args:
            directory: created if needed; e.g. the model's directory.

        Returns:
            The path of the written file.

        Example:
            >>> import tempfile
            >>> tokenizer = Tokenizer.train(["abc abd", "abe"] * 10, vocab_size=300)
            >>> directory = tempfile.mkdtemp()
            >>> loaded = Tokenizer.load(tokenizer.save(directory))
            >>> loaded.model_proto == tokenizer.model_proto
            True
        """
        directory = os.fspath(directory)
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, MODEL_FILENAME)
        temporary = f"{path}.tmp-{os.getpid()}"
        with open(temporary, "wb") as f:  # then renamed: never half a file
            f.write(self.model_proto)
        os.replace(temporary, path)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> Tokenizer:
        """Reads a tokenizer written by `save`.

        Args:
            path: the directory given to `save`, or the model file itself.

        Returns:
            A `Tokenizer`.

        Raises:
            FileNotFoundError: no such file.
            ValueError: the file is not a SentencePiece model of this layout.

        Example:
            >>> import tempfile
            >>> tokenizer = Tokenizer.train(["abc abd", "abe"] * 10, vocab_size=300)
            >>> directory = tempfile.mkdtemp()
            >>> _ = tokenizer.save(directory)
            >>> Tokenizer.load(directory).vocab_size == tokenizer.vocab_size
            True
        """
        path = os.fspath(path)
        if os.path.isdir(path):
            path = os.path.join(path, MODEL_FILENAME)
        with open(path, "rb") as f:
            proto = f.read()
        try:
            return cls(proto)
        except RuntimeError as error:  # SentencePiece cannot parse it
            raise ValueError(
                f"Cannot read the tokenizer {path}: it looks corrupt ({error})"
            ) from None

    @classmethod
    def train(
        cls,
        texts: Iterable[str | bytes | tuple],
        vocab_size: int = 8000,
        *,
        model_type: str = "unigram",
        byte_fallback: bool = True,
        split_digits: bool = True,
        character_coverage: float = 1.0,
        max_sentences: int | None = DEFAULT_SAMPLE_SENTENCES,
        seed: int = 0,
        **options,
    ) -> Tokenizer:
        """Trains a shared vocabulary on source and target sentences.

        `vocab_size` is a soft limit (SentencePiece's
        `hard_vocab_limit=False`): if the corpus cannot fill it, the
        vocabulary is smaller, a warning is logged and `vocab_size` of the
        result tells the real size. 8000 suits small corpora such as
        Multi30k; the paper used about 37000 for WMT 2014 English-German.

        Args:
            texts: sentences; `(source, target)` pairs (e.g. a
                `ParallelCorpus`) and `tf.data` datasets of strings or of
                pairs are also accepted, and every string is used.
            vocab_size: wanted number of ids, reserved ones included. With
                `byte_fallback` it must exceed 260 (4 reserved + 256 bytes).
            model_type: `"unigram"` or `"bpe"`.
            byte_fallback: spell unseen characters as UTF-8 bytes, so nothing
                becomes `<unk>` and every string round-trips.
            split_digits: make every digit its own piece (numbers are then
                spelt digit by digit, which generalizes to unseen numbers).
            character_coverage: share of characters given their own piece;
                the rest use byte fallback.
            max_sentences: train on a uniform random sample of at most this
                many sentences (`reservoir_sample`, one pass over `texts`
                that keeps only the sample in memory); all when None. Two
                million by default: SentencePiece advises a sample of a few
                million sentences for large corpora, and the subword
                statistics change little beyond.
            seed: seed of the sample (SentencePiece's training, given all
                its sentences, draws nothing).
            **options: other `sentencepiece.SentencePieceTrainer` options,
                except those fixing the reserved ids and the normalization.
                `num_threads` is 16 unless given, whatever the number of
                CPUs: SentencePiece's scores depend on it.

        Returns:
            The trained `Tokenizer`.

        Raises:
            ValueError: no text, an option that would break the reserved ids
                or normalization, or SentencePiece rejected the settings
                (its message is included).

        Example:
            >>> pairs = [("three cats", "drei Katzen"), ("two cats", "zwei Katzen")]
            >>> tokenizer = Tokenizer.train(pairs * 10, vocab_size=300)
            >>> tokenizer.vocab_size <= 300
            True
        """
        fixed = sorted(set(options) & {*_FIXED_OPTIONS, *_NORMALIZATION_OPTIONS})
        if fixed:
            raise ValueError(
                f"These SentencePiece options are fixed by Tokenizer: {fixed}"
            )
        sentences = tqdm.tqdm(
            _iterate_texts(texts),
            desc="Reading sentences for the tokenizer",
            unit=" sentences",
            disable=None,
            leave=False,
        )
        if max_sentences is None:
            feed = _Counted(sentences)
        else:
            sample, total = reservoir_sample(
                _chunked(sentences, 4096), max_sentences, seed=seed
            )
            # Each sentence is let go once SentencePiece has copied it.
            feed = _Counted(_draining(sample), total)
            del sample
        model = io.BytesIO()
        rules = tempfile.NamedTemporaryFile("w", suffix=".tsv", delete=False)
        with rules:
            rules.write(_NORMALIZATION_RULES)
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=feed,
                model_writer=model,
                vocab_size=vocab_size,
                model_type=model_type,
                byte_fallback=byte_fallback,
                split_digits=split_digits,
                character_coverage=character_coverage,
                input_sentence_size=0,  # (sampled above)
                shuffle_input_sentence=True,
                hard_vocab_limit=False,
                minloglevel=2,
                normalization_rule_tsv=rules.name,
                **_FIXED_OPTIONS,
                **{"num_threads": _THREADS, **options},
            )
        except RuntimeError as error:
            if feed.total == 0:
                raise ValueError("Tokenizer.train received no text") from error
            raise ValueError(
                f"SentencePiece training failed (vocab_size={vocab_size}, "
                f"byte_fallback={byte_fallback}, {feed.count} sentences): "
                f"{error}"
            ) from error
        finally:
            os.unlink(rules.name)
        # The model records the rules file's (temporary, random) name: gone.
        proto = sentencepiece_model_pb2.ModelProto.FromString(model.getvalue())
        proto.normalizer_spec.ClearField("normalization_rule_tsv")
        tokenizer = cls(proto.SerializeToString())
        logger.info(
            "Trained a %s tokenizer with %d ids on %s",
            model_type,
            tokenizer.vocab_size,
            sample_description(feed.count, feed.total),
        )
        if tokenizer.vocab_size < vocab_size:
            logger.warning(
                "The corpus only allowed %d ids (vocab_size=%d was asked)",
                tokenizer.vocab_size,
                vocab_size,
            )
        return tokenizer


def sample_description(sampled: int, total: int) -> str:
    """How many sentences a tokenizer was trained on, for the logs.

    Example:
        >>> sample_description(2_000_000, 9_000_000)
        'a random sample of 2000000 of 9000000 sentences'
        >>> sample_description(58000, 58000)
        'all 58000 sentences'
    """
    if sampled < total:
        return f"a random sample of {sampled} of {total} sentences"
    return f"all {total} sentences"


class _Counted:
    """An iterator that counts what it yields; `total` defaults to that count."""

    def __init__(self, items: Iterable, total: int | None = None) -> None:
        self._items = iter(items)
        self._total = total
        self.count = 0

    def __iter__(self) -> _Counted:
        return self

    def __next__(self):
        item = next(self._items)
        self.count += 1
        return item

    @property
    def total(self) -> int:
        return self.count if self._total is None else self._total


def _draining(items: list) -> Iterable:
    """Yields the items of `items` in order, removing each from the list."""
    items.reverse()
    while items:
        yield items.pop()


def _chunked(items: Iterable, size: int) -> Iterable[list]:
    """`items` in lists of `size` (the last one shorter)."""
    iterator = iter(items)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


def _iterate_texts(texts) -> Iterable[str]:
    """Yields the strings of `texts`: strings, bytes, pairs or `tf.data`."""
    if isinstance(texts, tf.data.Dataset):
        texts = texts.as_numpy_iterator()
    for item in texts:
        if isinstance(item, tuple | list):
            for text in item:
                yield _as_str(text)
        else:
            yield _as_str(item)


def _as_str(text) -> str:
    if isinstance(text, bytes):
        return text.decode("utf-8")
    if isinstance(text, np.ndarray | tf.Tensor):
        return _as_str(text.numpy() if isinstance(text, tf.Tensor) else text.item())
    return str(text)
