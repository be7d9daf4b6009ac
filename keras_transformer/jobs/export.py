"""`keras-transformer export`: the string-to-string SavedModel of a model.

The result runs with TensorFlow and tensorflow-text only:
`tf.saved_model.load(path)(tf.constant(["A man rides a bike."]))` translates
with the exported settings, and `.translate(sentences, beam_size, alpha)`
with any.
"""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf

from keras_transformer.decoding import Translator
from keras_transformer.decoding.translator import BATCH_TOKENS


def export_translator(
    model_dir: str,
    out_dir: str,
    beam_size: int = 4,
    alpha: float = 0.6,
    batch_tokens: int = BATCH_TOKENS,
) -> str:
    """Writes the translator of the model in `model_dir` to `out_dir`.

    Args:
        model_dir: a directory written by `keras-transformer train`.
        out_dir: where the SavedModel goes.
        beam_size: beam size of its default signature (1 = greedy).
        alpha: length penalty of its default signature.
        batch_tokens: source tokens per search batch.

    Returns:
        `out_dir`.
    """
    from keras_transformer.pipeline import load_trained

    model, tokenizer = load_trained(model_dir)
    translator = Translator(
        tokenizer, model, beam_size=beam_size, alpha=alpha, batch_tokens=batch_tokens
    )
    tf.saved_model.save(translator, str(Path(out_dir)))
    return str(out_dir)
