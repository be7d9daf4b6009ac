"""Greedy search: the most probable next token at every step."""

from __future__ import annotations

from typing import Any

from keras_transformer.decoding.beam_search import beam_search


def greedy_search(
    model: Any,
    source_ids: Any,
    max_length: int | None = None,
    use_cache: bool = True,
    return_attention_scores: bool = False,
    compact: bool = True,
) -> dict[str, Any]:
    """Translates a batch by taking the most probable token at each step.

    Decoding starts from the start id 2 and a sentence stops at the end id 3
    or after its maximum length. It is `beam_search` with one hypothesis per
    sentence and no length penalty (the same loop): call it eagerly or in
    `tf.function` (with or without `jit_compile=True`).

    Args:
        model: a `Transformer`, or any object with its `encode`, `decode` and
            `init_cache` methods (see `keras_transformer.decoding.search_utils`).
        source_ids: integer `(B, S)` source ids, 0-padded, each ending with 3.
        max_length: most output tokens (end id included) per sentence; by
            default each sentence's source length + 50 (section 6.1 of the
            paper), capped by `model.max_length`.
        use_cache: decode incrementally with the key/value cache; `False`
            recomputes the whole (fixed-length) prefix at every step, for
            tests and benchmarks.
        return_attention_scores: also return the decoder's attention weights
            for the output (one teacher-forced pass over it, which gives the
            same weights as the search's own steps).
        compact: as in `beam_search`.

    Returns:
        A dict with
        `"ids"`: `int32` `(B, L)` output ids ending with 3 (unless cut at the
        maximum length), 0-padded after it, without the start id;
        `"scores"` and `"log_probs"`: `float32` `(B,)` total log-probability;
        `"lengths"`: `int32` `(B,)` output lengths (end id included); and with
        `return_attention_scores`, `"attention"`: `{"self_attention": [(B, H,
        L, L)], "cross_attention": [(B, H, L, S)]}`, one tensor per layer,
        zero at query rows past the output's length.
        `L = max_length`, or by default `min(S + 50, model.max_length)`.

    Raises:
        TypeError: `source_ids` is not integer; `max_length` not an int.
        ValueError: `source_ids` is not 2-D; `max_length` is out of range.

    Example:

    >>> import numpy as np
    >>> import tensorflow as tf
    >>> from keras_transformer.models import Transformer
    >>> model = Transformer(vocab_size=20, num_layers=1, d_model=8,
    ...                     num_heads=2, d_ff=16, max_length=32)
    >>> out = greedy_search(model, np.array([[5, 6, 3], [7, 3, 0]]), max_length=6)
    >>> tuple(out["ids"].shape), tuple(out["scores"].shape)
    ((2, 6), (2,))
    >>> search = tf.function(lambda ids: greedy_search(model, ids, max_length=6))
    >>> bool(np.all(search(tf.constant([[5, 6, 3]]))["ids"] >= 0))
    True
    """
    # One search loop for both: a beam of one, ranked by log-probability alone,
    # keeps the most probable token at every step.
    return beam_search(
        model,
        source_ids,
        beam_size=1,
        alpha=0.0,
        max_length=max_length,
        use_cache=use_cache,
        return_attention_scores=return_attention_scores,
        compact=compact,
    )
