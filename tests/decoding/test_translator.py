"""Translator: strings in and out, edge cases, SavedModel in a fresh process."""

import json
import subprocess
import sys
import textwrap

import keras
import pytest
import tensorflow as tf

from keras_transformer.data.tokenizer import Tokenizer
from keras_transformer.decoding import Translator, beam_search, greedy_search
from keras_transformer.decoding import translator as translator_module

WORDS = [f"w{i}" for i in range(20)]  # ids 4 .. 23
# Whatever the source: w1 w2 </s> (ids 5 6 3).
HELLO_WORLD = {2: {5: 1.0}, 5: {6: 1.0}, 6: {3: 1.0}}


def source_ids(sentences, limit=None):
    """What the translator should feed the search: words, end id, padding."""
    rows = [[4 + WORDS.index(w) for w in s.split()][:limit] + [3] for s in sentences]
    width = max(len(r) for r in rows)
    return tf.constant([r + [0] * (width - len(r)) for r in rows], tf.int32)


def test_translates_a_batch_of_strings(bigram, word_tokenizer):
    translator = Translator(word_tokenizer(WORDS), bigram(HELLO_WORLD, 24))
    out = translator(tf.constant(["w3 w4", "w7 w7 w7 w2"]))
    assert out.dtype == tf.string and out.shape == (2,)
    assert out.numpy().tolist() == [b"w1 w2", b"w1 w2"]
    assert translator(["w5"]).numpy().tolist() == [b"w1 w2"]  # a list works too


@pytest.mark.parametrize("beam_size", [1, 3])
def test_equals_search_on_tokens_plus_end(model, word_tokenizer, beam_size):
    tokenizer = word_tokenizer(WORDS)
    sentences = ["w3 w9 w4", "w17", "w0 w1 w2 w3 w4 w5"]
    translator = Translator(tokenizer, model, beam_size=beam_size, max_length=8)
    if beam_size == 1:
        ids = greedy_search(model, source_ids(sentences), max_length=8)["ids"]
    else:
        ids = beam_search(model, source_ids(sentences), beam_size, max_length=8)["ids"]
    expected = tokenizer.detokenize(ids).numpy().tolist()
    assert translator(tf.constant(sentences)).numpy().tolist() == expected


def test_empty_strings_and_empty_batch(bigram, word_tokenizer):
    translator = Translator(word_tokenizer(WORDS), bigram(HELLO_WORLD, 24), 2)
    out = translator(tf.constant(["", "w3", "   "]))
    assert out.numpy().tolist() == [b"", b"w1 w2", b""]
    empty = translator(tf.constant([], tf.string))
    assert empty.shape == (0,) and empty.dtype == tf.string


def test_long_input_is_truncated_with_a_warning(
    make_transformer, word_tokenizer, capfd
):
    model = make_transformer(max_length=8)  # sources of at most 7 tokens + end
    tokenizer = word_tokenizer(WORDS)
    translator = Translator(tokenizer, model, beam_size=1)
    long = " ".join(WORDS[:12])
    out = translator(tf.constant([long, "w5 w6"]))
    assert "truncated 1 sentence(s)" in capfd.readouterr().err
    ids = greedy_search(model, source_ids([long, "w5 w6"], limit=7))["ids"]
    assert out.numpy().tolist() == tokenizer.detokenize(ids).numpy().tolist()
    translator(tf.constant(["w5 w6"]))
    assert "truncated" not in capfd.readouterr().err


MIXED = [
    "w3 w9 w4 w1",
    "",
    "w17",
    "w0 w1 w2 w3 w4 w5 w6 w7 w8",
    "w12 w5",
    "w2 w2 w2 w2 w2 w2 w2",
    "   ",
    "w19 w18 w17 w16 w15",
    "w8",
    "w6 w7 w8 w9 w10 w11",
]


@pytest.mark.parametrize("beam_size", [1, 3])
def test_sorting_and_batching_change_no_output(
    copy_model, word_tokenizer, beam_size, monkeypatch
):
    # The translator sorts sentences by length, batches them by tokens and
    # restores the input order: the same as the plain (fixed-shape) search
    # of the unsorted batch, and as each sentence translated alone.
    tokenizer = word_tokenizer(WORDS)
    search = greedy_search if beam_size == 1 else beam_search
    kwargs = {} if beam_size == 1 else {"beam_size": beam_size}
    words = [s for s in MIXED if s.strip()]
    ids = search(copy_model, source_ids(words), compact=False, **kwargs)["ids"]
    plain = iter(tokenizer.detokenize(ids).numpy().tolist())
    expected = [next(plain) if s.strip() else b"" for s in MIXED]
    assert len(set(expected)) == len(expected) - 1  # copies: all differ but ""
    # By default a batch holds 24 // beam_size source tokens here.
    monkeypatch.setattr(translator_module, "HYPOTHESIS_TOKENS", 24)
    for batch_tokens in (1, 12, 10_000, None):  # a batch per sentence .. one
        translator = Translator(
            tokenizer, copy_model, beam_size=beam_size, batch_tokens=batch_tokens
        )
        assert translator(tf.constant(MIXED)).numpy().tolist() == expected
    alone = [translator(tf.constant([s])).numpy()[0] for s in MIXED]
    assert alone == expected


@pytest.mark.parametrize("bad", [tf.constant([1, 2]), [1, 2], tf.constant([["a"]])])
def test_wrong_input_type_names_the_argument(bigram, word_tokenizer, bad):
    translator = Translator(word_tokenizer(WORDS), bigram(HELLO_WORLD, 24))
    with pytest.raises(TypeError, match="sentences.*string|string.*sentences"):
        translator(bad)


def test_default_batch_holds_as_many_hypotheses_for_each_beam_size():
    budget = translator_module._batch_tokens
    tokens = translator_module.HYPOTHESIS_TOKENS
    assert [int(budget(None, tf.constant(b))) for b in (1, 4, 5)] == [
        tokens,
        tokens // 4,
        tokens // 5,
    ]
    assert int(budget(None, tf.constant(tokens * 2))) == 1
    assert int(budget(100, tf.constant(4))) == 100


def test_bad_construction(bigram, word_tokenizer):
    with pytest.raises(TypeError, match="tokenizer"):
        Translator(object(), bigram(HELLO_WORLD, 24))
    with pytest.raises(ValueError, match="beam_size"):
        Translator(word_tokenizer(WORDS), bigram(HELLO_WORLD, 24), beam_size=0)
    with pytest.raises(ValueError, match="max_length"):
        Translator(word_tokenizer(WORDS), bigram(HELLO_WORLD, 24), max_length=65)
    with pytest.raises(ValueError, match="batch_tokens"):
        Translator(word_tokenizer(WORDS), bigram(HELLO_WORLD, 24), batch_tokens=0)


@pytest.mark.slow
def test_jit_compiled_translator_gives_the_same(bigram, word_tokenizer):
    sentences = tf.constant(["w3 w9 w4", "w17", ""])
    model, tokenizer = bigram(HELLO_WORLD, 24), word_tokenizer(WORDS)
    plain = Translator(tokenizer, model, beam_size=2)
    xla = Translator(tokenizer, model, beam_size=2, jit_compile=True)
    expected = [b"w1 w2", b"w1 w2", b""]
    assert plain(sentences).numpy().tolist() == expected
    assert xla(sentences).numpy().tolist() == expected


LOAD_AND_TRANSLATE = """
import json, sys
import tensorflow as tf
import tensorflow_text  # registers the SentencePiece ops
translator = tf.saved_model.load(sys.argv[1])
out = translator(tf.constant(json.loads(sys.argv[2])))
signature = translator.signatures["serving_default"]
served = signature(sentences=tf.constant(json.loads(sys.argv[2])))
assert served["output_0"].numpy().tolist() == out.numpy().tolist(), served
greedy = translator.translate(tf.constant(json.loads(sys.argv[2])), 1, 0.6)
assert greedy["truncated"].numpy().tolist() == json.loads(sys.argv[3]), greedy
assert int(translator.settings()["beam_size"]) == 2
try:
    translator(tf.constant([1, 2]))
except (TypeError, ValueError) as error:
    assert "string" in str(error), error
else:
    raise AssertionError("integers were accepted")
assert not any(m.startswith("keras_transformer") for m in sys.modules)
print(json.dumps([s.decode("utf-8") for s in out.numpy().tolist()]))
"""


@pytest.mark.slow
def test_saved_model_in_a_fresh_process(tmp_path, make_transformer):
    sentences = ["A man rides a bike.", "Zwei Hunde spielen im Schnee.", ""]
    # Seed first: tf.random.set_seed clears TensorFlow's kernel cache, which
    # deletes the SentencePiece resource of tokenizers that already exist.
    keras.utils.set_random_seed(0)
    tokenizer = Tokenizer.train(sentences[:2] * 20, vocab_size=300)
    model = make_transformer(
        tokenizer.vocab_size, max_length=24, seed=None, num_layers=1
    )
    translator = Translator(tokenizer, model, beam_size=2, max_length=10)
    expected = [s.decode("utf-8") for s in translator(tf.constant(sentences)).numpy()]
    assert expected[2] == ""
    # The tiny tokenizer splits the German sentence into more pieces than
    # the model's max_length - 1, so the SavedModel must report it truncated.
    lengths = [len(ids) for ids in tokenizer.tokenize(tf.constant(sentences)).to_list()]
    truncated = [n > model.max_length - 1 for n in lengths]
    assert truncated == [False, True, False]
    translator.save(str(tmp_path / "translator"))

    code = textwrap.dedent(LOAD_AND_TRANSLATE)
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            str(tmp_path / "translator"),
            json.dumps(sentences),
            json.dumps(truncated),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,  # so that this package cannot be imported by accident
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == expected
