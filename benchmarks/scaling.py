"""Scaling: training step time and memory against length and batch size,
and decoding time against output length.

Training points run `benchmarks/training.py --variants ours` in a fresh
process each, so that each reports its own peak resident memory (the whole
process: TensorFlow itself, the model, Adam's slots and the step's
activations). Decoding points time greedy search with the key/value cache on
an untrained "small" model whose end id is suppressed (`-inf` logit), so
every sentence runs to exactly the requested output length.

Usage (from the repository root):

    .venv/bin/python benchmarks/scaling.py --json scaling.json --plots docs/img

It writes `scaling_length.png`, `scaling_batch.png` and `scaling_decode.png`
into `--plots`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

HERE = os.path.dirname(os.path.abspath(__file__))


def training_point(length: int, batch_size: int, steps: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "point.json")
        command = [
            sys.executable,
            os.path.join(HERE, "training.py"),
            "--variants",
            "ours",
            "--length",
            str(length),
            "--batch-size",
            str(batch_size),
            "--warmup",
            "2",
            "--steps",
            str(steps),
            "--rounds",
            "1",
            "--json",
            out,
        ]
        subprocess.run(command, check=True, capture_output=True)
        with open(out) as f:
            result = json.load(f)
    point = result["results"][0]
    point.update(length=length, batch_size=batch_size)
    print(
        f"length {length:4d} batch {batch_size:4d}: {point['ms_per_step']:8.1f} "
        f"ms/step, {point['peak_rss_mib']:7.0f} MiB peak RSS",
        flush=True,
    )
    return point


def decode_points(lengths, batch_size: int, source_length: int) -> list[dict]:
    import keras
    import numpy as np
    import tensorflow as tf

    from keras_transformer.decoding import greedy_search
    from keras_transformer.models import Transformer

    keras.utils.set_random_seed(0)
    model = Transformer.from_preset(
        "small", vocab_size=8000, max_length=max(*lengths, source_length)
    )

    class NoEnd:
        """The model with the end id's logit at -inf: outputs run full length."""

        def __getattr__(self, name):
            return getattr(model, name)

        def decode(self, *args, **kwargs):
            out = model.decode(*args, **kwargs)
            logits, rest = (out[0], out[1:]) if isinstance(out, tuple) else (out, ())
            logits = logits + tf.one_hot(3, 8000, on_value=-1e9, off_value=0.0)
            return (logits, *rest) if rest else logits

    rng = np.random.default_rng(0)
    source = rng.integers(4, 8000, (batch_size, source_length), dtype=np.int32)
    source[:, -1] = 3
    wrapped = NoEnd()
    points = []
    for length in lengths:
        search = tf.function(lambda ids, n=length: greedy_search(wrapped, ids, n))
        out = search(source)  # Trace.
        assert int(out["lengths"][0]) == length
        start = time.perf_counter()
        repeats = 3
        for _ in range(repeats):
            search(source)["ids"].numpy()
        seconds = (time.perf_counter() - start) / repeats
        points.append(
            {
                "output_length": length,
                "seconds": seconds,
                "ms_per_token": 1000 * seconds / length,
            }
        )
        print(
            f"decode {length:4d} tokens: {seconds:6.2f} s "
            f"({1000 * seconds / length:5.1f} ms per step)",
            flush=True,
        )
    return points


def plot(results: dict, folder: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(folder, exist_ok=True)
    for key, x_key, x_label in (
        ("length", "length", "sequence length (source = target)"),
        ("batch", "batch_size", "batch size (sentences)"),
    ):
        points = results[key]
        if not points:
            continue
        fig, time_axis = plt.subplots(figsize=(6, 3.5))
        xs = [p[x_key] for p in points]
        time_axis.plot(xs, [p["ms_per_step"] for p in points], "o-", color="C0")
        time_axis.set_xscale("log", base=2)
        time_axis.set_yscale("log")
        time_axis.set_xlabel(x_label)
        time_axis.set_ylabel("ms per training step", color="C0")
        memory_axis = time_axis.twinx()
        memory_axis.plot(xs, [p["peak_rss_mib"] for p in points], "s--", color="C1")
        memory_axis.set_ylabel("peak RSS (MiB)", color="C1")
        fixed = "batch size" if key == "length" else "length"
        value = points[0]["batch_size" if key == "length" else "length"]
        time_axis.set_title(f"Training step, {fixed} {value}")
        fig.tight_layout()
        fig.savefig(os.path.join(folder, f"scaling_{key}.png"), dpi=110)
        plt.close(fig)
    if results["decode"]:
        fig, axis = plt.subplots(figsize=(6, 3.5))
        xs = [p["output_length"] for p in results["decode"]]
        axis.plot(xs, [p["seconds"] for p in results["decode"]], "o-")
        axis.set_xlabel("output length (tokens)")
        axis.set_ylabel("seconds per batch")
        axis.set_title("Cached greedy decoding")
        fig.tight_layout()
        fig.savefig(os.path.join(folder, "scaling_decode.png"), dpi=110)
        plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--lengths", type=int, nargs="*", default=[32, 64, 128, 256, 512]
    )
    parser.add_argument("--length-batch-size", type=int, default=16)
    parser.add_argument(
        "--batch-sizes", type=int, nargs="*", default=[8, 16, 32, 64, 128]
    )
    parser.add_argument("--batch-length", type=int, default=32)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument(
        "--decode-lengths", type=int, nargs="*", default=[16, 32, 64, 128, 256]
    )
    parser.add_argument("--decode-batch-size", type=int, default=16)
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--plots", help="write PNG plots into this folder")
    args = parser.parse_args()
    results = {"length": [], "batch": [], "decode": []}

    def save():
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1)

    for n in args.lengths:
        results["length"].append(training_point(n, args.length_batch_size, args.steps))
        save()
    for b in args.batch_sizes:
        results["batch"].append(training_point(args.batch_length, b, args.steps))
        save()
    if args.decode_lengths:
        results["decode"] = decode_points(
            args.decode_lengths, args.decode_batch_size, 32
        )
        save()
    if args.plots:
        plot(results, args.plots)


if __name__ == "__main__":
    main()
