import json
import math
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.data import builtin_corpus
from keras_transformer.data.segmentation import UnigramVocabulary, WordLattice
from keras_transformer.data.tokenizer import UNK_ID, Tokenizer

UNSEEN = "Ωmega kostet 5€ – naïve Öl, Ωein Ωder"


def sentence_ids(vocabulary, processor, sentence, method):
    words = vocabulary.words(processor.normalize(sentence))
    return [i for w in words for i in getattr(vocabulary.lattice(w), method)()]


def test_best_segmentation_is_sentencepieces(builtin_tokenizer):
    # The lattice holds SentencePiece's pieces, scores and unknown nodes: its
    # best path is SentencePiece's segmentation, byte fallback included.
    vocabulary = UnigramVocabulary(builtin_tokenizer.model_proto)
    processor = builtin_tokenizer._processor
    corpus = builtin_corpus("val", max_pairs=150)
    odd = ["", "  ", "a\u2581b  \u2581", "\t", "x\u0301y \U0001d518nicode \U0001f600"]
    sentences = [*corpus.sources, *corpus.targets, UNSEEN, *odd]
    for sentence in sentences:
        assert sentence_ids(vocabulary, processor, sentence, "best") == (
            processor.encode(sentence)
        ), sentence


def test_the_lattice_holds_every_segmentation_with_its_score(builtin_tokenizer):
    vocabulary = UnigramVocabulary(builtin_tokenizer.model_proto)
    processor = builtin_tokenizer._processor
    corpus = builtin_corpus("val", max_pairs=20)
    words = {
        w
        for s in [*corpus.targets, UNSEEN]
        for w in vocabulary.words(processor.normalize(s))
    }
    tested = unknown = 0
    for word in sorted(words):
        paths = vocabulary.lattice(word).paths()
        if not 1 < len(paths) <= 200:
            continue
        tested += 1
        # (Byte pieces: the word has a character no piece covers.)
        unknown += any(i in vocabulary.byte_ids.values() for _, p in paths for i in p)
        nbest = processor.nbest_encode(
            word.replace("▁", " "), return_type="proto", nbest_size=len(paths) + 5
        ).nbests
        theirs = {tuple(p.id for p in n.pieces): n.score for n in nbest}
        ours = {ids: score for score, ids in paths}
        assert set(theirs) == set(ours), word
        for ids, score in theirs.items():
            assert ours[ids] == pytest.approx(score, abs=1e-4)
    assert unknown >= 1
    assert tested >= 10


def test_draws_follow_the_sharpened_distribution():
    pieces = {
        "▁ab": ((5,), -2.0),
        "▁": ((4,), -1.0),
        "a": ((6,), -1.5),
        "b": ((7,), -1.0),
        "ab": ((8,), -2.5),
        "▁a": ((9,), -3.0),
    }
    lattice = WordLattice("▁ab", pieces, 3, lambda c: (1,), -13.0)
    paths = lattice.paths()
    assert sorted(ids for _, ids in paths) == [(4, 6, 7), (4, 8), (5,), (9, 7)]
    generator = np.random.default_rng(0)
    for alpha in (0.2, 1.0):
        weights = {ids: math.exp(alpha * score) for score, ids in paths}
        total = sum(weights.values())
        draws = 20000
        counts = dict.fromkeys(weights, 0)
        for _ in range(draws):
            counts[tuple(lattice.sample(alpha, iter(generator.random(3))))] += 1
        for ids, weight in weights.items():
            # Four standard deviations of a frequency over 20000 draws.
            assert counts[ids] / draws == pytest.approx(weight / total, abs=0.015)
    assert lattice.best() == [5]


def test_unknown_characters_without_byte_fallback_are_one_unk():
    tokenizer = Tokenizer.train(
        ["a small example", "ein Beispiel"] * 20, vocab_size=60, byte_fallback=False
    )
    sentence = "ΩΨ small"
    expected = tokenizer._processor.encode(sentence)
    assert expected.count(UNK_ID) == 1
    for seed in range(3):
        drawn = tokenizer.tokenize_sampled([sentence], 1.0, seed=seed)[0]
        assert drawn.count(UNK_ID) == 1
        assert tokenizer._processor.decode(drawn) == tokenizer._processor.decode(
            expected
        )


def test_a_bpe_model_is_refused():
    tokenizer = Tokenizer.train(
        ["a small example", "ein Beispiel"] * 20, vocab_size=300, model_type="bpe"
    )
    with pytest.raises(ValueError, match="need a unigram model. Received: bpe"):
        tokenizer.tokenize_sampled(["a small"], 0.1, seed=0)


def test_draws_are_the_same_in_another_process(builtin_tokenizer, tmp_path):
    # SentencePiece's own draws are not (its generator is salted per process).
    builtin_tokenizer.save(tmp_path)
    sentences = list(builtin_corpus("val", max_pairs=40).targets) + [UNSEEN]
    program = (
        "import json, sys\n"
        "from keras_transformer.data.tokenizer import Tokenizer\n"
        f"t = Tokenizer.load({str(tmp_path)!r})\n"
        "sentences = json.loads(sys.stdin.read())\n"
        "print(json.dumps(t.tokenize_sampled(sentences, 0.1, seed=5)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program],
        input=json.dumps(sentences),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    drawn = builtin_tokenizer.tokenize_sampled(sentences, 0.1, seed=5)
    assert json.loads(result.stdout.strip().splitlines()[-1]) == drawn
    best = builtin_tokenizer.tokenize(tf.constant(sentences)).to_list()
    assert drawn != best


def test_limits_count_a_run_of_unknown_characters_once():
    tokenizer = Tokenizer.train(
        ["a small example", "ein Beispiel"] * 20, vocab_size=60, byte_fallback=False
    )
    sentence = "ΨΦΧΩ small example"
    best = tokenizer._processor.encode(sentence)
    drawn = [
        tokenizer.tokenize_sampled([sentence], 0.1, seed, longest=[len(best) + 2])[0]
        for seed in range(20)
    ]
    assert all(len(d) <= len(best) + 2 for d in drawn)
    assert sum(d != best for d in drawn) >= 5


def test_any_integer_seeds_a_draw(builtin_tokenizer):
    sentences = list(builtin_corpus("val", max_pairs=10).targets)
    # Taken modulo 2**64.
    assert builtin_tokenizer.tokenize_sampled(sentences, 0.5, seed=-1) == (
        builtin_tokenizer.tokenize_sampled(sentences, 0.5, seed=2**64 - 1)
    )
    assert builtin_tokenizer.tokenize_sampled(sentences, 0.5, seed=2**64) == (
        builtin_tokenizer.tokenize_sampled(sentences, 0.5, seed=0)
    )


def test_user_defined_symbols_across_words_keep_the_sentence_whole():
    tokenizer = Tokenizer.train(
        ["a small example", "ein kleines Beispiel"] * 20,
        vocab_size=300,
        user_defined_symbols=["New▁York"],
    )
    vocabulary = UnigramVocabulary(tokenizer.model_proto)
    assert not vocabulary.split_words
    processor = tokenizer._processor
    for sentence in ["ein New York example", "New York", "a small Beispiel"]:
        assert sentence_ids(vocabulary, processor, sentence, "best") == (
            processor.encode(sentence)
        )
        drawn = tokenizer.tokenize_sampled([sentence], 0.5, seed=0)[0]
        assert processor.decode(drawn) == sentence
