"""Table 1's restricted self-attention: time per layer as the length grows.

One `MultiHeadAttention` self-attention layer (forward and backward, traced
with `tf.function`), full against `sliding_window=r`, for lengths from 64 to
4096 tokens. Full attention costs O(n^2 d); the restricted layer computes
only blocks of 3r keys per query (`keras_transformer.layers.
restricted_attention`), O(r n d), once n > 3r.

Usage (from the repository root):

    .venv/bin/python benchmarks/restricted_attention.py --json restricted.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_transformer.layers import MultiHeadAttention  # noqa: E402


def time_layer(window, length, d_model, heads, batch, repeats):
    layer = MultiHeadAttention(heads, sliding_window=window)
    x = tf.constant(
        np.random.default_rng(0).normal(size=(batch, length, d_model)), tf.float32
    )
    layer(x, x)

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, x, use_causal_mask=True)
            loss = tf.reduce_sum(y * y)
        return tape.gradient(loss, [x, *layer.trainable_variables])

    step(x)  # trace
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step(x)[0].numpy()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--window", type=int, default=16)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=8192, help="batch x length")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = []
    print(f"| n | full (ms) | r = {args.window} (ms) | full / restricted |")
    print("|---|---|---|---|")
    for length in (64, 128, 256, 512, 1024, 2048, 4096):
        batch = max(1, args.tokens // length)
        full, restricted = (
            time_layer(w, length, args.d_model, args.heads, batch, args.repeats)
            for w in (None, args.window)
        )
        rows.append(
            dict(length=length, batch=batch, full_ms=full, restricted_ms=restricted)
        )
        print(f"| {length} | {full:.1f} | {restricted:.1f} | {full / restricted:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(vars(args), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
