"""The pause at each epoch end: deleting a finished `make_batches` iterator.

`keras.Model.fit` reads `cardinality` batches of an epoch from a fresh
iterator and then drops it, before its end of sequence was ever requested.
With tf.data's autotuning on, dropping it could wait for the tuning thread:
14 s at two epoch ends of the demo. This script reads the demo's batches
(the built-in corpus, `max_length` 48, `token_budget` 2048) the same way,
sleeping `--step-seconds` per batch in place of a training step, and times
each deletion; `--autotune` turns tf.data's autotuning back on.

Usage (from the repository root):

    .venv/bin/python benchmarks/epoch_end.py [--autotune]
"""

from __future__ import annotations

import argparse
import gc
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# The pooled CPU allocator, as `keras-transformer` sets it
# (keras_transformer_cli.use_memory_pool).
os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")

import tensorflow as tf  # noqa: E402

from keras_transformer import data  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--step-seconds", type=float, default=0.2)
    parser.add_argument("--autotune", action="store_true")
    args = parser.parse_args()
    train = data.builtin_corpus("train", seed=0)
    tokenizer = data.Tokenizer.train(train, vocab_size=1000)
    batches = data.make_batches(
        train, tokenizer, max_length=48, token_budget=2048, seed=0
    )
    if args.autotune:
        options = tf.data.Options()
        options.autotune.enabled = True
        batches = batches.with_options(options)
    steps = int(batches.cardinality())
    for epoch in range(args.epochs):
        iterator = iter(batches)
        for _ in range(steps):
            next(iterator)
            time.sleep(args.step_seconds)
        start = time.perf_counter()
        del iterator
        gc.collect()
        print(
            f"epoch {epoch + 1}: {steps} batches, "
            f"deleting the iterator took {time.perf_counter() - start:.2f} s",
            flush=True,
        )


if __name__ == "__main__":
    main()
