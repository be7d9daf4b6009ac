"""Corpus BLEU and chrF with sacrebleu, on detokenized, cased text."""

from __future__ import annotations

from collections.abc import Sequence

import sacrebleu


def score_translations(hypotheses: Sequence[str], references: Sequence[str]) -> dict:
    """Corpus-level BLEU and chrF, with sacrebleu's signatures.

    Scores are computed on detokenized, cased text with sacrebleu's default
    13a tokenization, so they compare with published sacreBLEU numbers.
    BLEU's length ratio (hypothesis tokens over reference tokens), brevity
    penalty and n-gram precisions come with it: a length penalty `alpha`
    that raises BLEU through the brevity penalty while the precisions fall
    fits the references' length, not the n-grams.

    Args:
        hypotheses: one translation per line.
        references: one reference per line, aligned with `hypotheses`.

    Returns:
        `{"bleu": float, "chrf": float, "length_ratio": float,
        "brevity_penalty": float, "precisions": [float] * 4 (1- to 4-grams,
        percent), "bleu_signature": str,
        "chrf_signature": str, "sentences": int}`.

    Raises:
        ValueError: the two lists have different lengths, or are empty.

    Example:

    >>> s = score_translations(["Ein Mann fährt Rad ."], ["Ein Mann fährt Rad ."])
    >>> s["bleu"], s["chrf"]
    (100.0, 100.0)
    >>> s = score_translations(["Ein Mann fährt"], ["Ein Mann fährt Rad ."])
    >>> s["length_ratio"], s["brevity_penalty"]  # 3 tokens of 5; exp(1 - 5/3)
    (0.6, 0.5134)
    >>> s["precisions"]  # no 4-gram in 3 tokens
    [100.0, 100.0, 100.0, 0.0]
    """
    hypotheses, references = list(hypotheses), list(references)
    if len(hypotheses) != len(references):
        raise ValueError(
            "`hypotheses` and `references` must have the same length. "
            f"Received: {len(hypotheses)} hypotheses, {len(references)} references"
        )
    if not hypotheses:
        raise ValueError("No sentences to score: both lists are empty")
    bleu = sacrebleu.metrics.BLEU()
    chrf = sacrebleu.metrics.CHRF()
    bleu_score = bleu.corpus_score(hypotheses, [references])
    chrf_score = chrf.corpus_score(hypotheses, [references])
    return {
        "bleu": round(bleu_score.score, 2),
        "chrf": round(chrf_score.score, 2),
        "length_ratio": round(bleu_score.ratio, 4),  # 0 without reference tokens
        "brevity_penalty": round(bleu_score.bp, 4),
        "precisions": [round(p, 2) for p in bleu_score.precisions],
        "bleu_signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
        "sentences": len(hypotheses),
    }
