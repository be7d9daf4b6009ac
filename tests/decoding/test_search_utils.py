"""search_utils: the chunked top-k equals a top-k over the whole vocabulary."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding.search_utils import NEG_INF, top_next_tokens


def reference(logits, n):
    """top_k(log_softmax(logits)) with ids 0 and 2 at NEG_INF, in NumPy."""
    logits = logits.astype(np.float64)
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    log_probs[:, [0, 2]] = NEG_INF
    # Stable sort of -value: ties keep the lower id first, as tf.math.top_k.
    ids = np.argsort(-log_probs, axis=-1, kind="stable")[:, :n]
    return np.take_along_axis(log_probs, ids, -1), ids


@pytest.mark.parametrize(
    "vocab_size, n", [(8000, 8), (200, 8), (64, 2), (24, 8), (5, 4), (3, 6)]
)
def test_equals_a_top_k_over_the_whole_vocabulary(vocab_size, n):
    rng = np.random.default_rng(vocab_size)
    # Small integers: many ties, within and across chunks of 64 ids; and
    # rows where a banned id (0 or 2) is the largest.
    logits = rng.integers(-3, 4, (16, vocab_size)).astype(np.float32)
    logits[:4, 0] = logits[4:8, min(2, vocab_size - 1)] = 10.0
    log_probs, ids = top_next_tokens(tf.constant(logits), n)
    expected_log_probs, expected_ids = reference(logits, n)
    np.testing.assert_array_equal(ids, expected_ids)
    np.testing.assert_allclose(log_probs, expected_log_probs, atol=1e-5)


def test_graph_with_unknown_vocabulary_size():
    logits = np.random.default_rng(0).normal(size=(3, 130)).astype(np.float32)
    fn = tf.function(
        lambda x: top_next_tokens(x, 4),
        input_signature=[tf.TensorSpec([None, None], tf.float32)],
    )
    log_probs, ids = fn(tf.constant(logits))
    expected_log_probs, expected_ids = reference(logits, 4)
    np.testing.assert_array_equal(ids, expected_ids)
    np.testing.assert_allclose(log_probs, expected_log_probs, atol=1e-5)
