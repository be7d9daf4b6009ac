import os
import threading
import time

import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from keras_transformer.data import TFDS_TRANSLATION_DATASETS, load_tfds

DIRECTIONS = {
    "ted_hrlr_translate/pt_to_en": ("pt", "en"),
    "wmt14_translate/de-en": ("de", "en"),
    "wmt14_translate/fr-en": ("fr", "en"),
}


def as_list(dataset):
    return [(s.numpy(), t.numpy()) for s, t in dataset]


def test_the_tested_datasets_are_the_documented_ones():
    assert set(TFDS_TRANSLATION_DATASETS) == set(DIRECTIONS)


@pytest.mark.parametrize("name", sorted(DIRECTIONS))
def test_mocked_dataset_gives_string_pairs(name, tmp_path):
    source_key, target_key = DIRECTIONS[name]
    with tfds.testing.mock_data(num_examples=4):
        pairs = load_tfds(name, "train", data_dir=tmp_path)
        examples = tfds.load(name, split="train", data_dir=tmp_path)
        reversed_pairs = load_tfds(
            name,
            "train",
            data_dir=tmp_path,
            source_key=target_key,
            target_key=source_key,
        )
        validation = load_tfds(name, "validation", data_dir=tmp_path)
        assert pairs.element_spec == (
            tf.TensorSpec([], tf.string),
            tf.TensorSpec([], tf.string),
        )
        expected = [
            (example[source_key].numpy(), example[target_key].numpy())
            for example in examples
        ]
        received = as_list(pairs)
        assert len(received) == 4 and received == expected
        # Mock text is random, so the two sides differ.
        assert any(s != t for s, t in received)
        assert as_list(reversed_pairs) == [(t, s) for s, t in expected]
        assert len(as_list(validation)) == 4


def test_keys_are_checked():
    with tfds.testing.mock_data(num_examples=2):
        with pytest.raises(ValueError, match=r"no feature 'xx'.*\['de', 'en'\]"):
            load_tfds("wmt14_translate/de-en", source_key="en", target_key="xx")
        with pytest.raises(ValueError, match="both"):
            load_tfds("wmt14_translate/de-en", source_key="en")


WORDS = "ein zwei drei vier fünf sechs sieben acht neun zehn Hund Katze".split()


def _synthetic(examples):
    """`as_dataset_fn` for `mock_data`: `examples` pairs made by TensorFlow
    ops (fast, unlike the default mock's Python generator)."""
    words = tf.constant(WORDS)

    def as_dataset(self, split, decoders=None, read_config=None, **kwargs):
        def examples_of(i):  # (B,) numbers: B examples
            picks = i[:, None] * tf.constant([1, 3, 5, 7], tf.int64) + i[:, None] // 11
            de = tf.strings.reduce_join(
                tf.gather(words, picks % len(WORDS)), axis=1, separator=" "
            )
            return {"de": de, "en": tf.strings.upper(de)}

        return tf.data.Dataset.range(examples).batch(1024).map(examples_of).unbatch()

    return as_dataset


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak_growth(function) -> int:
    """How far the process's resident memory rose above its start while
    `function` ran (sampled every 2 ms)."""
    start, peak, done = _rss(), [0], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], _rss())
            time.sleep(0.002)

    thread = threading.Thread(target=sample)
    thread.start()
    try:
        function()
    finally:
        done.set()
        thread.join()
    return max(peak[0], _rss()) - start


def test_a_tfds_split_streams_into_shards_in_bounded_memory(tmp_path):
    # 100000 pairs go from TFDS through the tokenizer's sample and the
    # tokenization into shards. Held in memory (the tokenizer trained on
    # every pair, `make_batches` tokenizing all: the code before streaming)
    # they raised the process's peak by 117 MB, against 41 MB for 20000
    # pairs; streamed, by about 20 MB: a few batches and chunks.
    from keras_transformer.data import Tokenizer, prepare_corpus, stream_tfds

    tokenizer = Tokenizer.train(
        [" ".join(WORDS), " ".join(WORDS).upper()] * 20, vocab_size=300
    )

    def prepare(examples):
        with tfds.testing.mock_data(as_dataset_fn=_synthetic(examples)):
            stream = stream_tfds("wmt14_translate/de-en", "train", data_dir=tmp_path)
            assert stream.identity == {
                "kind": "tfds",
                "name": "wmt14_translate/de-en",
                "version": stream.identity["version"],
                "split": "train",
                "keys": ["de", "en"],
            }
            result = {}

            def run():
                sample, total = stream.sample_sentences(1000)
                result["sampled"] = (len(sample), total)
                result["prepared"] = prepare_corpus(
                    stream, tokenizer, tmp_path / str(examples), chunk_rows=256
                )

            growth = _peak_growth(run)
        assert result["sampled"] == (1000, 2 * examples)
        assert result["prepared"].kept == examples
        return growth

    prepare(20_000)  # TensorFlow's kernels and buffers, made once
    growth = prepare(100_000)
    assert growth < 50_000_000, growth
