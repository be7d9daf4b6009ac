"""`score_translations`: sacrebleu's scores, and BLEU's length terms by hand."""

import math

import pytest

from keras_transformer.evaluation import score_translations

REFERENCES = ["Ein Mann fährt Rad.", "Zwei Hunde spielen im Schnee."]


def test_length_ratio_and_brevity_penalty_count_13a_tokens():
    # 13a splits the final full stops: the references hold 5 + 6 tokens,
    # the hypotheses 4 + 3.
    short = score_translations(["Ein Mann fährt.", "Zwei Hunde."], REFERENCES)
    assert short["length_ratio"] == round(7 / 11, 4)
    assert short["brevity_penalty"] == round(math.exp(1 - 11 / 7), 4)
    long = score_translations(
        ["Ein Mann fährt ein Rad.", "Zwei Hunde spielen im Schnee."], REFERENCES
    )
    assert long["length_ratio"] == round(12 / 11, 4)
    assert long["brevity_penalty"] == 1.0
    exact = score_translations(REFERENCES, REFERENCES)
    assert (exact["bleu"], exact["length_ratio"], exact["brevity_penalty"]) == (
        100.0,
        1.0,
        1.0,
    )
    assert exact["sentences"] == 2


def test_bleu_is_the_brevity_penalty_times_the_precisions_mean():
    # One sentence of 5 tokens against 6: every n-gram of it matches.
    scores = score_translations(["Zwei Hunde spielen im Schnee"], [REFERENCES[1]])
    assert scores["length_ratio"] == round(5 / 6, 4)
    assert scores["brevity_penalty"] == round(math.exp(1 - 6 / 5), 4)
    assert scores["precisions"] == [100.0] * 4
    assert scores["bleu"] == round(100 * math.exp(1 - 6 / 5), 2)
    # 4 of 4 unigrams, 2 of 3 bigrams: the precisions are read per order.
    gap = score_translations(["Zwei Hunde im Schnee"], [REFERENCES[1]])
    assert gap["precisions"][:2] == [100.0, 66.67]


def test_empty_references_score_zero():
    scores = score_translations([""], [""])
    assert (scores["bleu"], scores["length_ratio"]) == (0.0, 0.0)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="1 hypotheses, 2 references"):
        score_translations(["Ein Mann"], REFERENCES)
    with pytest.raises(ValueError, match="both lists are empty"):
        score_translations([], [])
