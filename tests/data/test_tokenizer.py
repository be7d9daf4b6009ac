import logging
import subprocess
import sys
import threading
import unittest.mock

import numpy as np
import pytest
import sentencepiece as spm
import tensorflow as tf

from keras_transformer.data import (
    END_ID,
    PAD_ID,
    START_ID,
    UNK_ID,
    Tokenizer,
    builtin_corpus,
    load_multi30k,
    read_lines,
)

QUIRKY = [
    "Bühne, weiße Straße, STRASSE, Œuvre, ﬁ-Ligatur",  # case, accents, ligatures
    "日本語 ☃ 😀 ¿Qué?",  # characters absent from the training data
    "a\tb",  # TAB is kept
    "@@",
    "Zwei  Leerzeichen ",  # spaces are folded
    "\ufeffEin Mann \ufeff fährt",  # byte-order marks are removed
]


def round_trip(tokenizer, sentences):
    ids = tokenizer.tokenize(tf.constant(sentences))
    return [s.decode("utf-8") for s in tokenizer.detokenize(ids).numpy()]


def test_reserved_ids_match_design(builtin_tokenizer):
    pieces = [builtin_tokenizer.id_to_token(i) for i in range(4)]
    assert pieces == ["<pad>", "<unk>", "<s>", "</s>"]
    assert (PAD_ID, UNK_ID, START_ID, END_ID) == (0, 1, 2, 3)


def test_tokenize_returns_ragged_int32_without_reserved_ids(multi30k_tokenizer):
    sentences = ["Ein Mann fährt Fahrrad.", "A man rides a bike.", *QUIRKY]
    ids = multi30k_tokenizer.tokenize(tf.constant(sentences))
    assert isinstance(ids, tf.RaggedTensor)
    assert ids.dtype == tf.int32
    assert ids.shape[0] == len(sentences)
    values = ids.flat_values.numpy()
    # No padding, start or end; and byte fallback leaves nothing unknown.
    assert not np.isin(values, [PAD_ID, UNK_ID, START_ID, END_ID]).any()
    assert values.max() < multi30k_tokenizer.vocab_size


def test_round_trip_on_multi30k(multi30k_tokenizer, multi30k_dir):
    sentences = []
    for split in ("val", "test_2016_flickr"):
        corpus = load_multi30k(split, data_dir=multi30k_dir)
        sentences += list(corpus.texts())
    assert len(sentences) == 2 * (1014 + 1000)
    # The training sentences with repeated inner spaces (the loader strips
    # the ends).
    train = load_multi30k("train", data_dir=multi30k_dir)
    spaced = [text for text in train.texts() if "  " in text]
    assert len(spaced) == 45
    decoded = round_trip(multi30k_tokenizer, sentences + spaced)
    assert decoded == [Tokenizer.normalize(s) for s in sentences + spaced]
    assert decoded[: len(sentences)] == sentences  # exact: cased, accented
    assert not set(decoded[len(sentences) :]) & set(spaced)


def test_round_trip_on_multi30k_raw_quirks(multi30k_tokenizer, multi30k_dir):
    lines = read_lines(multi30k_dir / "train.de.gz")
    tab_line = lines[7366 - 1]
    at_lines = [lines[16510 - 1], lines[16664 - 1]]
    trailing = [line for line in lines if line.endswith(" ")]
    assert "\t" in tab_line and at_lines == ["@@", "@@"] and len(trailing) == 40
    quirks = [tab_line, *at_lines, *trailing]
    decoded = round_trip(multi30k_tokenizer, quirks)
    assert decoded[:3] == [tab_line, "@@", "@@"]
    assert decoded[3:] == [line.rstrip(" ") for line in trailing]


def test_round_trip_is_exact_up_to_space_folding(multi30k_tokenizer):
    decoded = round_trip(multi30k_tokenizer, QUIRKY)
    assert decoded[:4] == QUIRKY[:4]
    assert decoded[4] == "Zwei Leerzeichen"
    assert decoded[5] == "Ein Mann fährt"
    assert decoded == [Tokenizer.normalize(s) for s in QUIRKY]


def test_detokenize_drops_start_padding_and_after_end(builtin_tokenizer):
    sentences = ["May 3, 2024", "forty-two"]
    ids = builtin_tokenizer.tokenize(tf.constant(sentences))
    rows = []
    for row in ids.to_list():
        # [START] y [END] junk, padded to 20 with 0.
        row = [START_ID, *row, END_ID, 17, 42, END_ID]
        rows.append(row + [PAD_ID] * (20 - len(row)))
    dense = tf.constant(rows, tf.int32)
    expected = [s.encode() for s in sentences]
    for ids in (
        dense,
        tf.cast(dense, tf.int64),
        tf.RaggedTensor.from_tensor(dense, padding=PAD_ID),
        tf.RaggedTensor.from_tensor(tf.cast(dense, tf.int64), padding=PAD_ID),
    ):
        assert builtin_tokenizer.detokenize(ids).numpy().tolist() == expected


def test_detokenize_does_not_retrace_for_new_shapes(builtin_tokenizer):
    before = builtin_tokenizer.detokenize.experimental_get_tracing_count()
    for shape in [(1, 1), (2, 7), (5, 3)]:
        builtin_tokenizer.detokenize(tf.fill(shape, 10))
    assert builtin_tokenizer.detokenize.experimental_get_tracing_count() == before


def test_tokens_give_pieces_of_a_sentence(builtin_tokenizer):
    sentence = "Friday, May 3, 2024"
    ids = builtin_tokenizer.tokenize(tf.constant([sentence]))[0].numpy()
    padded = np.concatenate([[START_ID], ids, [END_ID, PAD_ID, PAD_ID]])
    tokens = builtin_tokenizer.tokens(padded)
    assert len(tokens) == len(ids) + 2
    assert tokens[0] == "<s>" and tokens[-1] == "</s>"
    assert "".join(tokens[1:-1]).replace("▁", " ").strip() == sentence
    assert len(builtin_tokenizer.tokens(padded, skip_padding=False)) == len(padded)
    pieces = builtin_tokenizer.id_to_string(tf.constant(ids)).numpy()
    assert [p.decode() for p in pieces] == tokens[1:-1]
    with pytest.raises(ValueError, match="token_id"):
        builtin_tokenizer.id_to_token(builtin_tokenizer.vocab_size)


def test_vocab_size_is_a_soft_limit(caplog):
    texts = ["one two three", "eins zwei drei"] * 5
    with caplog.at_level(logging.WARNING):
        tokenizer = Tokenizer.train(texts, vocab_size=8000)
    assert 260 < tokenizer.vocab_size < 8000
    assert f"only allowed {tokenizer.vocab_size} ids" in caplog.text


def test_vocab_size_is_reached_when_the_corpus_allows(multi30k_tokenizer):
    assert multi30k_tokenizer.vocab_size == 500


def test_too_small_vocab_is_a_clear_error():
    with pytest.raises(ValueError, match="vocab_size=100"):
        Tokenizer.train(["some text", "etwas Text"] * 5, vocab_size=100)


def test_options_fixing_ids_or_normalization_are_refused():
    with pytest.raises(ValueError, match="pad_id"):
        Tokenizer.train(["a b"], vocab_size=300, pad_id=5)
    with pytest.raises(ValueError, match="normalization_rule_name"):
        Tokenizer.train(["a b"], vocab_size=300, normalization_rule_name="nfkc")
    with pytest.raises(ValueError, match="normalization_rule_tsv"):
        Tokenizer.train(["a b"], vocab_size=300, normalization_rule_tsv="rules.tsv")


def test_model_without_reserved_ids_is_refused(tmp_path):
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(["a b c", "d e f"] * 5),
        model_prefix=str(tmp_path / "plain"),
        vocab_size=10,
        minloglevel=2,
    )
    with pytest.raises(ValueError, match="reserve ids 0-3"):
        Tokenizer((tmp_path / "plain.model").read_bytes())


def test_training_is_deterministic_and_accepts_pairs_and_datasets():
    corpus = builtin_corpus("val", max_pairs=300)
    from_pairs = Tokenizer.train(corpus, vocab_size=400)
    from_texts = Tokenizer.train(
        [text for pair in corpus for text in pair], vocab_size=400
    )
    from_dataset = Tokenizer.train(corpus.dataset(), vocab_size=400)
    assert from_pairs.model_proto == from_texts.model_proto
    assert from_pairs.model_proto == from_dataset.model_proto
    # SentencePiece's scores depend on its number of threads (1 and 16 gave
    # different protos here), so the default is one number, not one thread
    # per CPU: machines with other CPU counts agree.
    with unittest.mock.patch("os.cpu_count", return_value=3):
        assert Tokenizer.train(corpus, vocab_size=400).model_proto == (
            from_pairs.model_proto
        )


def test_save_and_load(builtin_tokenizer, tmp_path):
    path = builtin_tokenizer.save(tmp_path / "model_dir")
    assert path == str(tmp_path / "model_dir" / "tokenizer.model")
    for source in (tmp_path / "model_dir", path):
        loaded = Tokenizer.load(source)
        assert loaded.model_proto == builtin_tokenizer.model_proto
        assert loaded.vocab_size == builtin_tokenizer.vocab_size
    # A standard SentencePiece file.
    processor = spm.SentencePieceProcessor(model_file=path)
    expected = builtin_tokenizer.tokenize(tf.constant(["June 5, 1999"]))
    assert processor.encode("June 5, 1999") == expected[0].numpy().tolist()


class _Holder(tf.Module):
    """A module that owns a tokenizer, as a translator export would."""

    def __init__(self, tokenizer):
        super().__init__()
        self.tokenizer = tokenizer

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def round_trip(self, sentences):
        ids = self.tokenizer.tokenize(sentences)
        padded = ids.to_tensor(default_value=PAD_ID)
        return self.tokenizer.detokenize(padded), padded


def test_works_inside_a_saved_model(builtin_tokenizer, tmp_path):
    sentences = tf.constant([*builtin_corpus("test", max_pairs=20).texts(), *QUIRKY])
    holder = _Holder(builtin_tokenizer)
    expected_text, expected_ids = holder.round_trip(sentences)
    tf.saved_model.save(holder, str(tmp_path / "holder"))
    tf.saved_model.save(builtin_tokenizer, str(tmp_path / "tokenizer"))
    del holder

    loaded = tf.saved_model.load(str(tmp_path / "holder"))
    text, ids = loaded.round_trip(sentences)
    np.testing.assert_array_equal(text.numpy(), expected_text.numpy())
    np.testing.assert_array_equal(ids.numpy(), expected_ids.numpy())

    # The tokenizer on its own, with each exported id format.
    alone = tf.saved_model.load(str(tmp_path / "tokenizer"))
    ragged = alone.tokenize(sentences)
    assert ragged.to_list() == builtin_tokenizer.tokenize(sentences).to_list()
    dense = ragged.to_tensor()
    for ids in (dense, tf.cast(dense, tf.int64), ragged):
        np.testing.assert_array_equal(
            alone.detokenize(ids).numpy(), expected_text.numpy()
        )
    np.testing.assert_array_equal(
        alone.id_to_string(tf.constant([0, 2, 3])).numpy(), [b"<pad>", b"<s>", b"</s>"]
    )


def test_survives_resetting_the_random_seed():
    # tf.random.set_seed clears TensorFlow's eager kernel cache, which
    # destroyed eagerly created SentencePiece resources.
    tokenizer = Tokenizer.train(["a few words", "ein paar Wörter"] * 5, vocab_size=300)
    before = tokenizer.tokenize(tf.constant(["ein paar words"])).to_list()
    tf.random.set_seed(7)
    ids = tokenizer.tokenize(tf.constant(["ein paar words"]))
    assert ids.to_list() == before
    assert tokenizer.detokenize(ids).numpy().tolist() == [b"ein paar words"]


def test_loading_and_using_a_tokenizer_logs_nothing(tmp_path):
    # SentencePiece logs "precompiled_charsmap is empty" on stderr each time
    # tensorflow-text loads a model without normalization rules.
    Tokenizer.train(["a small example", "ein Beispiel"] * 20, vocab_size=300).save(
        tmp_path
    )
    program = (
        "import tensorflow as tf\n"
        "from keras_transformer.data.tokenizer import Tokenizer\n"
        "import sys\n"
        "sys.stderr.write('START\\n'); sys.stderr.flush()\n"
        f"t = Tokenizer.load({str(tmp_path)!r})\n"
        "ids = t.tokenize(tf.constant(['a small \\ufeffexample']))\n"
        "print(t.detokenize(ids).numpy()[0].decode())\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "a small example"
    logged = result.stderr.split("START\n", 1)[1]
    assert "normalizer" not in logged and "LOG(INFO)" not in logged, logged


def test_sampled_segmentations_are_seeded_and_spell_the_same_text(builtin_tokenizer):
    sentences = list(builtin_corpus("val", max_pairs=40).targets)
    best = builtin_tokenizer.tokenize(tf.constant(sentences)).to_list()
    drawn = builtin_tokenizer.tokenize_sampled(sentences, 0.1, seed=5)
    # A function of the seed: again, in another thread, or as bytes.
    assert builtin_tokenizer.tokenize_sampled(sentences, 0.1, seed=5) == drawn
    again = []
    thread = threading.Thread(
        target=lambda: again.append(
            builtin_tokenizer.tokenize_sampled(
                [s.encode() for s in sentences], 0.1, seed=5
            )
        )
    )
    thread.start()
    thread.join()
    assert again == [drawn]
    other = builtin_tokenizer.tokenize_sampled(sentences, 0.1, seed=6)
    assert other != drawn
    # Other segmentations than the best one, of the same text.
    changed = sum(d != b for d, b in zip(drawn, best, strict=True))
    assert changed > len(sentences) // 4
    assert round_trip_ids(builtin_tokenizer, drawn) == round_trip_ids(
        builtin_tokenizer, best
    )
    assert all(0 < len(d) and min(d) > END_ID for d in drawn)
    # A sharper distribution strays less from the best segmentation.
    sharp = builtin_tokenizer.tokenize_sampled(sentences, 1.0, seed=5)
    assert sum(len(d) for d in sharp) < sum(len(d) for d in drawn)


def test_sampled_segmentations_fit_their_limits(builtin_tokenizer):
    sentences = list(builtin_corpus("val", max_pairs=40).targets)
    best = builtin_tokenizer.tokenize(tf.constant(sentences)).to_list()
    # Room for one more piece than the best segmentation, or for none.
    longest = [len(b) + (i % 2) for i, b in enumerate(best)]
    drawn = builtin_tokenizer.tokenize_sampled(sentences, 0.1, 5, longest=longest)
    assert all(len(d) <= n for d, n in zip(drawn, longest, strict=True))
    assert any(d != b for d, b in zip(drawn, best, strict=True))
    # No segmentation fits: the best one.
    tight = builtin_tokenizer.tokenize_sampled(
        sentences, 0.1, 5, longest=[1] * len(sentences)
    )
    assert tight == best
    with pytest.raises(ValueError, match=r"alpha must be in \(0, 1\]. Received: 0"):
        builtin_tokenizer.tokenize_sampled(sentences, 0, seed=0)


def round_trip_ids(tokenizer, ids):
    return tokenizer.detokenize(tf.ragged.constant(ids)).numpy().tolist()
