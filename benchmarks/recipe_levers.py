"""One lever of the Multi30k recipe, measured on validation BLEU.

Trains `configs/multi30k_en_de.yaml` with the given dotted overrides for
`--minutes` (30 by default, the budget the recipe is judged on), writing an
averaging checkpoint every minute and keeping the last 12. Then, on the
**validation** split only (the test split is never scored here):

- validation perplexity of the model averaged as the recipe does;
- BLEU/chrF (sacrebleu) of beam 4 for several averaging choices made from
  the same run's checkpoints (the last 1, 5 one or two minutes apart, 8,
  12) and, for the best of them, several length penalties.

Results go into `--json` under the variant's name. Usage, from the
repository root:

    .venv/bin/python benchmarks/recipe_levers.py base
    .venv/bin/python benchmarks/recipe_levers.py warmup400 training.warmup_steps=400

Values are read as YAML (`0.2` is a float, `true` a boolean). A finished
run of the same name is scored again without training; with `--alphas-only`
its stored averaging results are kept and only the length penalties are
scored again (after `ALPHAS` grows); with `--beams 1 2 4 8` only beam sizes
are scored (BLEU and seconds for the split), at the variant's best averaging
and length penalty:

    .venv/bin/python benchmarks/recipe_levers.py tb2048 --beams 1 2 4 6 8
"""

from __future__ import annotations

import argparse
import json
import os

import yaml
from variants import (
    REPO,
    checkpoint_files,
    score_validation,
    train_variant,
    update_json,
    validation_split,
)

KEEP = 12
# name -> which checkpoints (newest last) to average, from every-minute ones.
AVERAGING = {
    "last 1": lambda files: files[-1:],
    "last 5, 1 min apart": lambda files: files[-5:],
    "last 5, 2 min apart": lambda files: files[::-2][:5][::-1],
    "last 8, 1 min apart": lambda files: files[-8:],
    "last 6, 2 min apart": lambda files: files[::-2][:6][::-1],
    "last 12, 1 min apart": lambda files: files[-12:],
}
ALPHAS = [0.6, 0.8, 1.0, 1.2, 1.5]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("name", help="the variant's name")
    parser.add_argument("overrides", nargs="*", help="dotted KEY=VALUE pairs")
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--out", default=os.path.join(REPO, "runs", "levers"))
    parser.add_argument(
        "--json",
        default=os.path.join(REPO, "benchmarks", "results", "recipe_levers.json"),
    )
    parser.add_argument(
        "--alphas-only",
        action="store_true",
        help="keep the stored averaging results; score the length penalties",
    )
    parser.add_argument(
        "--beams",
        type=int,
        nargs="+",
        help="keep the stored results; score these beam sizes",
    )
    args = parser.parse_args()
    overrides = {}
    for pair in args.overrides:
        key, _, value = pair.partition("=")
        overrides[key] = yaml.safe_load(value)

    from keras_transformer.jobs.run_dir import load_trained
    from keras_transformer.training import average_checkpoints

    out = os.path.join(args.out, args.name)
    config, summary = train_variant(
        out,
        {
            "training.minutes": args.minutes,
            "training.checkpoint_minutes": 1.0,
            "training.average_last": KEEP,
            "training.snapshot_minutes": [],
            **overrides,
        },
    )
    model, tokenizer = load_trained(out)
    files = checkpoint_files(out)
    result = {
        "overrides": overrides,
        "minutes": args.minutes,
        "steps": summary["steps"],
        "epochs": summary["epochs_run"],
        "parameters": summary["parameters"],
        "history": summary["history"],
        "averaging": {},
    }
    if args.beams:
        score_beams(args, config, model, tokenizer, files)
        return
    stored_alphas = {}
    if args.alphas_only:
        with open(args.json, encoding="utf-8") as f:
            stored = json.load(f)["variants"][args.name]
        result["averaging"] = stored["averaging"]
        stored_alphas = stored.get("alphas", {})
    for name, choose in AVERAGING.items():
        if name in result["averaging"]:
            continue
        chosen = choose(files)
        average_checkpoints(model, chosen)
        scores = score_validation(config, model, tokenizer, perplexity=False)
        result["averaging"][name] = {
            "checkpoints": [os.path.basename(f) for f in chosen],
            **scores["valid"][str(config.evaluation.alpha)],
        }
        print(args.name, name, result["averaging"][name]["bleu"], flush=True)
    best = max(result["averaging"], key=lambda n: result["averaging"][n]["bleu"])
    average_checkpoints(model, AVERAGING[best](files))
    scores = score_validation(config, model, tokenizer, alphas=ALPHAS)
    result["best_averaging"] = best
    result["valid_perplexity"] = scores["valid_perplexity"]
    scored = {a: s["bleu"] for a, s in scores["valid"].items()}
    merged = {**stored_alphas, **scored}
    result["alphas"] = {a: merged[a] for a in sorted(merged, key=float)}
    print(args.name, best, result["alphas"], flush=True)
    update_json(args.json, args.name, result, split="valid")


def score_beams(args, config, model, tokenizer, files) -> None:
    """Validation BLEU and decoding seconds of each beam size in `args.beams`.

    At the variant's best averaging and best length penalty, both stored by
    an earlier run of this script; other stored results are kept. The
    seconds are those of a second pass over the split (the first traces).
    """
    import time

    import tensorflow as tf

    from keras_transformer.decoding import Translator
    from keras_transformer.evaluation import score_translations
    from keras_transformer.training import average_checkpoints

    with open(args.json, encoding="utf-8") as f:
        stored = json.load(f)["variants"][args.name]
    alpha = max(stored["alphas"], key=lambda a: stored["alphas"][a])
    average_checkpoints(model, AVERAGING[stored["best_averaging"]](files))
    sources, references = validation_split(config)
    beams = dict(stored.get("beams", {}))
    for beam in args.beams:
        translator = Translator(tokenizer, model, beam, float(alpha))
        for _ in range(2):
            start = time.perf_counter()
            out = translator.translate(tf.constant(sources), beam, float(alpha))
            seconds = time.perf_counter() - start
        outputs = [t.decode("utf-8") for t in out["translations"].numpy()]
        scores = score_translations(outputs, references)
        beams[str(beam)] = {
            "alpha": float(alpha),
            "bleu": scores["bleu"],
            "chrf": scores["chrf"],
            "seconds": round(seconds, 2),
        }
        print(args.name, "beam", beam, beams[str(beam)], flush=True)
    stored["beams"] = {b: beams[b] for b in sorted(beams, key=int)}
    update_json(args.json, args.name, stored, split="valid")


if __name__ == "__main__":
    main()
