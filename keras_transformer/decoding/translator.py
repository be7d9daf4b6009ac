"""Text in, text out: tokenizer + model + search as one exportable `tf.Module`."""

from __future__ import annotations

import sys
from typing import Any

import tensorflow as tf

from keras_transformer.decoding.beam_search import beam_search
from keras_transformer.decoding.search_utils import (
    END_ID,
    PAD_ID,
    check_max_length,
    ensure_built,
)
from keras_transformer.validation import check_positive_int

HYPOTHESIS_TOKENS = 16384
"""Hypotheses x source tokens (padding included) per search batch, by default.

That is 4096 source tokens for beam 4 and 16384 for greedy search: on 2
CPU cores greedy search of Multi30k test2016 took 3.1-3.5 s with these
batches against 3.9-4.6 s with 4096 source tokens, and beam 4 was as fast
with 8192 as with 4096 and slower with 2048 (see docs/benchmarks_archive.md).
"""


class Translator(tf.Module):
    """Translates a batch of sentences; `save` exports it as a SavedModel.

    Calling it tokenizes the sentences, appends the end id 3 (sources look
    like in training: tokens + [end]), sorts them by length, runs beam
    search on batches of about `batch_tokens` source tokens (by default
    `HYPOTHESIS_TOKENS // beam_size`; beam size 1 is exactly greedy
    search), detokenizes the best hypotheses and returns them in the
    input's order. Sorting keeps padding small, and each search drops
    sentences that are done from its batch; neither changes a translation
    (tested). Everything is TensorFlow ops in one `tf.function`, so the
    SavedModel needs neither this package nor Keras to run: load it with
    `tf.saved_model.load(path)` (plus `import tensorflow_text` when the
    tokenizer uses its ops, as the SentencePiece `Tokenizer` does).

    Export it with `translator.save(path)`. The SavedModel has three
    functions: `__call__(sentences)` (also its `serving_default`
    signature) with this translator's settings,
    `translate(sentences, beam_size, alpha)` with any settings, which also
    says which sentences were truncated and prints nothing, and
    `settings()`.

    Edge cases: an empty batch gives an empty result; an empty (or
    all-space) sentence gives an empty translation; a sentence of more than
    `model.max_length - 1` tokens is truncated to that many (then the end
    id), with a warning printed to stderr; anything but a 1-D string tensor
    (or a list of `str`) raises `TypeError` naming `sentences`.

    Args:
        tokenizer: a `tf.Module` with `tokenize(strings (B,)) ->
            tf.RaggedTensor (B, None)` of ids without start or end, and
            `detokenize(ids (B, T) int32) -> (B,) tf.string` that drops ids 0
            and 2 and stops at 3, e.g. `keras_transformer.data.Tokenizer`.
        model: a built or unbuilt `Transformer` (or an object with the same
            `encode`, `decode`, `init_cache` and `max_length`).
        beam_size: hypotheses per sentence; 1 means greedy search.
        alpha: length penalty strength of beam search.
        max_length: most output tokens per sentence; by default the source
            length + 50, capped by `model.max_length`.
        use_cache: decode with the key/value cache (no reason not to).
        jit_compile: compile the search with XLA, once per batch shape, with
            fixed shapes (no compaction) and this beam size only (measure
            first: on CPUs it is slower; see docs/benchmarks_archive.md).
        batch_tokens: source tokens, padding included, per search batch;
            None: `HYPOTHESIS_TOKENS // beam_size`, so that a batch holds
            about as many hypotheses for each beam size.
        name: name of the `tf.Module`.

    Call arguments:
        sentences: `(B,)` `tf.string` tensor (or a list of `str`).

    Returns:
        `(B,)` `tf.string` translations.

    Example:

    >>> from keras_transformer.models import Transformer
    >>> class Characters(tf.Module):  # ids 4.. are bytes, for the example
    ...     @tf.function
    ...     def tokenize(self, strings):
    ...         return tf.strings.unicode_decode(strings, "UTF-8") % 64 + 4
    ...     @tf.function
    ...     def detokenize(self, ids):
    ...         keep = tf.math.cumsum(tf.cast(ids == 3, tf.int32), 1) == 0
    ...         ids = tf.ragged.boolean_mask(ids, keep & (ids > 3))
    ...         return tf.strings.unicode_encode(ids + 60, "UTF-8")
    >>> model = Transformer(vocab_size=68, num_layers=1, d_model=8,
    ...                     num_heads=2, d_ff=16, max_length=16)
    >>> translator = Translator(Characters(), model, beam_size=2)
    >>> translator(tf.constant(["Hallo", ""])).shape
    TensorShape([2])
    >>> translator(tf.constant([""])).numpy()
    array([b''], dtype=object)
    """

    def __init__(
        self,
        tokenizer: Any,
        model: Any,
        beam_size: int = 4,
        alpha: float = 0.6,
        max_length: int | None = None,
        use_cache: bool = True,
        jit_compile: bool = False,
        batch_tokens: int | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        check_positive_int("beam_size", beam_size)
        if batch_tokens is not None:
            check_positive_int("batch_tokens", batch_tokens)
        for method in ("tokenize", "detokenize"):
            if not callable(getattr(tokenizer, method, None)):
                raise TypeError(
                    f"`tokenizer` must have a `{method}` method. "
                    f"Received: {type(tokenizer).__name__}"
                )
        if getattr(model, "max_length", None) is None:
            raise TypeError(
                "`model` must have a `max_length` attribute (e.g. a Transformer). "
                f"Received: {type(model).__name__}"
            )
        ensure_built(model)
        # A SavedModel of the translator needs the model's weights, and the
        # functions that `translate` calls; not the model's and tokenizer's
        # other traced functions (a Keras model adds its own traced call, the
        # tokenizer one per id type), which would make it slower to load.
        self._tokenizer = _Untracked(tokenizer)
        self._model = _Untracked(model)
        self._weights = [getattr(v, "value", v) for v in _variables(model)]
        self.beam_size = beam_size
        self.alpha = float(alpha)
        self.max_length = check_max_length(model, max_length)
        self.use_cache = use_cache
        self.jit_compile = jit_compile
        self.batch_tokens = batch_tokens
        # Not an attribute tf.Module tracks: saved as a child, it would be
        # traced again and exported twice. Here and below `autograph=False`:
        # the loops are `tf.while_loop`s written out, so AutoGraph has
        # nothing to convert, yet converting the layers the search calls
        # was two thirds of an export (9 s, against 3 without, for a tiny model).
        self._search = _Untracked(
            tf.function(self._search_ids, jit_compile=jit_compile, autograph=False)
        )

    def save(self, path: str) -> None:
        """`tf.saved_model.save`, with `__call__` as the serving signature.

        (`tf.saved_model.save(translator, path)` alone exports the same
        functions, but no signature for TensorFlow Serving: the translator
        has several functions with input signatures.)

        Args:
            path: the SavedModel directory.
        """
        logger = tf.get_logger()  # TensorFlow's "Assets written to" notes
        level = logger.level
        logger.setLevel("WARNING")
        try:
            tf.saved_model.save(
                self, path, signatures={"serving_default": self.__call__}
            )
        finally:
            logger.setLevel(level)

    @property
    def model(self) -> Any:
        """The model that translates."""
        return self._model.value

    @property
    def tokenizer(self) -> Any:
        """The tokenizer of the sources and translations."""
        return self._tokenizer.value

    @tf.function(
        input_signature=[tf.TensorSpec([None], tf.string, name="sentences")],
        autograph=False,
    )
    def __call__(self, sentences: tf.Tensor) -> tf.Tensor:
        out = self.translate(sentences, self.beam_size, self.alpha)
        too_long = tf.reduce_sum(tf.cast(out["truncated"], tf.int32))
        tf.cond(
            too_long > 0,
            lambda: _warn_truncated(too_long, self.model.max_length - 1),
            lambda: tf.constant(False),
        )
        return out["translations"]

    @tf.function(
        input_signature=[
            tf.TensorSpec([None], tf.string, name="sentences"),
            tf.TensorSpec([], tf.int32, name="beam_size"),
            tf.TensorSpec([], tf.float32, name="alpha"),
        ],
        autograph=False,
    )
    def translate(
        self, sentences: tf.Tensor, beam_size: tf.Tensor, alpha: tf.Tensor
    ) -> dict[str, tf.Tensor]:
        """Translations with any search settings; prints nothing.

        One traced function for every beam size and length penalty, so an
        exported translator serves them all (with `jit_compile=True`, only
        the constructor's).

        Args:
            sentences: `(B,)` `tf.string`.
            beam_size: `int32` scalar; 1 gives the greedy translation.
            alpha: `float32` scalar, the length penalty.

        Returns:
            `{"translations": (B,) tf.string, "truncated": (B,) tf.bool}`.
        """
        with tf.name_scope("tokenize"):
            tokens = tf.cast(self.tokenizer.tokenize(sentences), tf.int32)
        lengths = tf.cast(tokens.row_lengths(), tf.int32)  # (B,)
        # Room for the end id within the model's positional table.
        limit = self.model.max_length - 1
        truncated = lengths > limit
        lengths = tf.minimum(lengths, limit)
        # Shortest first, so each search batch holds sentences of about one
        # length; empty sentences (first) translate to empty ones unsearched.
        order = tf.argsort(lengths, stable=True)
        tokens = tf.gather(tokens, order)
        lengths = tf.gather(lengths, order)
        count = tf.size(lengths)
        budget = _batch_tokens(self.batch_tokens, beam_size)
        empty = tf.reduce_sum(tf.cast(lengths == 0, tf.int32))
        translations = tf.TensorArray(
            tf.string, size=0, dynamic_size=True, infer_shape=False
        )
        translations = translations.write(0, tf.fill([empty], ""))

        def translate_batch(start, index, translations):
            end = start + _batch_size(lengths[start:], budget)
            batch = tokens[start:end, :limit].to_tensor(default_value=PAD_ID)
            # (b, T + 1): tokens, end id, padding.
            batch = tf.pad(batch, [[0, 0], [0, 1]])
            ends = tf.one_hot(lengths[start:end], tf.shape(batch)[1], dtype=tf.int32)
            ids = self._search.value(batch + ends * END_ID, beam_size, alpha)
            with tf.name_scope("detokenize"):
                text = self.tokenizer.detokenize(ids)
            translations = translations.write(index, text)
            return end, index + 1, translations

        _, _, translations = tf.while_loop(
            lambda start, index, translations: start < count,
            translate_batch,
            (empty, tf.constant(1), translations),
        )
        # Back to the input's order.
        translations = tf.gather(
            translations.concat(), tf.math.invert_permutation(order)
        )
        return {"translations": translations, "truncated": truncated}

    @tf.function(input_signature=[], autograph=False)
    def settings(self) -> dict[str, tf.Tensor]:
        """The search settings, also readable from a loaded SavedModel.

        Returns:
            `{"beam_size", "alpha", "max_length" (0: the default),
            "batch_tokens" (0: by beam size), "source_limit" (longest source kept, in
            tokens), "version" (of keras_transformer)}` as scalar tensors.
        """
        from keras_transformer import __version__

        return {
            "beam_size": tf.constant(self.beam_size),
            "alpha": tf.constant(self.alpha),
            "max_length": tf.constant(self.max_length or 0),
            "batch_tokens": tf.constant(self.batch_tokens or 0),
            "source_limit": tf.constant(self.model.max_length - 1),
            "version": tf.constant(__version__),
        }

    def _search_ids(
        self, source_ids: tf.Tensor, beam_size: tf.Tensor, alpha: tf.Tensor
    ) -> tf.Tensor:
        if self.jit_compile:
            # XLA needs the beam size when it compiles: the constructor's.
            tf.debugging.assert_equal(
                beam_size,
                self.beam_size,
                message="A jit-compiled Translator searches with its own beam_size",
            )
            beam_size, alpha = self.beam_size, self.alpha
        result = beam_search(
            self.model,
            source_ids,
            beam_size=beam_size,
            alpha=alpha,
            max_length=self.max_length,
            use_cache=self.use_cache,
            compact=not self.jit_compile,  # XLA needs fixed shapes.
        )
        return result["ids"]


class _Untracked:
    """Holds an object where `tf.Module` does not track it for saving."""

    def __init__(self, value: Any) -> None:
        self.value = value


def _variables(model: Any) -> list:
    if hasattr(model, "variables"):
        return list(model.variables)
    return list(getattr(model, "trainable_variables", []))


def _batch_tokens(batch_tokens: int | None, beam_size: tf.Tensor) -> tf.Tensor:
    """Source tokens per search batch: `batch_tokens`, or by beam size."""
    if batch_tokens is not None:
        return tf.constant(batch_tokens)
    return tf.maximum(1, HYPOTHESIS_TOKENS // beam_size)


def _batch_size(lengths: tf.Tensor, batch_tokens: tf.Tensor) -> tf.Tensor:
    """How many of `lengths` (ascending) fit in one batch of `batch_tokens`.

    A batch of `b` sentences is `b * (longest + 1)` source tokens (the end
    id included); at least one sentence goes in, however long.
    """
    sizes = tf.range(1, tf.size(lengths) + 1)
    fits = sizes * (lengths + 1) <= batch_tokens  # true, then false: ascending
    return tf.maximum(1, tf.reduce_sum(tf.cast(fits, tf.int32)))


def _warn_truncated(count: tf.Tensor, limit: int) -> tf.Tensor:
    tf.print(
        "WARNING: Translator truncated",
        count,
        f"sentence(s) to model.max_length - 1 = {limit} tokens",
        output_stream=sys.stderr,
    )
    return tf.constant(True)
