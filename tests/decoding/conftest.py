"""Toy models and a stand-in tokenizer for the decoding tests."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.models import Transformer


class BigramModel(tf.Module):
    """A fake model whose next-token distribution depends on the last token.

    It has the methods searches use (`encode`, `decode`, `init_cache`) and
    hand-made probabilities, so the best sequence can be worked out by hand.
    Tokens missing from `probs[prev]` get (almost) no probability.

    Args:
        probs: `{previous_id: {next_id: probability}}`.
        vocab_size: number of ids.
        max_length: longest output the model allows.
    """

    def __init__(self, probs, vocab_size, max_length=64):
        super().__init__()
        table = np.full((vocab_size, vocab_size), -40.0, np.float32)
        for prev, following in probs.items():
            for token, p in following.items():
                table[prev, token] = math.log(p)
        self.table = tf.constant(table)
        self.max_length = max_length
        self.decode_calls = 0  # counted in eager mode: one per search step

    def encode(self, source_ids):
        memory = tf.zeros(tf.concat([tf.shape(source_ids), [1]], 0))
        return memory, source_ids != 0

    def decode(self, target_ids, memory, source_mask, cache=None, cache_index=None):
        self.decode_calls += 1
        logits = tf.gather(self.table, target_ids)  # (B, T, V)
        return logits if cache is None else (logits, cache)

    def init_cache(self, memory, max_length):
        return []  # No layers: the last token is all the state there is.


class WordTokenizer(tf.Module):
    """Stand-in for `keras_transformer.data.Tokenizer`: one id per word.

    Ids 0-3 are reserved, `words[i]` is id `4 + i`, unknown words are 1.
    """

    def __init__(self, words):
        super().__init__()
        self.vocab = tf.constant(["<pad>", "<unk>", "<s>", "</s>", *words])
        self.table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(list(words)),
                tf.range(4, 4 + len(words), dtype=tf.int32),
            ),
            default_value=1,
        )

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def tokenize(self, strings):
        words = tf.strings.split(strings)
        return tf.ragged.map_flat_values(self.table.lookup, words)

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
    def detokenize(self, ids):
        before_end = tf.math.cumsum(tf.cast(ids == 3, tf.int32), axis=1) == 0
        ids = tf.ragged.boolean_mask(ids, before_end & (ids != 0) & (ids != 2))
        return tf.strings.reduce_join(tf.gather(self.vocab, ids), axis=1, separator=" ")


def tiny_transformer(
    vocab_size=24, max_length=40, seed=0, num_layers=2, sliding_window=None
):
    if seed is not None:
        keras.utils.set_random_seed(seed)
    model = Transformer(
        vocab_size=vocab_size,
        num_layers=num_layers,
        d_model=16,
        num_heads=2,
        d_ff=32,
        dropout=0.0,
        max_length=max_length,
        sliding_window=sliding_window,
    )
    model.build()
    return model


def random_sources(vocab_size=24, lengths=(5, 2, 7), seed=0):
    """`int32` `(B, S)` sources: random tokens, then the end id, then 0s."""
    rng = np.random.default_rng(seed)
    width = max(lengths) + 1
    ids = np.zeros((len(lengths), width), np.int32)
    for row, n in enumerate(lengths):
        ids[row, :n] = rng.integers(4, vocab_size, n)
        ids[row, n] = 3
    return tf.constant(ids)


def copy_batches(steps, batch_size=64, vocab_size=24, longest=9, seed=0):
    """`((source, target_in), target_out)` batches of a copy task.

    Sources are 1 to `longest` random ids `>= 4`; the target is the source.
    """
    rng = np.random.default_rng(seed)
    width = longest + 2
    for _ in range(steps):
        source = np.zeros((batch_size, width), np.int32)
        target_in = np.zeros_like(source)
        target_out = np.zeros_like(source)
        for row, n in enumerate(rng.integers(1, longest + 1, batch_size)):
            ids = rng.integers(4, vocab_size, n)
            source[row, : n + 1] = target_out[row, : n + 1] = [*ids, 3]
            target_in[row, : n + 1] = [2, *ids]
        yield (source, target_in), target_out


@pytest.fixture(scope="package")
def model():
    return tiny_transformer()


@pytest.fixture(scope="package")
def copy_model():
    """A tiny Transformer trained to copy its source: it ends its outputs
    after about as many tokens as the source has, so sentences of a batch
    finish at different steps (what compaction is about)."""
    model = tiny_transformer()
    model.compile(
        optimizer=keras.optimizers.Adam(3e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, ignore_class=0
        ),
    )
    batches = list(copy_batches(150))
    source, target_in, target_out = (
        np.concatenate(parts)
        for parts in zip(*[(s, t, o) for (s, t), o in batches], strict=True)
    )
    model.fit((source, target_in), target_out, batch_size=64, shuffle=False, verbose=0)
    return model


@pytest.fixture(scope="package")
def mixed_sources():
    """Twelve sources of 1 to 9 tokens (int32, 0-padded, ending with 3)."""
    return random_sources(lengths=(4, 1, 9, 2, 7, 3, 5, 8, 1, 6, 2, 9), seed=3)


@pytest.fixture(scope="package")
def sources():
    return random_sources()


@pytest.fixture
def bigram():
    """The `BigramModel` class (tests build their own toy distributions)."""
    return BigramModel


@pytest.fixture
def word_tokenizer():
    """The `WordTokenizer` class."""
    return WordTokenizer


@pytest.fixture
def make_transformer():
    """`tiny_transformer(vocab_size=24, max_length=40, seed=0, num_layers=2)`."""
    return tiny_transformer
