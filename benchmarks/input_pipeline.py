"""Input-pipeline throughput on Multi30k train: can the data feed training?

Measures, on the 29000 English-German training pairs of Multi30k:

1. loading the two gzip files (`load_multi30k`);
2. training the shared SentencePiece vocabulary on English + German
   (`Tokenizer.train`, `--vocab-size`, 8000 by default);
3. tokenizing every sentence once (`Tokenizer.tokenize`, 1024 at a time);
4. `make_batches` set-up (tokenizing, bucketing, padding; done once);
5. `--epochs` full passes over the batches (`--token-budget` tokens each),
   read from Python like a training loop does, and the same passes read
   inside a `tf.function` (as `keras.Model.fit` reads them).

It reports sentence pairs/s and tokens/s, and the ratio of the pipeline's
target tokens/s to a model's training speed, `--model-tokens-per-second`
(4000 by default: an assumption, the top of the 2000-4000 target tokens/s a
small Transformer trains at on our 2-core CPU). The pipeline must be at least
10 times faster than the model.

With `--prepared`, also the streamed pipeline the training job reads:

6. `prepare_corpus` on the training pairs (`--train-files`, e.g. Multi30k
   repeated to millions of pairs; Multi30k train by default): pairs/s;
7. `prepared_batches` (prefetching) at `--step-budget` tokens per batch
   (4096; the paper's 25000 with 37000 ids makes logits of 3.7 GB, several
   copies of which a CPU step holds: more memory than our 24 GB machines
   spare), `--read-batches` batches read from Python and in a graph:
   batches/s;
8. `--steps` training steps (after one to trace) of the `--step-preset`
   model (`base`) with a `--step-vocab` vocabulary (37000, the paper's) on
   those batches, compiled as the training job compiles it: seconds/step,
   and the ratio of the pipeline's batches/s to the steps/s (at least 5).

Usage (from the repository root):

    TF_CPP_MIN_LOG_LEVEL=3 .venv/bin/python benchmarks/input_pipeline.py \\
        --data-dir ../shared/data/multi30k [--prepared]

Prints a table, then one JSON line (also written to `--json` if given).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time

import numpy as np
import tensorflow as tf

from keras_transformer.data import Tokenizer, load_multi30k, make_batches

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DATA = os.path.join(REPO, "..", "shared", "data", "multi30k")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data-dir",
        default=DEFAULT_DATA if os.path.isdir(DEFAULT_DATA) else None,
        help="directory with train.{en,de}.gz; default: <repo>/../shared/data/"
        "multi30k if present, else the download cache",
    )
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--token-budget", type=int, default=4096)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--model-tokens-per-second",
        type=float,
        default=4000.0,
        help="target tokens/s the model trains at (assumed, for the ratio)",
    )
    parser.add_argument("--json", help="also write the JSON result here")
    parser.add_argument("--prepared", action="store_true")
    parser.add_argument("--train-files", nargs=2, help="source and target files")
    parser.add_argument("--step-budget", type=int, default=4096)
    parser.add_argument("--step-preset", default="base")
    parser.add_argument("--step-vocab", type=int, default=37000)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--read-batches", type=int, default=300)
    return parser.parse_args(argv)


def timed(function, *args, **kwargs):
    """`(result, wall seconds)`; CPU seconds of the process go to `CPU[-1]`."""
    start, cpu = time.perf_counter(), time.process_time()
    result = function(*args, **kwargs)
    CPU.append(time.process_time() - cpu)
    return result, time.perf_counter() - start


CPU: list[float] = []


def python_epoch(batches: tf.data.Dataset) -> tuple[int, int, int, int]:
    """Reads one epoch from Python: (pairs, batches, source, target) tokens."""
    pairs = count = source_tokens = target_tokens = 0
    for (source_ids, _), target_out in batches:
        count += 1
        pairs += int(source_ids.shape[0])
        source_tokens += int(np.count_nonzero(source_ids.numpy()))
        target_tokens += int(np.count_nonzero(target_out.numpy()))
    return pairs, count, source_tokens, target_tokens


@tf.function
def graph_epoch(batches: tf.data.Dataset) -> tf.Tensor:
    """Reads one epoch inside a graph; returns the number of target tokens."""
    total = tf.constant(0, tf.int64)
    for (_, _), target_out in batches:
        total += tf.math.count_nonzero(target_out)
    return total


def main(argv=None) -> dict:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    tf.random.set_seed(args.seed)

    corpus, load_seconds = timed(load_multi30k, "train", data_dir=args.data_dir)
    tokenizer, tokenizer_seconds = timed(
        Tokenizer.train, corpus, vocab_size=args.vocab_size
    )
    tokenizer_cpu_seconds = CPU[-1]

    sentences = list(corpus.texts())
    start = time.perf_counter()
    tokens = 0
    for i in range(0, len(sentences), 1024):
        ids = tokenizer.tokenize(tf.constant(sentences[i : i + 1024]))
        tokens += int(tf.size(ids.flat_values))
    tokenize_seconds = time.perf_counter() - start

    (batches, stats), setup_seconds = timed(
        make_batches,
        corpus,
        tokenizer,
        max_length=args.max_length,
        token_budget=args.token_budget,
        seed=args.seed,
        with_stats=True,
    )

    python_seconds = []
    for _ in range(args.epochs):
        (pairs, count, source_tokens, target_tokens), seconds = timed(
            python_epoch, batches
        )
        assert (pairs, count) == (stats.kept, stats.batches)
        assert (source_tokens, target_tokens) == (
            stats.source_tokens,
            stats.target_tokens,
        )
        python_seconds.append(seconds)
    graph_epoch(batches)  # trace once
    graph_seconds = []
    for _ in range(args.epochs):
        total, seconds = timed(graph_epoch, batches)
        assert int(total) == stats.target_tokens
        graph_seconds.append(seconds)

    python_epoch_seconds = float(np.median(python_seconds))
    graph_epoch_seconds = float(np.median(graph_seconds))
    real_tokens = stats.source_tokens + stats.target_tokens
    target_per_second = stats.target_tokens / python_epoch_seconds
    result = {
        "corpus": corpus.name,
        "pairs": stats.pairs,
        "kept": stats.kept,
        "too_long": stats.too_long,
        "vocab_size": tokenizer.vocab_size,
        "token_budget": args.token_budget,
        "batches_per_epoch": stats.batches,
        "bucket_lengths": list(stats.bucket_lengths),
        "source_tokens": stats.source_tokens,
        "target_tokens": stats.target_tokens,
        "padding_share": round(1 - real_tokens / (2 * stats.padded_tokens), 4),
        "load_seconds": round(load_seconds, 3),
        "tokenizer_training_seconds": round(tokenizer_seconds, 3),
        "tokenizer_training_cpu_seconds": round(tokenizer_cpu_seconds, 3),
        "tokenize_sentences_per_second": round(len(sentences) / tokenize_seconds),
        "tokenize_tokens_per_second": round(tokens / tokenize_seconds),
        "make_batches_setup_seconds": round(setup_seconds, 3),
        "epoch_seconds_python": round(python_epoch_seconds, 3),
        "epoch_seconds_graph": round(graph_epoch_seconds, 3),
        "pairs_per_second_python": round(stats.kept / python_epoch_seconds),
        "tokens_per_second_python": round(real_tokens / python_epoch_seconds),
        "target_tokens_per_second_python": round(target_per_second),
        "target_tokens_per_second_graph": round(
            stats.target_tokens / graph_epoch_seconds
        ),
        "model_target_tokens_per_second_assumed": args.model_tokens_per_second,
        "ratio_to_model": round(target_per_second / args.model_tokens_per_second, 1),
        # Also counting the one-time set-up against a single epoch.
        "ratio_to_model_first_epoch_with_setup": round(
            stats.target_tokens
            / (setup_seconds + python_seconds[0])
            / args.model_tokens_per_second,
            1,
        ),
    }
    rows = [
        ("pairs (kept / too long)", f"{stats.kept} / {stats.too_long}"),
        ("vocabulary", f"{tokenizer.vocab_size} ids"),
        ("load files", f"{load_seconds:.2f} s"),
        (
            "train tokenizer (en+de)",
            f"{tokenizer_seconds:.2f} s ({tokenizer_cpu_seconds:.2f} s CPU)",
        ),
        (
            "tokenize all sentences",
            f"{len(sentences) / tokenize_seconds:,.0f} sentences/s, "
            f"{tokens / tokenize_seconds:,.0f} tokens/s",
        ),
        ("make_batches set-up", f"{setup_seconds:.2f} s"),
        (
            "epoch, read from Python",
            f"{python_epoch_seconds:.3f} s: {stats.kept / python_epoch_seconds:,.0f}"
            f" pairs/s, {real_tokens / python_epoch_seconds:,.0f} tokens/s",
        ),
        (
            "epoch, read in a graph",
            f"{graph_epoch_seconds:.3f} s: {stats.kept / graph_epoch_seconds:,.0f}"
            f" pairs/s, {real_tokens / graph_epoch_seconds:,.0f} tokens/s",
        ),
        (
            "target tokens/s vs model",
            f"{target_per_second:,.0f} vs {args.model_tokens_per_second:,.0f} "
            f"(assumed) = {result['ratio_to_model']}x",
        ),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    if args.prepared:
        result.update(prepared_pipeline(args, tokenizer))
    line = json.dumps(result)
    print(line)
    if args.json:
        with open(args.json, "w") as f:
            f.write(line + "\n")
    return result


def prepared_pipeline(args, tokenizer) -> dict:
    """Steps 6-8: the prepared shards' stream against the model's steps."""
    import tempfile

    import keras

    from keras_transformer.data import (
        multi30k_files,
        prepare_corpus,
        prepared_batches,
        stream_parallel_files,
    )
    from keras_transformer.losses import MaskedCrossEntropy
    from keras_transformer.models import Transformer
    from keras_transformer.training import transformer_optimizer
    from keras_transformer.training.distributed import build_for_fit

    files = args.train_files or multi30k_files("train", args.data_dir)
    stream = stream_parallel_files(*files)
    root = tempfile.mkdtemp(prefix="input_pipeline_")
    prepared, prepare_seconds = timed(
        prepare_corpus, stream, tokenizer, root, max_length=args.max_length
    )
    batches, stats = prepared_batches(
        prepared,
        token_budget=args.step_budget,
        seed=args.seed,
        epochs_from=0,
        with_stats=True,
    )
    count = args.read_batches
    python_epoch(batches.take(10))  # the first groups' reads
    (_, _, _, target_tokens), read_seconds = timed(python_epoch, batches.take(count))
    graph_epoch(batches.take(2))
    _, graph_seconds = timed(graph_epoch, batches.take(count))

    keras.utils.set_random_seed(args.seed)
    vocab_size = max(args.step_vocab, tokenizer.vocab_size)
    model = Transformer.from_preset(
        args.step_preset, vocab_size=vocab_size, max_length=args.max_length
    )
    model.compile(
        optimizer=transformer_optimizer(model.d_model, 4000),
        loss=MaskedCrossEntropy(label_smoothing=0.1),
        jit_compile=False,
    )
    build_for_fit(model, batches)
    steps = batches.take(args.steps + 1)
    model.fit(steps.take(1), verbose=0)  # traces the step
    start = time.perf_counter()
    model.fit(steps.skip(1), verbose=0)
    step_seconds = (time.perf_counter() - start) / args.steps
    batches_per_second = count / read_seconds
    rows = {
        "prepare_pairs_per_second": round(prepared.pairs / prepare_seconds),
        "prepare_seconds": round(prepare_seconds, 1),
        "prepared_pairs": prepared.kept,
        "step_budget": args.step_budget,
        "stream_batches_per_second_python": round(batches_per_second, 1),
        "stream_batches_per_second_graph": round(count / graph_seconds, 1),
        "stream_target_tokens_per_second": round(target_tokens / read_seconds),
        "step_preset": args.step_preset,
        "step_vocab": vocab_size,
        "step_parameters": model.count_params(),
        "seconds_per_step": round(step_seconds, 2),
        "stream_to_step_ratio": round(batches_per_second * step_seconds, 1),
    }
    print(
        f"prepared {prepared.kept:,} pairs at {rows['prepare_pairs_per_second']:,}"
        f" pairs/s; stream {batches_per_second:.1f} batches/s of "
        f"{args.step_budget} tokens; {args.step_preset} step {step_seconds:.2f} s: "
        f"the stream is {rows['stream_to_step_ratio']}x faster"
    )
    return rows


if __name__ == "__main__":
    main()
