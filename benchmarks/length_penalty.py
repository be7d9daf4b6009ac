"""Validation BLEU of trained runs for several length penalties (alpha).

A recipe's `evaluation.alpha` is chosen on the validation split. This
script translates that split with each run's model once per alpha, as
`evaluate` does (the beam size of the run's recipe unless `--beam`), and writes
`OUT.json`: `evaluate`'s scores (BLEU, chrF, BLEU's length ratio, brevity
penalty and precisions) per run and alpha, the mean BLEU over the runs per
alpha and the alpha with the best mean. The same table goes to stdout.

The validation split is Multi30k `val` (1014 sentences) from `--data`, or,
with `--valid run`, the validation split of the first run's recipe.

Usage (from the repository root), for two seeds of a recipe:

    .venv/bin/python benchmarks/length_penalty.py --run runs/s0 --run runs/s1 \\
        --alphas 1.0 1.2 1.5 1.8 2.0 --out benchmarks/results/length_penalty

Without `--data`, Multi30k is read from `../shared/data/multi30k` beside the
repository; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from bleu_by_steps import DEFAULT_DATA, REPO, score_snapshot, validation_pairs

DEFAULT_OUT = os.path.join(REPO, "benchmarks", "results", "length_penalty")


def length_penalty_sweep(
    runs: list[str],
    alphas: list[float],
    out: str = DEFAULT_OUT,
    beam_size: int | None = None,
    valid: str = "multi30k",
    data_dir: str = DEFAULT_DATA,
    limit: int | None = None,
) -> dict:
    """Scores every run at every alpha; writes `out.json`.

    Returns:
        What `out.json` holds.
    """
    from keras_transformer.jobs.run_dir import search_settings

    names = [Path(run).resolve().name for run in runs]
    if len(set(names)) < len(names):
        raise SystemExit(f"--run: two runs share a folder name: {names}")
    sources, references = validation_pairs(runs[0], valid, data_dir)
    sources, references = sources[:limit], references[:limit]
    scores = {}
    for name, run in zip(names, runs, strict=True):
        beam = beam_size or search_settings(run)["beam_size"]
        scores[name] = {}
        for alpha in alphas:
            search = {"beam_size": beam, "alpha": alpha}
            scores[name][f"{alpha:g}"] = {
                "beam_size": beam,
                **score_snapshot(Path(run), sources, references, search),
            }
    mean = {
        f"{alpha:g}": round(
            sum(scores[name][f"{alpha:g}"]["bleu"] for name in names) / len(names), 3
        )
        for alpha in alphas
    }
    result = {
        "validation": "multi30k val" if valid == "multi30k" else "the run's own",
        "sentences": len(sources),
        "runs": names,
        "scores": scores,
        "mean_bleu": mean,
        "best_alpha": float(max(mean, key=mean.get)),
    }
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    Path(out + ".json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def table(result: dict) -> str:
    """A Markdown table: per alpha and run BLEU (chrF, length ratio), mean last."""
    runs = result["runs"]
    lines = [
        "| alpha | " + " | ".join(runs) + " | mean BLEU |",
        "|---" * (len(runs) + 2) + "|",
    ]
    for alpha, mean in result["mean_bleu"].items():
        cells = [
            "{bleu} ({chrf}, {length_ratio})".format(**result["scores"][run][alpha])
            for run in runs
        ]
        best = float(alpha) == result["best_alpha"]
        mean_cell = f"**{mean}**" if best else str(mean)
        lines.append(f"| {alpha} | " + " | ".join(cells) + f" | {mean_cell} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--run", action="append", required=True, help="a finished run (repeat)"
    )
    parser.add_argument(
        "--alphas", type=float, nargs="+", required=True, help="length penalties"
    )
    parser.add_argument("--out", default=DEFAULT_OUT, help="writes OUT.json")
    parser.add_argument("--beam", type=int, help="beam size (default: the run's)")
    parser.add_argument(
        "--valid",
        choices=["multi30k", "run"],
        default="multi30k",
        help="Multi30k val from --data, or the first run's own validation split",
    )
    parser.add_argument("--data", default=DEFAULT_DATA, help="Multi30k's folder")
    parser.add_argument("--limit", type=int, help="only the first N sentences")
    args = parser.parse_args(argv)
    if any(alpha < 0 for alpha in args.alphas):
        parser.error(f"--alphas: {args.alphas} holds a negative value")
    if args.beam is not None and args.beam < 1:
        parser.error(f"--beam: {args.beam} (at least 1)")
    if args.limit is not None and args.limit < 1:
        parser.error(f"--limit: {args.limit} (at least 1)")
    result = length_penalty_sweep(
        args.run, args.alphas, args.out, args.beam, args.valid, args.data, args.limit
    )
    print(table(result))
    return result


if __name__ == "__main__":
    main()
