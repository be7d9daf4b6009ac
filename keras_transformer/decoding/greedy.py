"""Greedy search: the most probable next token at every step."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from keras_transformer.decoding.search_utils import (
    END_ID,
    PAD_ID,
    START_ID,
    Stepper,
    attention_of,
    check_max_length,
    check_source_ids,
    compacted,
    default_compact,
    ensure_built,
    keep_shapes,
    output_limits,
    rows_where,
    top_next_tokens,
    write_column,
    write_rows,
)


def greedy_search(
    model: Any,
    source_ids: Any,
    max_length: int | None = None,
    use_cache: bool = True,
    return_attention_scores: bool = False,
    compact: bool | None = None,
) -> dict[str, Any]:
    """Translates a batch by taking the most probable token at each step.

    Decoding starts from the start id 2 and a sentence stops at the end id 3
    or after its maximum length. The loop is a `tf.while_loop` over fixed
    shapes: call it eagerly or wrap it in `tf.function` (with or without
    `jit_compile=True`). It ends as soon as every sentence has stopped.

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
    source_ids = check_source_ids(source_ids)
    max_length = check_max_length(model, max_length)
    compact = default_compact(compact)
    ensure_built(model)
    with tf.name_scope("encoder"):
        memory, source_mask = model.encode(source_ids)
    buffer_length, limits = output_limits(model, source_ids, max_length)
    batch_size = tf.shape(source_ids)[0]
    stepper = Stepper(model, buffer_length, use_cache, compact)

    def keep_going(loop):
        running = tf.logical_not(tf.reduce_all(loop["done"]))
        if compact:
            running = tf.size(loop["done"]) > 0
        return tf.logical_and(loop["t"] < buffer_length, running)

    def step(loop):
        t, done = loop["t"], loop["done"]
        with tf.name_scope("decoder"):
            logits, state = stepper.step(loop["tokens"], t, loop["state"])
        with tf.name_scope("select"):
            next_log_probs, next_ids = top_next_tokens(logits, 1)
            next_log_probs, next_ids = next_log_probs[:, 0], next_ids[:, 0]
            next_ids = tf.where(done, PAD_ID, next_ids)
            new = {
                **loop,
                "t": t + 1,
                "tokens": write_column(loop["tokens"], t + 1, next_ids),
                "log_probs": loop["log_probs"] + tf.where(done, 0.0, next_log_probs),
                "done": done | (next_ids == END_ID) | (t + 1 >= loop["limits"]),
                "state": state,
            }
        if not compact:
            return (keep_shapes(new, loop),)
        with tf.name_scope("compact"):
            # Sentences that are done leave the batch for the results.
            done_rows = rows_where(new["done"])
            new["results"] = {
                key: write_rows(
                    new["results"][key],
                    tf.gather(new["index"], done_rows),
                    tf.gather(new[key], done_rows),
                )
                for key in new["results"]
            }
            kept = rows_where(tf.logical_not(new["done"]))
            per_sentence = ("tokens", "log_probs", "done", "limits", "index")
            new.update(compacted({key: new[key] for key in per_sentence}, kept))
            new["state"] = tf.cond(
                tf.size(done_rows) == 0,
                lambda: state,
                lambda: stepper.select(state, kept, kept),
            )
        return (new,)

    # (B, L + 1): the start id, then the output.
    tokens = tf.concat(
        [
            tf.fill([batch_size, 1], START_ID),
            tf.zeros([batch_size, buffer_length], tf.int32),
        ],
        axis=1,
    )
    loop = {
        "t": tf.constant(0),
        "tokens": tokens,
        "log_probs": tf.zeros([batch_size], tf.float32),
        "done": tf.zeros([batch_size], tf.bool),
        "limits": limits,
        "state": stepper.initial_state(memory, source_mask),
    }
    shapes = tf.nest.map_structure(lambda x: x.shape, loop)
    if compact:
        loop["index"] = tf.range(batch_size)  # each row's sentence
        loop["results"] = {"tokens": tokens, "log_probs": loop["log_probs"]}
        shapes = tf.nest.map_structure(lambda x: x.shape, loop)
        for key in ("tokens", "log_probs", "done", "limits", "index"):
            shapes[key] = tf.TensorShape([None, *shapes[key][1:]])
        shapes["state"] = stepper.shape_invariants(loop["state"])
    (loop,) = tf.while_loop(keep_going, step, (loop,), shape_invariants=(shapes,))
    if compact:
        # Sentences cut by the buffer's end (never, when limits <= L).
        loop = {
            key: write_rows(loop["results"][key], loop["index"], loop[key])
            for key in loop["results"]
        }
    ids = loop["tokens"][:, 1:]
    lengths = tf.reduce_sum(tf.cast(ids != PAD_ID, tf.int32), axis=1)
    result = {
        "ids": ids,
        "scores": loop["log_probs"],
        "log_probs": loop["log_probs"],
        "lengths": lengths,
    }
    if return_attention_scores:
        result["attention"] = attention_of(model, ids, memory, source_mask, lengths)
    return result
