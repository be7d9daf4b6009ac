"""Validation scores of the averages a finished run's checkpoints allow.

A run ends with the best on validation perplexity of the average of its
last `training.average_last` checkpoints, the average of the best ones it
kept (`checkpoints/best/`) and the best one. This script scores those and
two larger averages on the validation split, perplexity and BLEU (with
the beam size and length penalty of the run's recipe), to see what
averaging more would give:

- `best`: the kept best checkpoints' average;
- `last`: the last `average_last` checkpoints' average;
- `kept`: every checkpoint left in `checkpoints/` (one more than `last`);
- `all`: every checkpoint the run kept, best and last (each once).

It writes `OUT.json`: per average its checkpoints, validation perplexity,
sacrebleu BLEU and chrF. Validation only: test data is not read.

Usage (from the repository root):

    .venv/bin/python benchmarks/checkpoint_averages.py --run runs/two_hours_s0 \\
        --out benchmarks/results/rdrop/averages_alpha1_seed0_11020

Without `--data`, Multi30k val is read from `../shared/data/multi30k` beside
the repository; `--valid run` scores the run's own validation split.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from bleu_by_steps import (
    DEFAULT_DATA,
    REPO,
    add_validation_arguments,
    run_config,
    validation_header,
    validation_pairs,
    write_result,
)

DEFAULT_OUT = os.path.join(REPO, "benchmarks", "results", "checkpoint_averages")


def candidates(run: str | os.PathLike, average_last: int) -> dict[str, list[str]]:
    """The checkpoint prefixes of each average, oldest first; empty ones left out."""
    from keras_transformer.training.checkpoints import checkpoint_prefixes

    folder = Path(run, "checkpoints")
    kept = checkpoint_prefixes(folder)
    best = checkpoint_prefixes(folder / "best")
    names = {Path(p).name for p in kept}

    def step(prefix):
        return int(prefix.rsplit("-", 1)[1])

    found = {
        "best": best,
        "last": kept[-max(average_last, 1) :],
        "kept": kept,
        "all": sorted([p for p in best if Path(p).name not in names] + kept, key=step),
    }
    return {name: prefixes for name, prefixes in found.items() if prefixes}


def checkpoint_averages(
    run: str,
    out: str = DEFAULT_OUT,
    valid: str = "multi30k",
    data_dir: str = DEFAULT_DATA,
    limit: int | None = None,
) -> dict:
    """Scores each average of `run`'s checkpoints; writes `out.json`."""
    import tensorflow as tf

    from keras_transformer import data
    from keras_transformer.decoding import Translator
    from keras_transformer.evaluation import score_translations
    from keras_transformer.jobs.run_dir import load_trained, search_settings
    from keras_transformer.losses import MaskedCrossEntropy
    from keras_transformer.metrics import Perplexity
    from keras_transformer.training import average_checkpoints

    config = run_config(run)
    averages = candidates(run, config.training.average_last)
    if not averages:
        raise SystemExit(f"--run {run}: no checkpoints in {Path(run, 'checkpoints')}")
    sources, references = validation_pairs(run, valid, data_dir)
    sources, references = sources[:limit], references[:limit]
    search = search_settings(Path(run))
    model, tokenizer = load_trained(run)
    model.compile(loss=MaskedCrossEntropy(), metrics=[Perplexity(name="perplexity")])
    batches = data.make_batches(
        data.ParallelCorpus(tuple(sources), tuple(references)),
        tokenizer,
        shuffle=False,
        max_length=config.data.max_length,
        token_budget=config.training.token_budget,
    )
    settings = (
        tf.constant(search["beam_size"], tf.int32),
        tf.constant(search["alpha"], tf.float32),
    )
    rows = {}
    for name, prefixes in averages.items():
        average_checkpoints(model, prefixes)
        perplexity = model.evaluate(batches, verbose=0, return_dict=True)["perplexity"]
        translator = Translator(tokenizer, model)
        hypotheses = []
        for i in range(0, len(sources), 256):
            batch = tf.constant(sources[i : i + 256], tf.string)
            found = translator.translate(batch, *settings)["translations"]
            hypotheses += [h.decode("utf-8") for h in found.numpy()]
        rows[name] = {
            "checkpoints": [Path(p).parent.name + "/" + Path(p).name for p in prefixes],
            "valid_perplexity": round(float(perplexity), 4),
            **score_translations(hypotheses, references),
        }
        print(
            f"{name}: {len(prefixes)} checkpoints, perplexity "
            f"{rows[name]['valid_perplexity']}, BLEU {rows[name]['bleu']}",
            file=sys.stderr,
        )
    result = {
        **validation_header(run, valid, len(sources)),
        **search,
        "averages": rows,
    }
    write_result(out, result)
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_validation_arguments(parser)
    parser.add_argument("--out", default=DEFAULT_OUT, help="writes OUT.json")
    args = parser.parse_args(argv)
    return checkpoint_averages(args.run, args.out, args.valid, args.data, args.limit)


if __name__ == "__main__":
    main()
