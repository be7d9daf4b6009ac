"""The CTranslate2 export translates as `Translator` does, on a trained model.

CTranslate2 is an optional extra: the tests that run it are skipped when it
is not installed; the install message is tested either way.
"""

import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import cli
from keras_transformer.data import Tokenizer
from keras_transformer.data.builtin import builtin_corpus
from keras_transformer.decoding import Translator
from keras_transformer.jobs import export_ctranslate2 as job
from keras_transformer.models import Transformer


@pytest.fixture(scope="module")
def ctranslate2():
    return pytest.importorskip(
        "ctranslate2",
        reason="CTranslate2 is an optional extra: pip install "
        "'keras-transformer-mt[ctranslate2]' (the dev extra has it)",
    )


def _ids(tokenizer, texts, width):
    """`(B, width)` ids: tokens (cut to `width - 1`), the end id, padding."""
    rows = tokenizer.tokenize(tf.constant(list(texts))).to_list()
    ids = np.zeros((len(rows), width), np.int32)
    for i, row in enumerate(rows):
        row = [*row[: width - 1], 3]
        ids[i, : len(row)] = row
    return ids


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A run directory of a tiny model trained for 2 epochs (about 10 s).

    Its translations are wrong but not trivial: words of the right kind, of
    varying length, some repeated.
    """
    keras.utils.set_random_seed(0)
    train = builtin_corpus("train", max_pairs=1500)
    tokenizer = Tokenizer.train(train, vocab_size=400)
    source = _ids(tokenizer, train.sources, 24)
    target = _ids(tokenizer, train.targets, 24)
    target_in = np.pad(target[:, :-1], [[0, 0], [1, 0]], constant_values=2)
    target_in[target_in == 3] = 0
    model = Transformer(
        vocab_size=tokenizer.vocab_size,
        num_layers=2,
        d_model=32,
        num_heads=4,
        d_ff=64,
        dropout=0.0,
        max_length=32,
    )
    model.compile(
        optimizer=keras.optimizers.Adam(3e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, ignore_class=0
        ),
    )
    model.fit((source, target_in), target, batch_size=64, epochs=2, verbose=0)
    directory = tmp_path_factory.mktemp("run")
    model.save(directory / "model.keras")
    tokenizer.save(directory / "tokenizer")
    return directory


SENTENCES = [
    *builtin_corpus("test", max_pairs=24).sources,
    "",
    "   ",
    # Over the model's 32 positions: truncated to 31 tokens, as Translator does.
    " ".join(["seventy-three"] * 20),
]


def _translate(model, tokenizer, sentences, beam_size, alpha):
    translator = Translator(tokenizer, model, beam_size=beam_size, alpha=alpha)
    return [t.decode("utf-8") for t in translator(tf.constant(sentences)).numpy()]


def test_translations_are_translators_greedy_and_beam(ctranslate2, run, tmp_path):
    from keras_transformer.jobs.run_dir import load_trained

    out = job.export_ctranslate2(run, tmp_path / "ct2")
    assert {p.name for p in (tmp_path / "ct2").iterdir()} <= job.CTRANSLATE2_FILES
    assert not list(tmp_path.glob("*.tmp-*"))
    model, tokenizer = load_trained(run)
    translator = job.CTranslate2Translator(out, intra_threads=1)
    greedy = _translate(model, tokenizer, SENTENCES, beam_size=1, alpha=0.0)
    # Not a trivial model: many distinct, non-empty translations.
    assert len(set(greedy)) > len(SENTENCES) // 2
    assert translator(SENTENCES, beam_size=1) == greedy
    # Both rank by log-probability alone: the same beam search.
    beam = _translate(model, tokenizer, SENTENCES, beam_size=4, alpha=0.0)
    assert beam != greedy
    assert translator(SENTENCES, beam_size=4, length_penalty=0.0) == beam
    assert translator([]) == []


def test_log_probabilities_are_the_models(ctranslate2, run, tmp_path):
    from keras_transformer.jobs.run_dir import load_trained

    model, tokenizer = load_trained(run)
    job.write_ctranslate2(model, tokenizer, tmp_path)
    test = builtin_corpus("test", max_pairs=6)
    source = _ids(tokenizer, test.sources, 24)
    target = _ids(tokenizer, test.targets, 24)
    pieces = [tokenizer.id_to_token(i) for i in range(tokenizer.vocab_size)]

    def tokens(row):  # without the end token, which CTranslate2 appends
        return [pieces[i] for i in row[: list(row).index(3)]]

    scored = ctranslate2.Translator(str(tmp_path)).score_batch(
        [tokens(row) for row in source], [tokens(row) for row in target]
    )
    target_in = np.pad(target[:, :-1], [[0, 0], [1, 0]], constant_values=2)
    log_probs = tf.nn.log_softmax(model((source, target_in))).numpy()
    for row, result in enumerate(scored):
        length = list(target[row]).index(3) + 1
        ours = log_probs[row, np.arange(length), target[row, :length]]
        np.testing.assert_allclose(result.log_probs, ours, atol=1e-4)


@pytest.mark.parametrize(
    "settings",
    [
        {"norm_first": True},
        {"learned_positions": True, "key_dim": 6},
    ],
)
def test_untrained_variants_translate_alike_to_each_limit(
    ctranslate2, settings, tmp_path
):
    # An untrained model seldom ends: outputs run to each sentence's own
    # limit, where both cut them: its length + 50 (with the end id: about
    # 53, 54 and 62 tokens here), at most max_length (64, the longest
    # sentence's). (SentencePiece's training can split a word differently
    # on another CPU, so the lengths are checked for what they test.)
    keras.utils.set_random_seed(1)
    tokenizer = Tokenizer.train(builtin_corpus("val").sources[:300], vocab_size=400)
    model = Transformer(
        vocab_size=tokenizer.vocab_size,
        num_layers=2,
        d_model=16,
        num_heads=2,
        d_ff=32,
        max_length=64,
        **settings,
    )
    model.build()
    # LayerNorm weights away from 1 and 0, so that a wrong one shows.
    rng = np.random.default_rng(0)
    for variable in model.weights:
        if variable.path.endswith(("gamma", "beta")):
            variable.assign(variable + rng.normal(0, 0.3, variable.shape))
    job.write_ctranslate2(model, tokenizer, tmp_path)
    translator = job.CTranslate2Translator(tmp_path, intra_threads=1)
    sentences = ["one", "May 3", "twelve hours ago", " ".join(["nine"] * 30)]
    lengths = [len(t) for t in tokenizer.tokenize(tf.constant(sentences)).to_list()]
    assert max(lengths[:-1]) + 51 < 64 < lengths[-1] + 51  # both limits met
    greedy = _translate(model, tokenizer, sentences, beam_size=1, alpha=0.0)
    assert translator(sentences, beam_size=1) == greedy


def _model(**settings):
    model = Transformer(
        vocab_size=300,
        num_layers=1,
        d_model=8,
        num_heads=2,
        d_ff=16,
        max_length=8,
        **settings,
    )
    model.build()
    return model


class FakeTokenizer:
    vocab_size = 300


@pytest.mark.filterwarnings("ignore:Layer .* does not have a `quantize`")
def test_settings_ctranslate2_cannot_represent_are_named(ctranslate2):
    with pytest.raises(ValueError, match="sliding_window=2"):
        job.transformer_spec(_model(sliding_window=2), FakeTokenizer())
    model = _model()
    model.encoder.layers[0].feed_forward.activation = keras.activations.tanh
    with pytest.raises(ValueError, match=r"\['relu', 'tanh'\]"):
        job.transformer_spec(model, FakeTokenizer())
    model = _model()
    model.quantize("int8")
    with pytest.raises(ValueError, match=r"quantized \(int8\)"):
        job.transformer_spec(model, FakeTokenizer())
    with pytest.raises(ValueError, match="tokenizer has 300 ids and the model 299"):
        job.transformer_spec(
            Transformer(vocab_size=299, num_layers=1, d_model=8, num_heads=2),
            FakeTokenizer(),
        )


def test_without_ctranslate2_the_error_says_what_to_install(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # import fails
    # Said first: before the model directory is read.
    run = tmp_path / "no-model-here"
    with pytest.raises(ImportError, match=r"keras-transformer-mt\[ctranslate2\]"):
        job.export_ctranslate2(run, tmp_path / "out")
    argv = ["export", "--model", str(run), "--out", str(tmp_path / "out")]
    assert cli.main([*argv, "--format", "ctranslate2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "keras-transformer export: error: CTranslate2 is not installed: "
        "pip install 'keras-transformer-mt[ctranslate2]'"
    ]
    assert not (tmp_path / "out").exists()


def _error(capsys, argv, *fragments):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    for fragment in fragments:
        assert fragment in err[0]


def test_command_never_writes_among_other_files(ctranslate2, run, tmp_path, capsys):
    out = tmp_path / "ct2"
    argv = ["export", "--model", str(run), "--out", str(out)]
    argv += ["--format", "ctranslate2"]
    _error(capsys, [*argv, "--beam", "1"], "--beam: settings of the SavedModel")
    _error(capsys, [argv[0], *argv[1:5], "--quantization", "int8"], "--format")
    user = tmp_path / "mine"
    user.mkdir()
    (user / "notes.txt").write_text("mine")
    mine = [*argv[:4], str(user), *argv[5:]]
    _error(capsys, [*mine, "--overwrite"], "not a CTranslate2 model")
    assert [p.name for p in user.iterdir()] == ["notes.txt"]

    assert cli.main([*argv, "--quantization", "int8"]) == 0
    assert "Exported the CTranslate2 model to" in capsys.readouterr().out
    first = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    _error(capsys, argv, "holds a CTranslate2 model", "--overwrite")
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == first
    # A SavedModel export refuses it too: it is not a SavedModel.
    _error(capsys, [*argv[:5], "--overwrite"], "not a SavedModel")
    assert cli.main([*argv, "--overwrite"]) == 0
    assert job.CTranslate2Translator(out)(["one"], beam_size=1)
