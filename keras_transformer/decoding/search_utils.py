"""Pieces shared by greedy and beam search: checks, lengths, one decoding step.

Both searches are `tf.while_loop`s over fixed-shape tensors, so they run
eagerly, inside `tf.function` and under XLA (`jit_compile=True`) alike. The
model to decode with is our `Transformer` or any object with the same
methods:

- `encode(source_ids) -> (memory (B, S, D), source_mask (B, S))`;
- `decode(target_ids, memory, source_mask, cache=None, cache_index=None,
  return_attention_scores=False)` -> logits `(B, T, V)`; `(logits, scores)`
  when asked for the scores, `(logits, updated cache)` when given a cache;
- `init_cache(memory, max_length)` -> a list with one `(self_cache,
  cross_cache)` pair per decoder layer, every tensor batch-major; only the
  self-attention part changes from step to step, and its tensors have the
  time axis second to last, `(B, ..., L, K)` (`Transformer`'s are `(B, H,
  L, K)`);
- a `max_length` attribute (longest sequence the model accepts), optional.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from keras_transformer.token_ids import END_ID, PAD_ID, START_ID, UNK_ID  # noqa: F401

EXTRA_LENGTH = 50
"""Output may be this many tokens longer than the input (paper, section 6.1)."""

CACHE_BUCKET = 8
"""Growth step of the self-attention cache when shapes may change."""

NEG_INF = -1e9
"""Log-probability of impossible tokens and hypotheses (finite: no NaN)."""


def check_source_ids(source_ids: Any) -> tf.Tensor:
    """Converts `source_ids` to an `int32` `(B, S)` tensor or says what is wrong.

    Args:
        source_ids: integer token ids `(B, S)`, 0-padded, each row ending with
            the end id 3 (as `make_batches` makes them).

    Returns:
        `int32` tensor `(B, S)`.

    Raises:
        TypeError: `source_ids` is not an integer tensor or array.
        ValueError: `source_ids` is not 2-D.
    """
    if not isinstance(source_ids, tf.Tensor | tf.Variable):
        try:
            source_ids = tf.convert_to_tensor(source_ids)
        except (TypeError, ValueError) as error:
            raise TypeError(
                "`source_ids` must be integer token ids (batch_size, seq_len). "
                f"Received: {type(source_ids).__name__} ({error})"
            ) from error
    if not source_ids.dtype.is_integer:
        raise TypeError(
            "`source_ids` must be integer token ids. "
            f"Received: dtype={source_ids.dtype.name}"
        )
    if source_ids.shape.rank != 2:
        raise ValueError(
            "`source_ids` must have shape (batch_size, seq_len). "
            f"Received: source_ids.shape={source_ids.shape}"
        )
    return tf.cast(source_ids, tf.int32)


def ensure_built(model: Any) -> None:
    """Builds an unbuilt Keras model (e.g. fresh from `Transformer(...)`)."""
    if getattr(model, "built", True) is False:
        model.build()


def check_max_length(model: Any, max_length: int | None) -> int | None:
    """Validates a user's `max_length` against the model's positional table."""
    if max_length is None:
        return None
    if isinstance(max_length, bool) or not isinstance(max_length, int):
        raise TypeError(
            f"`max_length` must be a positive int or None. Received: {max_length!r}"
        )
    model_max = getattr(model, "max_length", None)
    if max_length < 1 or (model_max is not None and max_length > model_max):
        raise ValueError(
            f"`max_length` must be in [1, model.max_length={model_max}]. "
            f"Received: max_length={max_length}"
        )
    return max_length


def output_limits(
    model: Any, source_ids: tf.Tensor, max_length: int | None
) -> tuple[int | tf.Tensor, tf.Tensor]:
    """Output buffer length and each sentence's maximum output length.

    With `max_length=None` sentence `i` may produce `len_i + 50` tokens (its
    own non-padding length, so a translation does not depend on what else is
    in the batch), capped by `model.max_length`; the buffer is
    `min(S + 50, model.max_length)` long, a Python int when `S` is static.

    Args:
        model: the model (its `max_length` attribute caps the output).
        source_ids: `int32` `(B, S)`.
        max_length: same limit for every sentence, or `None`.

    Returns:
        `(L, limits)`: the buffer length and `int32` `(B,)` limits `<= L`.
    """
    batch_size = tf.shape(source_ids)[0]
    if max_length is not None:
        return max_length, tf.fill([batch_size], tf.constant(max_length, tf.int32))
    cap = getattr(model, "max_length", None)
    width = source_ids.shape[1]
    if width is None:
        width = tf.shape(source_ids)[1]
    buffer_length = width + EXTRA_LENGTH
    lengths = tf.reduce_sum(tf.cast(source_ids != PAD_ID, tf.int32), axis=1)
    limits = lengths + EXTRA_LENGTH
    if cap is not None:
        buffer_length = (
            min(buffer_length, cap)
            if isinstance(buffer_length, int)
            else tf.minimum(buffer_length, cap)
        )
        limits = tf.minimum(limits, cap)
    return buffer_length, limits


def keep_shapes(new: Any, old: Any) -> Any:
    """Gives loop outputs their inputs' static shapes (for `tf.while_loop`).

    Ops such as `tf.gather` with computed indices can lose a static batch
    size inside the loop body; the loop then refuses a variable whose shape
    changed across iterations.
    """

    def restore(n, o):
        if isinstance(n, tf.Tensor) and not tf.executing_eagerly():
            n.set_shape(o.shape)
        return n

    return tf.nest.map_structure(restore, new, old)


def write_column(tokens: tf.Tensor, column: tf.Tensor, values: tf.Tensor) -> tf.Tensor:
    """`tokens[..., column] = values` for a column that is still all 0.

    Args:
        tokens: `int32` `(..., L)`, zero at `column`.
        column: scalar `int32` index.
        values: `int32` `(...)`.

    Returns:
        The updated `(..., L)` tensor (a one-hot add: XLA-friendly).
    """
    one_hot = tf.one_hot(column, tf.shape(tokens)[-1], dtype=tokens.dtype)
    return tokens + values[..., None] * one_hot


def top_next_tokens(logits: tf.Tensor, n: int) -> tuple[tf.Tensor, tf.Tensor]:
    """The `n` most probable next tokens of each row, and their log-probs.

    Log-probabilities are under the model's softmax over the whole
    vocabulary; padding (0) and start (2) ids are never among the `n` unless
    fewer than `n` other ids exist, and then have log-probability `NEG_INF`.
    The result is that of `tf.math.top_k(log_softmax(logits), n)` with those
    ids set to `NEG_INF` (ties go to the lower id), computed without a
    log-softmax or a top-k over all `V`: the vocabulary is cut into chunks of
    `TOP_K_CHUNK` ids; the `n` best ids lie in the `n` chunks with the
    highest maxima (the lower chunk first among equal maxima), so a top-k
    runs over those chunks only. On the recipe model (V = 8000, 512 rows)
    this took 5.5 ms instead of 13 (docs/benchmarks_archive.md).

    Args:
        logits: `(N, V)` next-token logits.
        n: how many tokens per row, `1 <= n` (an int or a scalar tensor);
            at most `V` are returned.

    Returns:
        `(log_probs, ids)`: float32 and int32 `(N, min(n, V))`, best first.

    Example:

    >>> log_probs, ids = top_next_tokens(tf.math.log([[0.1, 0.2, 0.3, 0.4]]), 2)
    >>> ids.numpy().tolist(), [round(float(p), 4) for p in log_probs[0]]
    ([[3, 1]], [-0.9163, -1.6094])
    """
    logits = tf.cast(logits, tf.float32)
    rows = tf.shape(logits)[0]
    vocab_size = logits.shape[-1] or tf.shape(logits)[-1]
    chunk = TOP_K_CHUNK
    chunks = -(-vocab_size // chunk)  # ceil
    if isinstance(vocab_size, int) and isinstance(n, int):
        n = min(n, vocab_size)
        chunk_n = min(n, chunks)
    else:
        n = tf.minimum(n, vocab_size)
        chunk_n = tf.minimum(n, chunks)
    # log P = logit - log sum(exp(logits)), over the whole vocabulary.
    log_norm = tf.reduce_logsumexp(logits, axis=-1, keepdims=True)
    # (N, chunks, C), ids past the vocabulary at -inf.
    padded = tf.pad(
        logits, [[0, 0], [0, chunks * chunk - vocab_size]], constant_values=-np.inf
    )
    blocks = tf.reshape(padded, [rows, chunks, chunk])
    maxima = tf.reduce_max(blocks, axis=-1)  # (N, chunks)
    # Chunk 0 holds the banned ids: its maximum without them.
    first = tf.where(_is_banned(tf.range(chunk)), -np.inf, blocks[:, 0])
    maxima = tf.concat([tf.reduce_max(first, -1, keepdims=True), maxima[:, 1:]], 1)
    _, best_chunks = tf.math.top_k(maxima, chunk_n)
    # In ascending order, so the candidates below keep the ids' order and
    # top-k's ties go to the lower id, as over the whole vocabulary.
    best_chunks = tf.sort(best_chunks, axis=-1)
    candidates = tf.gather(blocks, best_chunks, batch_dims=1)  # (N, n, C)
    ids = best_chunks[:, :, None] * chunk + tf.range(chunk)  # (N, n, C)
    candidates = tf.where(_is_banned(ids), -np.inf, candidates)
    flat = tf.reshape(candidates, [rows, -1])
    top, index = tf.math.top_k(flat, n)
    ids = tf.gather(tf.reshape(ids, [rows, -1]), index, batch_dims=1)
    log_probs = top - log_norm
    # Banned (or past the vocabulary) only when nothing else is left.
    log_probs = tf.where(tf.math.is_inf(top), NEG_INF, log_probs)
    return log_probs, ids


TOP_K_CHUNK = 64
"""Ids per chunk in `top_next_tokens`."""


def _is_banned(ids: tf.Tensor) -> tf.Tensor:
    """Whether each id is one a search never generates (padding, start)."""
    return (ids == PAD_ID) | (ids == START_ID)


class Stepper:
    """Next-token log-probabilities for a batch of `N` growing prefixes.

    With `use_cache=True` each step feeds the one new token and the
    key/value cache; otherwise the whole fixed `(N, L)` token buffer is
    decoded again and the logits at position `t` are read (fixed shapes, so
    this also compiles with XLA).

    The state it threads through a search loop is a dict: `memory` `(N, S,
    D)` and `source_mask` `(N, S)` (already tiled per beam) and, with the
    cache, `cache` from `model.init_cache`.

    With `compact=True` the search may drop rows (sentences that are done)
    and the shapes of the state change in the loop (no XLA). The
    self-attention cache then starts `CACHE_BUCKET` positions long and
    grows by as many when a step needs a new slot, so each step's cache
    writes, reads and reorders touch the positions decoded so far (rounded
    up) instead of all `L`. With `compact=False` the whole cache is allocated at once.

    Args:
        model: the model to decode with.
        buffer_length: `L`, number of output positions.
        use_cache: decode incrementally with the key/value cache.
        compact: whether the state's shapes may change in the loop.
    """

    def __init__(
        self,
        model: Any,
        buffer_length: int | tf.Tensor,
        use_cache: bool,
        compact: bool = False,
    ) -> None:
        self.model = model
        self.buffer_length = buffer_length
        self.use_cache = use_cache
        self.compact = compact
        self.bucket = CACHE_BUCKET if compact and use_cache else None

    def initial_state(self, memory: tf.Tensor, source_mask: tf.Tensor) -> dict:
        """`{"memory", "source_mask"}`, plus `"cache"` with the cache."""
        state = {"memory": memory, "source_mask": source_mask}
        if self.use_cache:
            length = self.buffer_length
            if self.bucket is not None:
                length = tf.minimum(self.bucket, length)
            state["cache"] = self.model.init_cache(memory, length)
        return state

    def step(
        self, tokens: tf.Tensor, t: tf.Tensor, state: dict
    ) -> tuple[tf.Tensor, dict]:
        """Logits of the token after `tokens[:, t]`.

        Args:
            tokens: `int32` `(N, L + 1)`: start id, then the output so far.
            t: scalar `int32` step, `0 <= t < L`.
            state: from `initial_state` or the previous step.

        Returns:
            `((N, V) logits, new state)`.
        """
        memory, source_mask = state["memory"], state["source_mask"]
        if not self.use_cache:
            prefix = tokens[:, : self.buffer_length]  # (N, L)
            logits = self.model.decode(prefix, memory, source_mask)
            return tf.gather(logits, t, axis=1), state
        cache = state["cache"]
        if self.bucket is not None:
            cache = tf.cond(
                t < _self_cache_length(cache),
                lambda: cache,
                lambda: _grow(cache, self.bucket),
            )
        current = tf.gather(tokens, t[None], axis=1)  # (N, 1)
        logits, cache = self.model.decode(
            current, memory, source_mask, cache=cache, cache_index=t
        )
        return logits[:, 0], {**state, "cache": cache}

    def select(
        self, state: dict, rows: tf.Tensor, sentence_rows: tf.Tensor | None = None
    ) -> dict:
        """The state of rows `rows` (beam parents, surviving sentences).

        The self-attention caches follow `rows`. The memory, its mask and
        the cross-attention caches are the same for all beams of a
        sentence and beams never move between sentences, so they change
        only when sentences leave the batch: then `sentence_rows` lists the
        rows that stay (`rows` are among them, reordered within each
        sentence).

        Args:
            state: the state.
            rows: `int32` `(N',)` row of each new row.
            sentence_rows: `int32` `(N',)` rows that stay, in order, or
                `None` when every row stays.
        """
        with tf.name_scope("reorder"):
            return self._select(state, rows, sentence_rows)

    def _select(
        self, state: dict, rows: tf.Tensor, sentence_rows: tf.Tensor | None
    ) -> dict:
        if sentence_rows is not None:
            state = {
                **state,
                "memory": tf.gather(state["memory"], sentence_rows),
                "source_mask": tf.gather(state["source_mask"], sentence_rows),
            }
        if not self.use_cache:
            return state
        cache = []
        for self_cache, cross_cache in state["cache"]:
            if sentence_rows is not None:
                cross_cache = _gather(cross_cache, sentence_rows)
            cache.append((_gather(self_cache, rows), cross_cache))
        return {**state, "cache": cache}

    def shape_invariants(self, state: dict) -> dict:
        """`state`'s shapes, unknown where they may change in the loop."""
        shapes = tf.nest.map_structure(lambda x: x.shape, state)
        if not self.compact:
            return shapes
        # Rows leave the batch; self-attention caches grow.
        shapes = tf.nest.map_structure(lambda s: tf.TensorShape([None, *s[1:]]), shapes)
        if self.use_cache:
            shapes["cache"] = [
                (tf.nest.map_structure(_unknown_length, s), c)
                for s, c in shapes["cache"]
            ]
        return shapes


def _gather(tensors: Any, rows: tf.Tensor) -> Any:
    return tf.nest.map_structure(lambda x: tf.gather(x, rows), tensors)


def _self_cache_length(cache: list) -> tf.Tensor:
    if not cache:  # A model without layers has nothing to grow.
        return tf.constant(2**30)
    return tf.shape(tf.nest.flatten(cache[0][0])[0])[-2]


def _grow(cache: list, bucket: int) -> list:
    """Every self-attention cache `bucket` positions longer (zeros)."""

    def pad(x):
        paddings = [[0, 0]] * (x.shape.rank - 2) + [[0, bucket], [0, 0]]
        return tf.pad(x, paddings)

    return [(tf.nest.map_structure(pad, s), c) for s, c in cache]


def _unknown_length(shape: tf.TensorShape) -> tf.TensorShape:
    return tf.TensorShape([*shape[:-2], None, shape[-1]])


def rows_where(mask: tf.Tensor) -> tf.Tensor:
    """`int32` indices of the true entries of a `(B,)` mask."""
    return tf.cast(tf.where(mask)[:, 0], tf.int32)


def compacted(tensors: Any, rows: tf.Tensor) -> Any:
    """Rows `rows` of every tensor in `tensors` (one gather each)."""
    return tf.nest.map_structure(lambda x: tf.gather(x, rows), tensors)


def write_rows(buffer: tf.Tensor, index: tf.Tensor, rows: tf.Tensor) -> tf.Tensor:
    """`buffer[index] = rows`: results of sentences that leave the batch."""
    return tf.tensor_scatter_nd_update(buffer, index[:, None], rows)


def attention_of(
    model: Any,
    ids: tf.Tensor,
    memory: tf.Tensor,
    source_mask: tf.Tensor,
    lengths: tf.Tensor,
) -> dict[str, list[tf.Tensor]]:
    """Every decoder layer's attention weights while producing `ids`.

    One teacher-forced pass over `[start] + ids`: exactly the weights of the
    search's own steps (the decoder is causal), without storing them in the
    loop. Rows of positions past each output's length are zeroed.

    Args:
        model: the model.
        ids: `int32` `(B, L)` outputs, 0-padded after the end id.
        memory: `(B, S, D)`.
        source_mask: `(B, S)`.
        lengths: `int32` `(B,)` output lengths (end id included).

    Returns:
        `{"self_attention": [(B, H, L, L)] * layers,
        "cross_attention": [(B, H, L, S)] * layers}`.
    """
    start = tf.fill([tf.shape(ids)[0], 1], START_ID)
    target_in = tf.concat([start, ids[:, :-1]], axis=1)
    _, scores = model.decode(
        target_in, memory, source_mask, return_attention_scores=True
    )
    # (B, 1, L, 1): query rows that produced a real output token.
    valid = tf.sequence_mask(lengths, tf.shape(ids)[1])[:, None, :, None]
    return {
        kind: [tf.where(valid, w, tf.zeros_like(w)) for w in scores[kind]]
        for kind in ("self_attention", "cross_attention")
    }
