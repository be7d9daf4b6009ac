"""Train variants of a recipe for a fixed budget; score them on validation.

Shared by `recipe_levers.py` (choosing the shipped Multi30k recipe) and
`table3.py` (the paper's Table 3 at small scale). Only the validation split
is scored here: the test split is never used to choose anything.
"""

from __future__ import annotations

import json
import math
import os
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECIPE = os.path.join(REPO, "configs", "multi30k_en_de.yaml")
# The Multi30k files beside the repository where there are (the recipe
# downloads them otherwise); a `data.data_dir` override wins.
LOCAL_DATA = os.path.join(REPO, "..", "shared", "data", "multi30k")


def train_variant(out: str, overrides: dict, recipe: str = RECIPE):
    """Trains `recipe` with dotted `overrides` into `out` (test not scored).

    A finished run in `out` is reused, an unfinished one resumed.

    Returns:
        `(config, summary)`.
    """
    from keras_transformer.config import load_config
    from keras_transformer.jobs.train import train_from_config

    local = {"data.data_dir": LOCAL_DATA} if os.path.isdir(LOCAL_DATA) else {}
    config = load_config(recipe, {"output_dir": out, **local, **overrides})
    start = time.perf_counter()
    summary = train_from_config(config, verbose=0, evaluate=False)
    summary.setdefault("wall_seconds", round(time.perf_counter() - start, 1))
    return config, summary


def validation_perplexity(model, batches) -> float:
    """exp(mean negative log-likelihood per real target token), no smoothing."""
    import tensorflow as tf

    total, count = 0.0, 0
    for (source, target_in), target_out in batches:
        logits = tf.cast(model((source, target_in), training=False), tf.float32)
        nll = tf.nn.sparse_softmax_cross_entropy_with_logits(target_out, logits)
        real = tf.cast(target_out != 0, tf.float32)
        total += float(tf.reduce_sum(nll * real))
        count += int(tf.reduce_sum(real))
    return math.exp(total / count)


def validation_split(config):
    """The recipe's validation pairs as two lists of strings."""
    from keras_transformer.jobs.train import _pairs, load_splits

    return _pairs(load_splits(config)["valid"])


def score_validation(
    config, model, tokenizer, beam_size=None, alphas=None, perplexity=True
) -> dict:
    """Validation perplexity, and BLEU/chrF of beam search for each alpha.

    Returns:
        `{"valid_perplexity": ..., "valid": {alpha: scores}}` with sacrebleu's
        scores and signatures (`keras_transformer.evaluation`).
    """
    import tensorflow as tf

    from keras_transformer import data
    from keras_transformer.decoding import Translator
    from keras_transformer.evaluation import score_translations

    e = config.evaluation
    beam_size = beam_size or e.beam_size
    alphas = alphas or [e.alpha]
    sources, references = validation_split(config)
    result = {}
    if perplexity:
        from keras_transformer.jobs.train import load_splits

        batches = data.make_batches(
            load_splits(config)["valid"],
            tokenizer,
            max_length=config.data.max_length,
            token_budget=config.training.token_budget,
            shuffle=False,
        )
        result["valid_perplexity"] = round(validation_perplexity(model, batches), 3)
    translator = Translator(tokenizer, model, beam_size, e.alpha)
    scores = {}
    for alpha in alphas:
        outputs = []
        for i in range(0, len(sources), 1000):
            batch = tf.constant(sources[i : i + 1000])
            out = translator.translate(batch, beam_size, float(alpha))
            outputs += [t.decode("utf-8") for t in out["translations"].numpy()]
        scores[str(alpha)] = score_translations(outputs, references)
    result["valid"] = scores
    return result


def checkpoint_files(out: str) -> list[str]:
    """The run's checkpoints, oldest first."""
    from keras_transformer.training.checkpoints import checkpoint_prefixes

    return checkpoint_prefixes(os.path.join(out, "checkpoints"))


def update_json(path: str, key: str, value, **header) -> dict:
    """Sets `record["variants"][key] = value` in the JSON file, atomically."""
    record = {"variants": {}}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
    record.update(header)
    record.setdefault("variants", {})[key] = value
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=2)
    os.replace(temporary, path)
    return record
