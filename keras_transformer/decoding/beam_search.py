"""Beam search with the GNMT length penalty, as used in the paper (section 6.1)."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from keras_transformer.decoding.search_utils import (
    END_ID,
    NEG_INF,
    PAD_ID,
    START_ID,
    Stepper,
    attention_of,
    check_max_length,
    check_source_ids,
    compacted,
    ensure_built,
    keep_shapes,
    output_limits,
    rows_where,
    top_next_tokens,
    write_column,
    write_rows,
)
from keras_transformer.validation import check_positive_int


def length_penalty(length: Any, alpha: float) -> Any:
    """GNMT's length penalty `lp(Y) = ((5 + |Y|) / 6) ** alpha`.

    A finished hypothesis is ranked by `log P(Y | X) / lp(Y)`; with
    `alpha > 0` longer outputs are penalized less (Wu et al. 2016, eq. 14).

    Args:
        length: `|Y|`, output tokens including the end token.
        alpha: strength; 0 ranks by log-probability alone.

    Returns:
        `lp(Y)`, of the same kind as `length` (float or float32 tensor).

    Example:

    >>> round(length_penalty(1, 0.6), 6), round(length_penalty(7, 0.6), 4)
    (1.0, 1.5157)
    """
    if isinstance(length, int | float):
        return ((5.0 + length) / 6.0) ** alpha
    return tf.pow((5.0 + tf.cast(length, tf.float32)) / 6.0, alpha)


def beam_search(
    model: Any,
    source_ids: Any,
    beam_size: int = 4,
    alpha: float = 0.6,
    max_length: int | None = None,
    use_cache: bool = True,
    return_attention_scores: bool = False,
    compact: bool = True,
) -> dict[str, Any]:
    """Translates a batch with beam search (beam 4, alpha 0.6 in the paper).

    Every sentence keeps `beam_size` alive hypotheses and, separately, the
    `beam_size` best finished ones. At each step the alive hypotheses' best
    `2 * beam_size` one-token extensions are ranked by log-probability; those
    of the first `beam_size` that end with the end id 3 (or reach the
    sentence's maximum length) become finished and are scored
    `log P / length_penalty(|Y|, alpha)`; the best `beam_size` extensions
    that did not end stay alive. A sentence stops when no alive hypothesis
    can beat the best finished one any more (its log-probability can only
    fall, and the most its length penalty can grow is to the maximum
    length), or when `beam_size` hypotheses have finished and the best alive
    one, scored at its current length, beats none of them. Finishing
    `beam_size` hypotheses is not enough: a weak model's early "end" tokens
    can fill the finished slots with poor hypotheses while a much better one
    is still alive. `beam_size=1` is exactly greedy search.

    The encoder runs once per sentence; its output is tiled per beam here,
    and the cross-attention keys and values are computed once from it. The
    self-attention caches follow their hypotheses by parent index. The loop
    is a `tf.while_loop`: call it eagerly or inside `tf.function`. By
    default sentences that are done leave the running batch and the
    self-attention cache grows as the outputs do (`compact`); inside
    `tf.function(jit_compile=True)` pass `compact=False`: XLA needs every
    shape fixed.

    `beam_size` and `alpha` may be scalar tensors (outside XLA), so one
    traced function serves every setting, as in an exported `Translator`.

    Args:
        model: a `Transformer`, or any object with its `encode`, `decode` and
            `init_cache` methods (see `keras_transformer.decoding.search_utils`).
        source_ids: integer `(B, S)` source ids, 0-padded, each ending with 3.
        beam_size: hypotheses kept per sentence: an int, or an `int32`
            scalar tensor.
        alpha: length penalty strength (0.6 in the paper, from GNMT): a
            number, or a `float32` scalar tensor.
        max_length: most output tokens (end id included) per sentence; by
            default each sentence's source length + 50, capped by
            `model.max_length`.
        use_cache: decode incrementally with the key/value cache; `False`
            recomputes the whole (fixed-length) prefix at every step.
        return_attention_scores: also return the decoder's attention weights
            for the chosen hypothesis (one teacher-forced pass over it, which
            gives the same weights as the search's own steps).
        compact: drop sentences that are done from the running batch and
            grow the cache as needed (same outputs, less work); `False`
            under XLA, which needs fixed shapes.

    Returns:
        A dict with
        `"ids"`: `int32` `(B, L)` best hypothesis, ending with 3 (unless cut
        at the maximum length), 0-padded after it, without the start id;
        `"scores"`: `float32` `(B,)` its length-penalized score;
        `"log_probs"`: `float32` `(B,)` its log-probability;
        `"lengths"`: `int32` `(B,)` its length (end id included); and with
        `return_attention_scores`, `"attention"` as in `greedy_search`.
        `L = max_length`, or by default `min(S + 50, model.max_length)`.

    Raises:
        TypeError: `source_ids` is not integer; `max_length` not an int.
        ValueError: bad shapes, `beam_size` or `max_length`.

    Example:

    >>> import numpy as np
    >>> from keras_transformer.models import Transformer
    >>> model = Transformer(vocab_size=20, num_layers=1, d_model=8,
    ...                     num_heads=2, d_ff=16, max_length=32)
    >>> out = beam_search(model, np.array([[5, 6, 3], [7, 3, 0]]), beam_size=3,
    ...                   max_length=6)
    >>> tuple(out["ids"].shape), tuple(out["scores"].shape)
    ((2, 6), (2,))
    >>> search = tf.function(
    ...     lambda ids: beam_search(model, ids, max_length=6, compact=False),
    ...     jit_compile=True)
    >>> tuple(search(tf.constant([[5, 6, 3]]))["lengths"].shape)
    (1,)

    References:
        Vaswani et al. 2017, "Attention Is All You Need", section 6.1;
        Wu et al. 2016, "Google's Neural Machine Translation System", sec. 7.
    """
    beam_size, alpha = _check_settings(beam_size, alpha)
    source_ids = check_source_ids(source_ids)
    max_length = check_max_length(model, max_length)
    k = beam_size
    ensure_built(model)
    with tf.name_scope("encoder"):
        memory, source_mask = model.encode(source_ids)
    buffer_length, limits = output_limits(model, source_ids, max_length)
    batch_size = tf.shape(source_ids)[0]
    stepper = Stepper(model, buffer_length, use_cache, compact)
    width = buffer_length + 1
    first_of_2k = tf.range(2 * k) < k  # (2k,): candidates that may finish

    def keep_going(loop):
        running = tf.logical_not(tf.reduce_all(loop["done"]))
        if compact:
            running = tf.size(loop["done"]) > 0
        return tf.logical_and(loop["t"] < buffer_length, running)

    def step(loop):
        t, alive_seq, finished = loop["t"], loop["alive_seq"], loop["finished"]
        alive_log_probs = loop["alive_log_probs"]
        b = tf.shape(alive_log_probs)[0]  # sentences still decoding
        with tf.name_scope("decoder"):
            flat_seq = tf.reshape(alive_seq, [b * k, width])
            logits, state = stepper.step(flat_seq, t, loop["state"])
        with tf.name_scope("select"):
            # Each beam's best 2k extensions, then the sentence's best 2k
            # of those (the same 2k as among all k * V, ties included).
            beam_top, beam_ids = top_next_tokens(logits, 2 * k)  # (b * k, n)
            n = tf.shape(beam_top)[-1]  # 2k, or V if smaller
            # (b, k * n): log P of those extensions.
            candidates = alive_log_probs[:, :, None] + tf.reshape(beam_top, [b, k, n])
            candidates = tf.reshape(candidates, [b, k * n])
            top_log_probs, top_index = tf.math.top_k(candidates, 2 * k)  # (b, 2k)
            parents = top_index // n
            next_ids = tf.gather(
                tf.reshape(beam_ids, [b, k * n]), top_index, batch_dims=1
            )
            top_seq = tf.gather(alive_seq, parents, batch_dims=1)  # (b, 2k, L + 1)
            top_seq = write_column(top_seq, t + 1, next_ids)
            is_end = next_ids == END_ID
            at_limit = (t + 1 >= loop["limits"])[:, None]  # (b, 1)

            # Finished: the first k candidates that end (or are cut at the
            # limit).
            length = t + 1
            ends = first_of_2k & (is_end | at_limit) & (top_log_probs > NEG_INF / 2)
            new_scores = top_log_probs / length_penalty(length, alpha)
            new_scores = tf.where(ends, new_scores, NEG_INF)
            new_finished = _top_k_of(
                k,
                tf.concat([finished["scores"], new_scores], axis=1),
                tf.concat([finished["seq"], top_seq], axis=1),
                tf.concat([finished["log_probs"], top_log_probs], axis=1),
            )
            num_finished = loop["num_finished"] + tf.reduce_sum(
                tf.cast(ends, tf.int32), 1
            )

            # Alive: the best k candidates that did not end.
            alive_candidates = tf.where(is_end, NEG_INF, top_log_probs)
            next_alive_log_probs, alive_index = tf.math.top_k(alive_candidates, k)
            next_alive_seq = tf.gather(top_seq, alive_index, batch_dims=1)
            alive_parents = tf.gather(parents, alive_index, batch_dims=1)  # (b, k)
            rows = alive_parents + k * tf.range(b)[:, None]

            # Stop when the best alive hypothesis, at its most favourable
            # final length, cannot beat the best finished one (exact), or
            # when k have finished and it does not beat the worst of them as
            # it stands. Never on the count alone: early finishers may be
            # poor ones (a weak model's "end" ranks among the top k) while a
            # better one is alive.
            best_alive = next_alive_log_probs[:, 0]
            best_possible = best_alive / tf.maximum(
                length_penalty(length + 1, alpha), loop["max_penalty"]
            )
            best_finished = new_finished["scores"][:, 0]
            settled = (num_finished > 0) & (best_finished >= best_possible)
            full = new_finished["scores"][:, k - 1] >= best_alive / length_penalty(
                length, alpha
            )
            next_done = loop["done"] | settled | full | (t + 1 >= loop["limits"])

        new = {
            **loop,
            "t": t + 1,
            "alive_seq": next_alive_seq,
            "alive_log_probs": next_alive_log_probs,
            "finished": new_finished,
            "num_finished": num_finished,
            "done": next_done,
        }
        if not compact:
            # Sentences that were already done keep their hypotheses.
            new = {
                key: value
                if key in ("t", "state", "done", "index", "results")
                else tf.nest.map_structure(_frozen(loop["done"]), loop[key], value)
                for key, value in new.items()
            }
            new["state"] = stepper.select(state, tf.reshape(rows, [-1]))
            return (keep_shapes(new, loop),)
        with tf.name_scope("compact"):
            # Sentences that are done leave the batch: their best hypothesis
            # goes to the results, the others' rows move up.
            done_rows = rows_where(next_done)
            best = {key: new_finished[key][:, 0] for key in new["results"]}
            new["results"] = {
                key: write_rows(
                    new["results"][key],
                    tf.gather(new["index"], done_rows),
                    tf.gather(best[key], done_rows),
                )
                for key in best
            }
            kept = rows_where(tf.logical_not(next_done))
            stays = tf.size(done_rows) == 0
            per_sentence = [key for key in new if key not in ("t", "state", "results")]
            new.update(compacted({key: new[key] for key in per_sentence}, kept))
            kept_rows = tf.reshape(tf.gather(rows, kept), [-1])
            sentence_rows = tf.reshape(kept[:, None] * k + tf.range(k), [-1])
            new["state"] = tf.cond(
                stays,
                lambda: stepper.select(state, kept_rows),
                lambda: stepper.select(state, kept_rows, sentence_rows),
            )
        return (new,)

    # Only beam 0 is alive at first, so the k beams do not start as copies.
    alive_log_probs = tf.tile(
        tf.concat([[0.0], tf.fill([k - 1], NEG_INF)], axis=0)[None], [batch_size, 1]
    )
    start = tf.one_hot(0, width, dtype=tf.int32) * START_ID  # (L + 1,)
    loop = {
        "t": tf.constant(0),
        "alive_seq": tf.tile(start[None, None], [batch_size, k, 1]),
        "alive_log_probs": alive_log_probs,
        "finished": {
            "scores": tf.fill([batch_size, k], NEG_INF),
            "seq": tf.zeros([batch_size, k, width], tf.int32),
            "log_probs": tf.zeros([batch_size, k], tf.float32),
        },
        "num_finished": tf.zeros([batch_size], tf.int32),
        "done": tf.zeros([batch_size], tf.bool),
        "limits": limits,
        "max_penalty": length_penalty(limits, alpha),
        # (B * k, S, D): row b * k + j is beam j of sentence b.
        "state": stepper.initial_state(
            tf.repeat(memory, k, axis=0), tf.repeat(source_mask, k, axis=0)
        ),
    }
    if compact:
        loop["index"] = tf.range(batch_size)  # each row's sentence
        loop["results"] = {
            "seq": tf.zeros([batch_size, width], tf.int32),
            "scores": tf.fill([batch_size], tf.constant(NEG_INF, tf.float32)),
            "log_probs": tf.zeros([batch_size], tf.float32),
        }
    (loop,) = tf.while_loop(
        keep_going,
        step,
        (loop,),
        shape_invariants=(_shape_invariants(loop, stepper, compact),),
    )
    if compact:
        # Sentences cut by the buffer's end (never, when limits <= L).
        best = {key: loop["finished"][key][:, 0] for key in loop["results"]}
        best = {
            key: write_rows(loop["results"][key], loop["index"], best[key])
            for key in best
        }
    else:
        best = {key: value[:, 0] for key, value in loop["finished"].items()}
    ids = best["seq"][:, 1:]
    lengths = tf.reduce_sum(tf.cast(ids != PAD_ID, tf.int32), axis=1)
    result = {
        "ids": ids,
        "scores": best["scores"],
        "log_probs": best["log_probs"],
        "lengths": lengths,
    }
    if return_attention_scores:
        result["attention"] = attention_of(model, ids, memory, source_mask, lengths)
    return result


def _check_settings(beam_size: Any, alpha: Any) -> tuple[Any, Any]:
    """Python numbers as they are, checked; tensors as `int32`/`float32`."""
    if tf.is_tensor(beam_size):
        beam_size = tf.cast(beam_size, tf.int32)
        tf.debugging.assert_positive(beam_size, message="`beam_size` must be >= 1")
    else:
        check_positive_int("beam_size", beam_size)
    if tf.is_tensor(alpha):
        alpha = tf.cast(alpha, tf.float32)
    elif isinstance(alpha, bool) or not isinstance(alpha, int | float):
        raise TypeError(f"`alpha` must be a number. Received: alpha={alpha!r}")
    return beam_size, alpha


def _frozen(done: tf.Tensor):
    """`(old, new) -> new`, except `old` in the rows of sentences `done`."""

    def freeze(old, new):
        mask = tf.reshape(done, [-1] + [1] * (new.shape.rank - 1))
        return tf.where(mask, old, new)

    return freeze


def _shape_invariants(loop: dict, stepper: Stepper, compact: bool) -> dict:
    """The loop's shapes; with `compact`, sentences (axis 0) may leave."""
    shapes = tf.nest.map_structure(lambda x: x.shape, loop)
    if not compact:
        return shapes
    shapes = {
        key: shape
        if key in ("t", "results", "state")
        else tf.nest.map_structure(lambda s: tf.TensorShape([None, *s[1:]]), shape)
        for key, shape in shapes.items()
    }
    shapes["state"] = stepper.shape_invariants(loop["state"])
    return shapes


def _top_k_of(
    k: int, scores: tf.Tensor, seq: tf.Tensor, log_probs: tf.Tensor
) -> dict[str, tf.Tensor]:
    """The `k` best of `(B, n)` scored hypotheses, best first."""
    top_scores, index = tf.math.top_k(scores, k)
    return {
        "scores": top_scores,
        "seq": tf.gather(seq, index, batch_dims=1),
        "log_probs": tf.gather(log_probs, index, batch_dims=1),
    }
