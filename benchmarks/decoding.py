"""Translation speed and quality of `keras-transformer translate`, as users run it.

On a trained model directory (the Multi30k recipe's, by default) and
Multi30k test2016 (English -> German, 1000 sentences), measures:

- the command line, each in a new process: a one-line call (process start
  to output), the whole file with the recipe's beam search (beam 4 and
  the run's `evaluation.alpha`; 0.6 without one) and with greedy search
  (`--beam 1`); decoding speed is sentences / (whole time - one-line time);
- the exported SavedModel (`DIR/translator`) in a new process that imports
  only TensorFlow and tensorflow-text: load time, first call, and speed on
  the 1000 sentences in one call, and whether its output equals the CLI's;
- the plain search of the same model, as decoding worked before sentence
  sorting, compaction and the growing cache: `beam_search(...,
  compact=False)` on batches of 64 sentences in input order;
- sacrebleu BLEU and chrF (with signatures) of each.

Usage (from the repository root; the recipe model takes 30 minutes):

    .venv/bin/keras-transformer train --config configs/multi30k_en_de.yaml \\
        --minutes 30 --output runs/multi30k_en_de
    .venv/bin/python benchmarks/decoding.py --model runs/multi30k_en_de \\
        --json decoding.json

The model directory needs `translator/` (written by `train`; else run
`keras-transformer export --model DIR --out DIR/translator`). Timings are
medians of `--runs` runs.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DATA = os.path.join(REPO, "..", "shared", "data", "multi30k")
CLI = [sys.executable, "-m", "keras_transformer_cli"]
ANCHORS = {  # sentences/s on 1000 test2016 sentences, 2 cores, beam 4
    "OpenNMT-py (beam 4)": "88-91",
    "CTranslate2 fp32 (beam 4)": "187",
    "CTranslate2 int8 (beam 4)": "314",
}

SAVED_MODEL_RUN = """
import json, sys, time
start = time.perf_counter()
import tensorflow as tf
import tensorflow_text  # the SentencePiece ops
imported = time.perf_counter()
translator = tf.saved_model.load(sys.argv[1])
loaded = time.perf_counter()
lines = open(sys.argv[2], encoding="utf-8").read().splitlines()
translator(tf.constant(lines[:1])).numpy()
first = time.perf_counter()
out = translator(tf.constant(lines)).numpy()
done = time.perf_counter()
assert not any(m.startswith("keras_transformer") for m in sys.modules)
with open(sys.argv[3], "w", encoding="utf-8") as f:
    f.writelines(t.decode("utf-8") + "\\n" for t in out)
print(json.dumps({"import_s": imported - start, "load_s": loaded - imported,
                  "first_call_s": first - loaded, "translate_s": done - first}))
"""


def read(path: str) -> list[str]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def timed(command: list[str], stdin: str | None, out_path: str | None) -> float:
    """Wall time of a command, its stdout written to `out_path`."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    start = time.perf_counter()
    result = subprocess.run(
        command, input=stdin, capture_output=True, text=True, env=env, check=False
    )
    seconds = time.perf_counter() - start
    if result.returncode:
        raise RuntimeError(f"{command} failed:\n{result.stderr[-2000:]}")
    if out_path:
        with open(out_path, "w", encoding="utf-8") as f:
            f.write(result.stdout)
    return seconds


def scores(hypotheses: list[str], references: list[str]) -> dict:
    from sacrebleu.metrics import BLEU, CHRF

    bleu, chrf = BLEU(), CHRF()
    return {
        "bleu": round(bleu.corpus_score(hypotheses, [references]).score, 2),
        "chrf": round(chrf.corpus_score(hypotheses, [references]).score, 2),
        "bleu_signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
    }


def plain_search(model_dir: str, sources: list[str]) -> tuple[list[str], float]:
    """Fixed-shape beam search on batches of 64 in input order (the old way),
    with the recipe's beam size and length penalty."""
    import tensorflow as tf

    from keras_transformer.decoding import beam_search
    from keras_transformer.jobs.run_dir import load_trained, search_settings

    model, tokenizer = load_trained(model_dir)
    settings = search_settings(model_dir)
    search = tf.function(lambda ids: beam_search(model, ids, **settings, compact=False))
    limit = model.max_length - 1
    out, start = [], time.perf_counter()
    for i in range(0, len(sources), 64):
        tokens = tokenizer.tokenize(tf.constant(sources[i : i + 64]))[:, :limit]
        lengths = tf.cast(tokens.row_lengths(), tf.int32)
        ids = tf.pad(tf.cast(tokens.to_tensor(), tf.int32), [[0, 0], [0, 1]])
        ids += tf.one_hot(lengths, tf.shape(ids)[1], dtype=tf.int32) * 3
        result = search(ids)["ids"]
        out += [t.decode("utf-8") for t in tokenizer.detokenize(result).numpy()]
    return out, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="trained model directory")
    parser.add_argument("--data", default=DEFAULT_DATA, help="Multi30k directory")
    parser.add_argument("--runs", type=int, default=3, help="runs per CLI timing")
    parser.add_argument("--skip-plain", action="store_true")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    sources = read(os.path.join(args.data, "test_2016_flickr.en.gz"))
    references = read(os.path.join(args.data, "test_2016_flickr.de.gz"))
    work = tempfile.mkdtemp(prefix="decoding-benchmark-")
    source_file = os.path.join(work, "test2016.en")
    with open(source_file, "w", encoding="utf-8") as f:
        f.writelines(s + "\n" for s in sources)
    translate = [*CLI, "translate", "--model", args.model]

    report: dict = {"model": args.model, "sentences": len(sources), "cli": {}}
    one_line = [timed(translate, sources[0] + "\n", None) for _ in range(args.runs)]
    report["cli"]["one_line_s"] = round(statistics.median(one_line), 2)
    outputs = {}
    for name, extra in (("beam4", []), ("greedy", ["--beam", "1"])):
        out_path = os.path.join(work, f"{name}.de")
        runs = [
            timed([*translate, *extra, source_file], None, out_path)
            for _ in range(args.runs)
        ]
        whole = statistics.median(runs)
        outputs[name] = read(out_path)
        report["cli"][name] = {
            "whole_s": round(whole, 2),
            "runs_s": [round(r, 2) for r in runs],
            "sentences_per_s": round(
                len(sources) / (whole - statistics.median(one_line)), 1
            ),
            **scores(outputs[name], references),
        }
        print(name, report["cli"][name], flush=True)

    saved_out = os.path.join(work, "saved_model.de")
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            SAVED_MODEL_RUN,
            # Absolute: the process runs in another folder.
            os.path.abspath(os.path.join(args.model, "translator")),
            source_file,
            saved_out,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        cwd=work,  # this package is not importable from there
        check=False,
    )
    if result.returncode:
        raise RuntimeError(f"the SavedModel run failed:\n{result.stderr[-2000:]}")
    saved = json.loads(result.stdout.strip().splitlines()[-1])
    saved_speed = len(sources) / saved["translate_s"]
    report["saved_model"] = {
        **{k: round(v, 2) for k, v in saved.items()},
        "sentences_per_s": round(saved_speed, 1),
        "share_of_cli_speed": round(
            saved_speed / report["cli"]["beam4"]["sentences_per_s"], 2
        ),
        "identical_to_cli": read(saved_out) == outputs["beam4"],
    }
    print("saved model", report["saved_model"], flush=True)

    if not args.skip_plain:
        plain, seconds = plain_search(args.model, sources)
        report["plain_beam4"] = {
            "seconds_in_process": round(seconds, 2),
            "sentences_per_s": round(len(sources) / seconds, 1),
            "identical_to_cli": sum(
                a == b for a, b in zip(plain, outputs["beam4"], strict=True)
            ),
            **scores(plain, references),
        }
        print("plain", report["plain_beam4"], flush=True)

    cli = report["cli"]
    rows = [
        ("keras-transformer translate, beam 4", cli["beam4"]),
        ("keras-transformer translate, greedy", cli["greedy"]),
        ("SavedModel in a new process, beam 4", report["saved_model"]),
    ]
    if "plain_beam4" in report:
        rows.append(("plain fixed-shape beam 4 (in process)", report["plain_beam4"]))
    print("\n| decoder | sentences/s | BLEU | chrF |\n|---|---|---|---|")
    for name, row in rows:
        bleu = row.get("bleu", cli["beam4"]["bleu"])
        chrf = row.get("chrf", cli["beam4"]["chrf"])
        print(f"| {name} | {row['sentences_per_s']} | {bleu} | {chrf} |")
    for name, speed in ANCHORS.items():
        print(f"| {name} | {speed} | | |")
    print(f"\none-line call: {cli['one_line_s']} s; {cli['beam4']['bleu_signature']}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
