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


def test_a_tfds_split_streams_into_shards_without_python_lists(tmp_path):
    # The pairs go from TFDS's records through tokenization to the shards
    # in batches: the Python memory the preparation takes does not grow
    # with the number of pairs (as it did when they were held in lists:
    # strings for the tokenizer, then the tokenized ids).
    import tracemalloc

    from keras_transformer.data import Tokenizer, prepare_corpus, stream_tfds

    tokenizer = Tokenizer.train(["ab cd ef gh"] * 10, vocab_size=300)

    def prepare(examples):
        with tfds.testing.mock_data(num_examples=examples):
            stream = stream_tfds("wmt14_translate/de-en", "train", data_dir=tmp_path)
            assert stream.identity == {
                "kind": "tfds",
                "name": "wmt14_translate/de-en",
                "version": stream.identity["version"],
                "split": "train",
                "keys": ["de", "en"],
            }
            tracemalloc.start()
            try:
                prepared = prepare_corpus(
                    stream,
                    tokenizer,
                    tmp_path / str(examples),
                    max_length=256,
                    chunk_rows=128,
                )
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
        assert prepared.pairs == examples
        return peak, prepared

    # Held in lists, 10000 pairs took 3 MB more than 2000 did.
    small, _ = prepare(2000)
    large, prepared = prepare(10000)
    assert prepared.source_tokens > 10000 * 10
    assert large < small + 500_000, (small, large)
