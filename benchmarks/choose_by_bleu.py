"""Choosing a run's final model among its step models by validation BLEU.

A run of a step-limited recipe passes through models as good as its last
one: its step snapshots (`training.snapshot_steps`). Choosing the final
model among them by validation BLEU looks good on that same validation
set whatever it is worth, since the best of a few noisy scores is
picked. This script measures what the choice is worth on sentences it
did not see: it translates the validation split once with each
candidate (beam size and length penalty of the run's recipe), then, for
`--splits` random halvings of the sentences, chooses on one half by
BLEU and scores the chosen model on the other half against the run's
final model there. Ties go to the later step.

It writes `OUT.json`:

- `candidates`: per step model its folder, BLEU and chrF on the whole split;
- `chosen`: the step the whole split chooses;
- `held_out`: the halvings' mean BLEU and chrF gain of the chosen model
  over the final one on the unseen half (with their standard deviations),
  and how often each step was chosen.

Validation only: test data is not read.

Usage (from the repository root):

    .venv/bin/python benchmarks/choose_by_bleu.py --run runs/two_hours_s0 \\
        --steps 10000 12000 14000 --out benchmarks/results/choose/seed0

`--data` and `--valid` name the validation split as for `bleu_by_steps.py`.
"""

from __future__ import annotations

import argparse
import os
import statistics

from bleu_by_steps import (
    DEFAULT_DATA,
    REPO,
    add_validation_arguments,
    model_row,
    step_snapshots,
    translations,
    validation_header,
    validation_pairs,
    write_result,
)

DEFAULT_OUT = os.path.join(REPO, "benchmarks", "results", "choose_by_bleu")


def _bleu(hypotheses: list[str], references: list[str]) -> float:
    import sacrebleu

    return sacrebleu.metrics.BLEU().corpus_score(hypotheses, [references]).score


def _chrf(hypotheses: list[str], references: list[str]) -> float:
    import sacrebleu

    return sacrebleu.metrics.CHRF().corpus_score(hypotheses, [references]).score


def choose(hypotheses: dict[int, list[str]], references: list[str]) -> int:
    """The step whose translations score the highest BLEU; ties: the later.

    >>> choose({1: ["ein Hund"], 2: ["ein Hund"]}, ["ein Hund"])
    2
    >>> choose({1: ["ein Hund ."], 2: ["eine Katze ."]}, ["ein Hund ."])
    1
    """
    scores = {step: _bleu(h, references) for step, h in hypotheses.items()}
    return max(scores, key=lambda step: (scores[step], step))


def _part(lines: list[str], rows) -> list[str]:
    return [lines[i] for i in rows]


def held_out_gains(
    hypotheses: dict[int, list[str]],
    references: list[str],
    splits: int = 200,
    seed: int = 0,
) -> dict:
    """Chosen on a random half, scored on the other against the last step.

    Args:
        hypotheses: `{step: translations}` of each candidate; the largest
            step is the run's final model.
        references: one per sentence, aligned with each candidate's.
        splits: how many random halvings.
        seed: the halvings' random seed.

    Returns:
        `{"splits", "seed", "bleu_gain", "bleu_gain_std", "chrf_gain",
        "chrf_gain_std", "chosen": {"step": times}}`: gains in BLEU and chrF
        points of the chosen model over the final one on the unseen half,
        averaged over the halvings.
    """
    import numpy as np

    final = max(hypotheses)
    rng = np.random.default_rng(seed)
    half = len(references) // 2
    bleu, chrf, chosen = [], [], dict.fromkeys(sorted(hypotheses), 0)
    for _ in range(splits):
        order = rng.permutation(len(references))
        seen, unseen = order[:half], order[half:]

        step = choose(
            {s: _part(h, seen) for s, h in hypotheses.items()}, _part(references, seen)
        )
        chosen[step] += 1
        references_unseen = _part(references, unseen)
        mine = _part(hypotheses[step], unseen)
        last = _part(hypotheses[final], unseen)
        bleu.append(_bleu(mine, references_unseen) - _bleu(last, references_unseen))
        chrf.append(_chrf(mine, references_unseen) - _chrf(last, references_unseen))
    return {
        "splits": splits,
        "seed": seed,
        "bleu_gain": round(statistics.fmean(bleu), 3),
        "bleu_gain_std": round(statistics.pstdev(bleu), 3),
        "chrf_gain": round(statistics.fmean(chrf), 3),
        "chrf_gain_std": round(statistics.pstdev(chrf), 3),
        "chosen": {str(step): times for step, times in chosen.items()},
    }


def choose_by_bleu(
    run: str,
    steps: list[int] | None = None,
    out: str = DEFAULT_OUT,
    valid: str = "multi30k",
    data_dir: str = DEFAULT_DATA,
    limit: int | None = None,
    splits: int = 200,
    seed: int = 0,
) -> dict:
    """Scores the choice among `run`'s step models; writes `out.json`.

    Raises:
        SystemExit: a step in `steps` has no model in the run, or `steps`
            leaves out the run's final model.
    """
    from keras_transformer.evaluation import score_translations
    from keras_transformer.jobs.run_dir import search_settings

    models = dict(step_snapshots(run))
    if not models:
        raise SystemExit(f"--run {run}: no finished model and no step snapshots")
    steps = sorted(set(steps or models))
    missing = [step for step in steps if step not in models]
    if missing:
        raise SystemExit(
            f"--steps {' '.join(map(str, missing))}: no model of that step in "
            f"{run} (it has {', '.join(map(str, sorted(models)))})"
        )
    if max(models) not in steps:
        raise SystemExit(
            f"--steps {' '.join(map(str, steps))}: leaves out the run's final "
            f"model, step {max(models)}, which the choice is measured against"
        )
    sources, references = validation_pairs(run, valid, data_dir)
    sources, references = sources[:limit], references[:limit]
    search = search_settings(models[steps[0]])
    hypotheses, rows = {}, []
    for step in steps:
        hypotheses[step] = translations(models[step], sources, search)
        scores = score_translations(hypotheses[step], references)
        rows.append(model_row(run, step, models[step], scores))
    result = {
        **validation_header(run, valid, len(sources)),
        **search,
        "candidates": rows,
        "chosen": choose(hypotheses, references),
        "held_out": held_out_gains(hypotheses, references, splits, seed),
    }
    write_result(out, result)
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_validation_arguments(parser)
    parser.add_argument(
        "--steps",
        type=int,
        nargs="+",
        help="the candidates' steps, the run's final one among them (default: all)",
    )
    parser.add_argument("--splits", type=int, default=200, help="random halvings")
    parser.add_argument("--seed", type=int, default=0, help="the halvings' seed")
    parser.add_argument("--out", default=DEFAULT_OUT, help="writes OUT.json")
    args = parser.parse_args(argv)
    if args.splits < 1:
        parser.error(f"--splits {args.splits}: must be at least 1")
    return choose_by_bleu(
        args.run,
        args.steps,
        args.out,
        args.valid,
        args.data,
        args.limit,
        args.splits,
        args.seed,
    )


if __name__ == "__main__":
    main()
