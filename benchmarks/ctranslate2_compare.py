"""Our `Translator` against CTranslate2 on one model: speed and quality.

Given a trained model directory and a test set (source and reference
files, `.gz` too; Multi30k test2016 by default, from `--data`), translates
the test set in this process with:

- `Translator` (the tf.function search behind `keras-transformer
  translate`), with `--beam` and `--alpha` (default: the run's recipe's) and
  greedy;
- the model exported to CTranslate2 (`export_ctranslate2`, float32 and each
  `--quantization`), run by `CTranslate2Translator` with the same beam and
  `--length-penalty` (CTranslate2's own: `log P / length ** penalty`,
  where ours is GNMT's `log P / ((5 + length) / 6) ** alpha`), and greedy.

Both use `--threads` CPU threads (TensorFlow's intra- and inter-op pools,
CTranslate2's `intra_threads`). Each is warmed up on one sentence (tracing,
loading), then the whole file is timed, median of `--runs`. BLEU and chrF
are sacrebleu's; "same" counts the translations equal to ours with the
same beam (greedy: all, by the tests).

Usage (from the repository root):

    .venv/bin/pip install -e ".[ctranslate2]"
    .venv/bin/python benchmarks/ctranslate2_compare.py --model runs/multi30k_en_de \\
        --data ~/.cache/keras_transformer/multi30k \\
        --json benchmarks/results/ctranslate2.json

Without `--data`, Multi30k is read from `../shared/data/multi30k` beside the
repository if it is there (where our machines keep it), else from the
download cache (`~/.cache/keras_transformer/multi30k`, fetched if missing).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DATA = os.path.join(REPO, "..", "shared", "data", "multi30k")


def read(path: str) -> list[str]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def timed(translate, sources: list[str], runs: int) -> tuple[list[str], list[float]]:
    """`translate(sources)` after a one-sentence warm-up; the times of `runs`."""
    translate(sources[:1])
    times, out = [], None
    for _ in range(runs):
        start = time.perf_counter()
        out = translate(sources)
        times.append(time.perf_counter() - start)
    return out, times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="trained model directory")
    parser.add_argument(
        "--data",
        default=DEFAULT_DATA if os.path.isdir(DEFAULT_DATA) else None,
        help="Multi30k directory, for the default test set (default: <repo>/../"
        "shared/data/multi30k if present, else the download cache)",
    )
    parser.add_argument(
        "--source", help="source sentences (default: Multi30k test2016 English)"
    )
    parser.add_argument(
        "--reference", help="references (default: Multi30k test2016 German)"
    )
    parser.add_argument("--beam", type=int, help="beam size (default: the recipe's)")
    parser.add_argument("--alpha", type=float, help="ours (default: the recipe's)")
    parser.add_argument(
        "--length-penalty", type=float, default=1.0, help="CTranslate2's (default 1)"
    )
    parser.add_argument("--threads", type=int, default=2, help="CPU threads")
    parser.add_argument(
        "--quantization",
        default="int8",
        help="CTranslate2 weight types besides float32, comma-separated ('' none)",
    )
    parser.add_argument("--runs", type=int, default=3, help="timed runs each")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()

    import tensorflow as tf

    # Before TensorFlow starts its runtime.
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)

    from keras_transformer.data import multi30k_files
    from keras_transformer.decoding import Translator
    from keras_transformer.evaluation import score_translations
    from keras_transformer.jobs.export_ctranslate2 import (
        CTranslate2Translator,
        write_ctranslate2,
    )
    from keras_transformer.jobs.run_dir import load_trained, search_settings

    source, reference = args.source, args.reference
    if source is None or reference is None:  # Downloaded when missing.
        english, german = multi30k_files("test_2016_flickr", args.data)
        source, reference = source or english, reference or german
    sources, references = read(source), read(reference)
    settings = search_settings(args.model)
    beam = args.beam or settings["beam_size"]
    alpha = settings["alpha"] if args.alpha is None else args.alpha
    model, tokenizer = load_trained(args.model)

    def ours(beam_size: int, alpha: float):
        translator = Translator(tokenizer, model, beam_size=beam_size, alpha=alpha)
        return lambda s: [t.decode("utf-8") for t in translator(tf.constant(s)).numpy()]

    runs = [
        (f"Translator, beam {beam}, alpha {alpha}", ours(beam, alpha), "beam"),
        ("Translator, greedy", ours(1, 0.0), "greedy"),
    ]
    work = tempfile.mkdtemp(prefix="ctranslate2-benchmark-")
    for weights in ["float32", *filter(None, args.quantization.split(","))]:
        directory = os.path.join(work, weights)
        write_ctranslate2(model, tokenizer, directory, quantization=weights)
        translator = CTranslate2Translator(directory, intra_threads=args.threads)
        runs.append(
            (
                f"CTranslate2 {weights}, beam {beam}, length penalty "
                f"{args.length_penalty}",
                lambda s, t=translator: t(
                    s, beam_size=beam, length_penalty=args.length_penalty
                ),
                "beam",
            )
        )
        runs.append(
            (
                f"CTranslate2 {weights}, greedy",
                lambda s, t=translator: t(s, beam_size=1),
                "greedy",
            )
        )

    report = {
        "model": args.model,
        "sentences": len(sources),
        "cpu": cpu_model(),
        "threads": args.threads,
        "rows": [],
    }
    baseline = {}
    for name, translate, kind in runs:
        out, times = timed(translate, sources, args.runs)
        baseline.setdefault(kind, out)
        row = {
            "decoder": name,
            "seconds": round(statistics.median(times), 3),
            "runs_s": [round(t, 3) for t in times],
            "sentences_per_s": round(len(sources) / statistics.median(times), 1),
            "same_as_ours": sum(
                a == b for a, b in zip(out, baseline[kind], strict=True)
            ),
            **score_translations(out, references),
        }
        report["rows"].append(row)
        print(json.dumps(row), flush=True)

    print(f"\n{report['cpu']}, {args.threads} threads, {len(sources)} sentences")
    print("\n| decoder | seconds | sentences/s | BLEU | chrF | same as ours |")
    print("|---|---|---|---|---|---|")
    for row in report["rows"]:
        print(
            f"| {row['decoder']} | {row['seconds']} | {row['sentences_per_s']} | "
            f"{row['bleu']} | {row['chrf']} | {row['same_as_ours']} |"
        )
    print(f"\n{report['rows'][0]['bleu_signature']}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
