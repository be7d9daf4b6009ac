"""Peak memory and time of `keras-transformer train` against the corpus size.

Repeats Multi30k's 29000 English-German training pairs, line after line,
into corpora of `--pairs` pairs (gzip files under `--work`, made once), and
for each runs a fresh `keras-transformer train --steps 20 --no-evaluate`
under `/usr/bin/time -v`: its peak resident memory (the process tree's
largest) and its wall time, tokenizer training and corpus preparation
included. The recipe is configs/multi30k_en_de.yaml's model and batches
(`small` preset with 2 layers, 2048-token batches, max_length 64, 8000
ids), reading the files (`data.corpus: files`, the Multi30k validation
split as `valid_files`). With `--again`, the same recipe is then trained
into a second output directory that shares the first one's prepared
corpus (`data.prepared_dir`): the time of a later run, which reuses the
tokenizer and the shards.

`--repo` runs another checkout (e.g. the code before streaming, for the
comparison in docs/benchmarks.md); its recipes must accept the keys used.

Usage (from the repository root; docs/benchmarks.md's measurement):

    .venv/bin/python benchmarks/streaming_memory.py \\
        --pairs 100000 1000000 4500000 --again --json /tmp/streaming.jsonl
    git worktree add ../before bf6f351  # the code before streaming
    .venv/bin/python benchmarks/streaming_memory.py \\
        --pairs 100000 1000000 4500000 \\
        --repo ../before --label before --json /tmp/before.jsonl
    .venv/bin/python benchmarks/streaming_memory.py \\
        --plot-only /tmp/streaming.jsonl --baseline /tmp/before.jsonl \\
        --plot docs/img/streaming_memory.png

Prints one JSON line per corpus as it goes, then a table.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MULTI30K = os.path.join(REPO, "..", "shared", "data", "multi30k")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--data-dir", default=MULTI30K, help="Multi30k's .gz files")
    parser.add_argument("--work", default="/tmp/keras_transformer_streaming")
    parser.add_argument("--repo", default=REPO, help="the checkout to run")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--again", action="store_true", help="also a later run")
    parser.add_argument("--label", default="streaming")
    parser.add_argument("--json", help="append the JSON result to this file")
    parser.add_argument("--plot", help="PNG of peak memory against pairs")
    parser.add_argument(
        "--baseline",
        help="JSON lines of an earlier run of this script (e.g. --repo of the "
        "code before), drawn beside in the plot",
    )
    parser.add_argument(
        "--plot-only",
        help="JSON lines of an earlier run: draw --plot from them, run nothing",
    )
    return parser.parse_args(argv)


def corpus(args, pairs: int) -> tuple[str, str]:
    """`train.{en,de}.gz` of `pairs` pairs: Multi30k train, repeated."""
    directory = os.path.join(args.work, f"multi30k_x{pairs}")
    paths = tuple(os.path.join(directory, f"train.{lang}.gz") for lang in ("en", "de"))
    if all(os.path.exists(p) for p in paths):
        return paths
    os.makedirs(directory, exist_ok=True)
    for lang, path in zip(("en", "de"), paths, strict=True):
        with gzip.open(os.path.join(args.data_dir, f"train.{lang}.gz"), "rt") as f:
            lines = f.read().splitlines()
        temporary = f"{path}.tmp"
        with gzip.open(temporary, "wt", encoding="utf-8", compresslevel=1) as f:
            for line in itertools.islice(itertools.cycle(lines), pairs):
                f.write(line + "\n")
        os.replace(temporary, path)
    return paths


def recipe(args, files, output, prepared_dir=None) -> str:
    data = {
        "corpus": "files",
        "train_files": list(files),
        "valid_files": [
            os.path.join(args.data_dir, "val.en.gz"),
            os.path.join(args.data_dir, "val.de.gz"),
        ],
        "max_length": 64,
    }
    if prepared_dir is not None:
        data["prepared_dir"] = prepared_dir
    text = json.dumps(
        {
            "data": data,
            "tokenizer": {"vocab_size": 8000},
            "model": {"preset": "small", "overrides": {"num_layers": 2}},
            "training": {
                "token_budget": 2048,
                "warmup_steps": 800,
                "checkpoint_minutes": 1,
                "average_last": 5,
                "seed": 0,
            },
            "output_dir": output,
        }
    )
    path = f"{output}.yaml"
    with open(path, "w") as f:
        f.write(text)  # JSON is YAML
    return path


def run(args, config: str) -> dict:
    """`keras-transformer train` under /usr/bin/time -v: peak RSS, seconds."""
    command = [
        "/usr/bin/time",
        "-v",
        sys.executable,
        "-m",
        "keras_transformer",
        "train",
        "--config",
        config,
        "--steps",
        str(args.steps),
        "--no-evaluate",
    ]
    env = dict(os.environ, PYTHONPATH=args.repo, TF_CPP_MIN_LOG_LEVEL="3")
    start = time.perf_counter()
    result = subprocess.run(command, cwd=args.repo, env=env, capture_output=True)
    seconds = time.perf_counter() - start
    stderr = result.stderr.decode(errors="replace")
    if result.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{stderr[-3000:]}")
    peak_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", stderr)[1])
    return {"peak_gb": round(peak_kb / 1e6, 2), "seconds": round(seconds, 1)}


def plot(rows, path, baseline=None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6.4, 3.8))
    series = [
        (rows, "peak_gb", "o-", "streamed: a fresh run (tokenizer trained)"),
        (
            [{"pairs": r["pairs"], **r["again"]} for r in rows if "again" in r],
            "peak_gb",
            "s-",
            "streamed: a later run (tokenizer, shards reused)",
        ),
    ]
    if baseline:
        series.append((baseline, "peak_gb", "x--", "before: every pair in memory"))
    for points, key, style, label in series:
        points = sorted(points, key=lambda row: row["pairs"])
        xs = [row["pairs"] / 1e6 for row in points]
        axis.plot(xs, [row[key] for row in points], style, label=label)
    axis.set_xlabel("training pairs (millions; Multi30k repeated)")
    axis.set_ylabel("peak memory (GB)")
    axis.set_title("keras-transformer train --steps 20, 2 CPU cores")
    axis.set_ylim(bottom=0)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main(argv=None) -> list[dict]:
    args = parse_args(argv)
    rows = []
    if args.plot_only:
        with open(args.plot_only) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        args.pairs = []
    for pairs in args.pairs:
        files = corpus(args, pairs)
        output = os.path.join(args.work, f"run_{args.label}_{pairs}")
        for leftover in (output, f"{output}_again"):
            shutil.rmtree(leftover, ignore_errors=True)
        row = {
            "label": args.label,
            "pairs": pairs,
            **run(args, recipe(args, files, output)),
        }
        if args.again:
            shared = os.path.join(output, "prepared")
            again = recipe(args, files, f"{output}_again", prepared_dir=shared)
            row["again"] = run(args, again)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(f"{'pairs':>10} {'peak GB':>8} {'seconds':>8} {'again s':>8}")
    for row in rows:
        again = row.get("again", {}).get("seconds", "")
        print(f"{row['pairs']:>10} {row['peak_gb']:>8} {row['seconds']:>8} {again:>8}")
    if args.json:
        with open(args.json, "a") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
    if args.plot:
        baseline = None
        if args.baseline:
            with open(args.baseline) as f:
                baseline = [json.loads(line) for line in f if line.strip()]
        plot(rows, args.plot, baseline)
    return rows


if __name__ == "__main__":
    main()
