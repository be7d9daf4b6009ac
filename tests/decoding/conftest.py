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


def tiny_transformer(vocab_size=24, max_length=40, seed=0, num_layers=2):
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


@pytest.fixture(scope="package")
def model():
    return tiny_transformer()


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
