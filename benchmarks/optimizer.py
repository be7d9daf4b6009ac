"""One optimizer update of the benchmark model: Keras's Adam vs `FusedAdam`.

Builds the `Transformer` of `training.py` (vocabulary 8000, d_model 256,
4 heads, d_ff 1024, 3 + 3 layers: 7.6M weights), draws one random gradient
per weight, and times `optimizer.apply` inside a `tf.function`, the way
`fit` calls it, for `keras.optimizers.Adam` and for the library's
`FusedAdam` (one `ResourceApplyAdam` kernel per weight), alternating.

Usage (from the repository root):

    .venv/bin/python benchmarks/optimizer.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# The pooled CPU allocator, as `keras-transformer` uses it (cli.use_memory_pool).
os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_transformer.models import Transformer  # noqa: E402
from keras_transformer.training import FusedAdam  # noqa: E402


def update_seconds(optimizer, weights, gradients, repeats):
    """Seconds per update (each waits for the weights), best and median."""
    optimizer.build(weights)
    apply = tf.function(lambda grads: optimizer.apply(grads, weights))
    apply(gradients)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        apply(gradients)
        weights[0].numpy()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    model = Transformer(
        vocab_size=8000, num_layers=3, d_model=256, num_heads=4, d_ff=1024
    )
    ids = np.ones((2, 8), "int32")
    model((ids, ids))
    weights = model.trainable_variables
    count = sum(int(np.prod(w.shape)) for w in weights)
    print(f"{len(weights)} weights, {count / 1e6:.2f}M values")
    gradients = [tf.random.normal(w.shape, stddev=1e-3) for w in weights]
    for _ in range(args.rounds):
        for name, adam in (
            ("keras Adam", keras.optimizers.Adam),
            ("FusedAdam", FusedAdam),
        ):
            best, median = update_seconds(
                adam(1e-4, beta_2=0.98, epsilon=1e-9), weights, gradients, args.repeats
            )
            print(
                f"{name:12s} best {1000 * best:6.1f} ms, median {1000 * median:6.1f} ms"
            )


if __name__ == "__main__":
    main()
