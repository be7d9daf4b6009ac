"""`keras-transformer evaluate`: sacrebleu BLEU and chrF of a trained model.

The sources are translated as `translate` does (the exported translator when
there is one, any beam size), with a progress bar on stderr; the scores,
BLEU's length ratio, brevity penalty and precisions, and the sacrebleu
signatures are returned (`evaluation.score_translations`).
"""

from __future__ import annotations

import sys

from tqdm.auto import tqdm

from keras_transformer.data import load_parallel_files
from keras_transformer.evaluation import score_translations
from keras_transformer.jobs.translate import (
    CHUNK_LINES,
    load_translator,
    translate_stream,
)


def evaluate_files(
    model_dir: str,
    source_path: str,
    reference_path: str,
    beam_size: int = 4,
    alpha: float = 0.6,
) -> dict:
    """Scores the model in `model_dir` on a source/reference pair of files.

    Args:
        model_dir: a directory written by `keras-transformer train`.
        source_path: source sentences, one per line (plain or .gz).
        reference_path: reference translations, aligned with the sources.
        beam_size: beam size (1 = greedy).
        alpha: length penalty.

    Returns:
        `score_translations`'s scores and signatures.

    Raises:
        ValueError: the files hold no sentence pairs, or different numbers
            of lines.
    """
    corpus = load_parallel_files(source_path, reference_path)
    if not len(corpus):
        raise ValueError(
            f"--source {source_path!r}, --reference {reference_path!r}: no "
            "sentence pairs to score"
        )
    translate = load_translator(model_dir, beam_size=beam_size, alpha=alpha)
    hypotheses: list[str] = []
    with tqdm(total=len(corpus.sources), unit="sentence", file=sys.stderr) as bar:
        for chunk in translate_stream(
            translate, corpus.sources, CHUNK_LINES, source_path
        ):
            hypotheses += chunk
            bar.update(len(chunk))
    return score_translations(hypotheses, list(corpus.targets))
