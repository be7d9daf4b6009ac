"""The searches give the eager results inside tf.function and under XLA."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding import beam_search, greedy_search

SEARCHES = {
    "greedy": lambda model, ids, compact=True: greedy_search(
        model, ids, max_length=8, compact=compact
    ),
    "beam": lambda model, ids, compact=True: beam_search(
        model,
        ids,
        beam_size=3,
        max_length=8,
        return_attention_scores=True,
        compact=compact,
    ),
    "beam_uncached": lambda model, ids, compact=True: beam_search(
        model, ids, beam_size=2, max_length=8, use_cache=False, compact=compact
    ),
}


@pytest.fixture(scope="module")
def eager_results(model, sources):
    return {name: search(model, sources) for name, search in SEARCHES.items()}


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, jit_compile",
    [
        ("greedy", False),
        ("greedy", True),
        ("beam", False),
        ("beam", True),
        ("beam_uncached", True),
    ],
)
def test_compiled_equals_eager(model, sources, eager_results, name, jit_compile):
    search = SEARCHES[name]
    eager = eager_results[name]
    # Under XLA every shape is fixed: no compaction.
    compiled = tf.function(
        lambda ids: search(model, ids, compact=not jit_compile),
        jit_compile=jit_compile,
    )
    out = compiled(sources)
    np.testing.assert_array_equal(out["ids"], eager["ids"])
    np.testing.assert_array_equal(out["lengths"], eager["lengths"])
    np.testing.assert_allclose(out["scores"], eager["scores"], atol=1e-5)
    if "attention" in eager:
        np.testing.assert_allclose(
            out["attention"]["cross_attention"][-1],
            eager["attention"]["cross_attention"][-1],
            atol=1e-5,
        )


def test_one_trace_serves_any_batch_and_length(model):
    search = tf.function(
        lambda ids: beam_search(model, ids, beam_size=2, max_length=6),
        input_signature=[tf.TensorSpec([None, None], tf.int32)],
    )
    for shape in [(1, 3), (4, 9)]:
        ids = np.full(shape, 5, np.int32)
        ids[:, -1] = 3
        assert search(tf.constant(ids))["ids"].shape == (shape[0], 6)


def test_dynamic_shapes_default_max_length(bigram):
    model = bigram({2: {4: 1.0}, 4: {4: 1.0}}, 6, max_length=60)
    search = tf.function(
        lambda ids: greedy_search(model, ids),
        input_signature=[tf.TensorSpec([None, None], tf.int32)],
    )
    out = search(tf.constant([[5, 5, 3], [3, 0, 0]]))
    assert out["ids"].shape == (2, 53)
    assert out["lengths"].numpy().tolist() == [53, 51]
