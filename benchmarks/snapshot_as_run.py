"""A step snapshot of an unfinished run, finished as a run of that many steps.

A run whose recipe sets `training.snapshot_steps` keeps, at each of those
steps, its newest checkpoints and the best ones so far
(`RUN/snapshots/step_S/`), and turns them into a model only when the run
ends. To judge a long run at a snapshot while it still trains, or after it
was stopped, this script copies the run's recipe, tokenizer, prepared
corpus and logs and the snapshot's checkpoints into a new run directory
whose newest training state is step S, and trains that run for S steps:
it resumes at S, trains no step, and chooses its final model as a run of
S steps does (the best on validation perplexity of the last checkpoints'
average, the best ones' average and the best one). The run it copies is
only read.

Usage (from the repository root):

    .venv/bin/python benchmarks/snapshot_as_run.py --run runs/two_hours_s0 \\
        --step 5510 --output runs/two_hours_s0_5510
    .venv/bin/python benchmarks/bleu_by_steps.py --run runs/two_hours_s0_5510 \\
        --out benchmarks/results/bleu_two_hours_s0_5510
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

COPIED = ("config.yaml", "run.json", "tokenizer", "prepared", "logs")


def copy_snapshot(run: str | os.PathLike, step: int, output: str | os.PathLike):
    """Writes `output`: a run of `run`'s recipe whose newest state is `step`.

    Raises:
        SystemExit: `run` has no snapshot at `step`, or `output` exists.
    """
    from keras_transformer.training.checkpoints import _link_or_copy

    run, output = Path(run), Path(output)
    snapshot = run / "snapshots" / f"step_{step}"
    info_file = snapshot / "snapshot.json"
    if not info_file.is_file():
        taken = sorted(
            p.parent.name for p in run.glob("snapshots/step_*/snapshot.json")
        )
        raise SystemExit(
            f"--step {step}: {run} has no snapshot of that step "
            f"(snapshots: {', '.join(taken) or 'none'})"
        )
    if output.exists():
        raise SystemExit(f"--output {output}: exists; name a new folder")
    info = json.loads(info_file.read_text(encoding="utf-8"))
    partial = output.with_name(output.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    for name in COPIED:
        source = run / name
        if source.is_dir():
            shutil.copytree(source, partial / name)
        elif source.is_file():
            shutil.copy2(source, partial / name)
    checkpoints = partial / "checkpoints"
    checkpoints.mkdir()
    for name in info["checkpoints"]:
        for file in snapshot.glob(name + ".*"):
            _link_or_copy(str(file), str(checkpoints / file.name))
    if (snapshot / "best").is_dir():
        shutil.copytree(
            snapshot / "best", checkpoints / "best", copy_function=_link_or_copy
        )
    # The index tf.train.CheckpointManager reads: the snapshot's step newest.
    lines = [f'model_checkpoint_path: "{info["checkpoints"][-1]}"']
    lines += [f'all_model_checkpoint_paths: "{n}"' for n in info["checkpoints"]]
    (checkpoints / "checkpoint").write_text("\n".join(lines) + "\n", encoding="utf-8")
    partial.rename(output)


def snapshot_as_run(run: str, step: int, output: str) -> dict:
    """Copies the snapshot (`copy_snapshot`), then trains the copy to `step`.

    Returns:
        The copy's `summary.json`: which checkpoints its model came from.
    """
    from keras_transformer.jobs.train import train_command

    copy_snapshot(run, step, output)
    overrides = {"training.steps": step, "output_dir": str(output)}
    summary = train_command(str(Path(output, "config.yaml")), overrides, evaluate=False)
    if summary["steps"] != step:
        raise SystemExit(f"--step {step}: the copy ended at step {summary['steps']}")
    final = summary["final_model"]
    print(
        f"step {step}: {final['choice']} ({', '.join(final['checkpoints'])})",
        file=sys.stderr,
    )
    return summary


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", required=True, help="a run with step snapshots")
    parser.add_argument("--step", type=int, required=True, help="the snapshot's step")
    parser.add_argument("--output", required=True, help="the new run's folder")
    args = parser.parse_args(argv)
    return snapshot_as_run(args.run, args.step, args.output)


if __name__ == "__main__":
    main()
