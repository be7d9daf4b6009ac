"""Decoding speed: greedy and beam 4, cached vs uncached, eager vs graph vs XLA.

Translates the first `--sentences` English sentences of Multi30k test2016 to
German with a small trained model and reports sentences per second for every
combination of search (greedy, beam 4), key/value cache (on, off) and
execution (eager, `tf.function`, `tf.function(jit_compile=True)`), and
checks that cached and uncached decoding give identical outputs.

The model comes from `--model DIR` (a directory with `model.keras` and
`tokenizer.model`); without it a "tiny" Transformer is trained on Multi30k
for `--train-minutes` and saved to `--save-model` (reused on the next run).

Usage (from the repository root):

    TF_CPP_MIN_LOG_LEVEL=3 .venv/bin/python benchmarks/decoding.py \\
        --sentences 96 --batch-size 32 --json decoding.json

Compile time (tracing, XLA) is measured on a warm-up batch and reported
separately; the speed columns exclude it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import time

import keras
import numpy as np
import tensorflow as tf

from keras_transformer.data.tokenizer import Tokenizer
from keras_transformer.decoding import beam_search, greedy_search
from keras_transformer.models import Transformer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DATA = os.path.join(REPO, "..", "shared", "data", "multi30k")
DEFAULT_SAVE = os.path.join(
    os.path.expanduser("~"), ".cache", "keras_transformer", "decoding-benchmark"
)
logger = logging.getLogger("benchmarks.decoding")


def read_split(data_dir: str, split: str, language: str) -> list[str]:
    """One side of a Multi30k split, via the package loader when it is there."""
    try:
        from keras_transformer.data import load_multi30k

        corpus = load_multi30k(split, data_dir=data_dir, download=False)
        return list(corpus.sources if language == "en" else corpus.targets)
    except ImportError:
        path = os.path.join(data_dir, f"{split}.{language}.gz")
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return [line.rstrip("\n").strip() for line in f]


def tokenize(tokenizer: Tokenizer, sentences: list[str]) -> list[list[int]]:
    """Token ids per sentence (without start or end ids)."""
    ids = []
    for i in range(0, len(sentences), 2048):
        ragged = tokenizer.tokenize(tf.constant(sentences[i : i + 2048]))
        ids += [row.tolist() for row in ragged.numpy()]
    return ids


def pad(rows: list[list[int]], width: int | None = None) -> np.ndarray:
    width = width or max(len(r) for r in rows)
    out = np.zeros((len(rows), width), np.int32)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


def train_batches(source_ids, target_ids, batch_size, seed=0):
    """Endless `((source, target_in), target_out)` batches of similar lengths."""
    rng = np.random.default_rng(seed)
    order = np.arange(len(source_ids))
    while True:
        rng.shuffle(order)
        batches = []
        for start in range(0, len(order), 100 * batch_size):
            chunk = sorted(
                order[start : start + 100 * batch_size],
                key=lambda i: len(target_ids[i]),
            )
            batches += [
                chunk[j : j + batch_size] for j in range(0, len(chunk), batch_size)
            ]
        rng.shuffle(batches)
        for batch in batches:
            source = pad([source_ids[i] + [3] for i in batch])
            target_in = pad([[2] + target_ids[i] for i in batch])
            target_out = pad([target_ids[i] + [3] for i in batch])
            yield (source, target_in), target_out


class StopAfter(keras.callbacks.Callback):
    """Stops `fit` after a wall-clock budget."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds
        self.start = time.time()
        self.steps = 0
        self.loss = float("nan")

    def on_train_batch_end(self, batch, logs=None):
        self.steps += 1
        if time.time() - self.start > self.seconds:
            self.loss = float((logs or {}).get("loss", float("nan")))
            self.model.stop_training = True


def train_model(args) -> tuple[Transformer, Tokenizer]:
    """Trains a "tiny" Transformer on Multi30k en->de for a few minutes."""
    keras.utils.set_random_seed(0)  # before the tokenizer: it clears kernels
    english = read_split(args.data, "train", "en")
    german = read_split(args.data, "train", "de")
    logger.info("Training a tokenizer on %d pairs", len(english))
    tokenizer = Tokenizer.train(list(zip(english, german, strict=True)), 4000)
    source_ids, target_ids = tokenize(tokenizer, english), tokenize(tokenizer, german)
    keep = [
        i
        for i in range(len(source_ids))
        if 0 < len(source_ids[i]) < 48 and 0 < len(target_ids[i]) < 48
    ]
    source_ids = [source_ids[i] for i in keep]
    target_ids = [target_ids[i] for i in keep]
    model = Transformer.from_preset(
        "tiny", vocab_size=tokenizer.vocab_size, max_length=128
    )
    steps = 100_000
    model.compile(
        optimizer=keras.optimizers.Adam(
            keras.optimizers.schedules.CosineDecay(
                0.0, steps, alpha=0.1, warmup_target=1e-3, warmup_steps=400
            ),
            beta_2=0.98,
            epsilon=1e-9,
            clipnorm=1.0,
        ),
        loss=keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, ignore_class=0
        ),
        jit_compile=False,
    )
    logger.info("Training for %.1f minutes", args.train_minutes)
    stop = StopAfter(60 * args.train_minutes)
    model.fit(
        train_batches(source_ids, target_ids, args.train_batch_size),
        steps_per_epoch=steps,
        epochs=1,
        callbacks=[stop],
        verbose=0,
    )
    logger.info("Trained %d steps; last loss %.3f", stop.steps, stop.loss)
    os.makedirs(args.save_model, exist_ok=True)
    model.save(os.path.join(args.save_model, "model.keras"))
    tokenizer.save(args.save_model)
    logger.info("Saved the model to %s", args.save_model)
    return model, tokenizer


def load_model(directory: str) -> tuple[Transformer, Tokenizer]:
    model = keras.models.load_model(os.path.join(directory, "model.keras"))
    return model, Tokenizer.load(directory)


SEARCHES = {
    "greedy": lambda model, ids, use_cache: greedy_search(
        model, ids, use_cache=use_cache
    ),
    "beam4": lambda model, ids, use_cache: beam_search(
        model, ids, beam_size=4, alpha=0.6, use_cache=use_cache
    ),
}


def run(model, batches, search, use_cache, execution):
    """Decodes all batches; returns (ids per sentence, seconds, compile s)."""
    fn = lambda ids: SEARCHES[search](model, ids, use_cache)  # noqa: E731
    if execution != "eager":
        fn = tf.function(fn, jit_compile=execution == "xla")
    compile_seconds = 0.0
    if execution != "eager":  # Trace (and compile) on one batch first.
        start = time.perf_counter()
        fn(batches[0])["ids"].numpy()
        compile_seconds = time.perf_counter() - start
    outputs = []
    start = time.perf_counter()
    for batch in batches:
        result = fn(batch)
        ids, lengths = result["ids"].numpy(), result["lengths"].numpy()
        outputs += [row[:n].tolist() for row, n in zip(ids, lengths, strict=True)]
    return outputs, time.perf_counter() - start, compile_seconds


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="directory with model.keras + tokenizer")
    parser.add_argument("--data", default=DEFAULT_DATA, help="Multi30k directory")
    parser.add_argument("--save-model", default=DEFAULT_SAVE)
    parser.add_argument("--train-minutes", type=float, default=5.0)
    parser.add_argument("--train-batch-size", type=int, default=64)
    parser.add_argument("--sentences", type=int, default=96)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument(
        "--executions", default="eager,graph,xla", help="comma-separated subset"
    )
    parser.add_argument(
        "--eager-batches",
        type=int,
        help="run eager decoding on only this many batches (it is slow)",
    )
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    tf.get_logger().setLevel("ERROR")  # one tf.function per mode "retraces"

    if args.model:
        model, tokenizer = load_model(args.model)
    elif os.path.exists(os.path.join(args.save_model, "model.keras")):
        logger.info("Reusing the model in %s", args.save_model)
        model, tokenizer = load_model(args.save_model)
    else:
        model, tokenizer = train_model(args)

    english = read_split(args.data, "test_2016_flickr", "en")[: args.sentences]
    sources = [
        ids[: model.max_length - 1] + [3] for ids in tokenize(tokenizer, english)
    ]
    # One width for all batches, so compiled functions are traced once.
    width = max(len(s) for s in sources)
    batches = [
        tf.constant(pad(sources[i : i + args.batch_size], width))
        for i in range(0, len(sources), args.batch_size)
    ]
    if len(batches) > 1 and batches[-1].shape[0] != args.batch_size:
        logger.info("Dropping a last, partial batch (fixed shapes for XLA)")
        batches = batches[:-1]
    count = sum(int(b.shape[0]) for b in batches)

    rows, outputs = [], {}
    for search in SEARCHES:
        for execution in args.executions.split(","):
            for use_cache in (True, False):
                subset = batches
                if execution == "eager" and args.eager_batches:
                    subset = batches[: args.eager_batches]
                ids, seconds, compile_seconds = run(
                    model, subset, search, use_cache, execution
                )
                n = sum(int(b.shape[0]) for b in subset)
                outputs[search, execution, use_cache] = ids
                rows.append(
                    dict(
                        search=search,
                        execution=execution,
                        cache=use_cache,
                        sentences=n,
                        seconds=round(seconds, 3),
                        sentences_per_second=round(n / seconds, 2),
                        compile_seconds=round(compile_seconds, 2),
                        mean_output_tokens=round(
                            float(np.mean([len(o) for o in ids])), 2
                        ),
                    )
                )
                logger.info("%s", rows[-1])
    for row in rows:
        if row["cache"]:
            uncached = next(
                r
                for r in rows
                if r["search"] == row["search"]
                and r["execution"] == row["execution"]
                and not r["cache"]
            )
            row["speedup_vs_uncached"] = round(
                row["sentences_per_second"] / uncached["sentences_per_second"], 2
            )
        key = (row["search"], row["execution"])
        same = [
            a == b
            for a, b in zip(outputs[(*key, True)], outputs[(*key, False)], strict=True)
        ]
        row["identical_to_other_cache_setting"] = f"{sum(same)}/{len(same)}"
        # Reference: the first execution (eager by default) with the cache.
        reference = outputs[row["search"], args.executions.split(",")[0], True]
        # Over the sentences both decoded (eager may have run on fewer).
        same = [
            a == b
            for a, b in zip(
                outputs[row["search"], row["execution"], row["cache"]],
                reference,
                strict=False,
            )
        ]
        row["identical_to_reference"] = f"{sum(same)}/{len(same)}"

    header = (
        "| search | execution | cache | sentences/s | speedup vs uncached "
        "| compile s | identical cached/uncached |\n|---|---|---|---|---|---|---|"
    )
    lines = [header] + [
        f"| {r['search']} | {r['execution']} | {'yes' if r['cache'] else 'no'} "
        f"| {r['sentences_per_second']} | {r.get('speedup_vs_uncached', '')} "
        f"| {r['compile_seconds']} | {r['identical_to_other_cache_setting']} |"
        for r in rows
    ]
    beam_ids = outputs["beam4", args.executions.split(",")[0], True][:3]
    samples = tokenizer.detokenize(tf.constant(pad(beam_ids))).numpy()
    report = dict(
        model=dict(
            vocab_size=model.vocab_size,
            num_layers=model.num_layers,
            d_model=model.d_model,
            num_heads=model.num_heads,
            d_ff=model.d_ff,
            max_length=model.max_length,
        ),
        sentences=count,
        batch_size=args.batch_size,
        source_width=width,
        tensorflow=tf.__version__,
        keras=keras.__version__,
        cpus=os.cpu_count(),
        results=rows,
        samples=[
            dict(source=s, beam4=t.decode("utf-8"))
            for s, t in zip(english, samples, strict=False)
        ],
    )
    print("\n".join(lines))  # noqa: T201 (a script's output)
    print(json.dumps(report, indent=2, ensure_ascii=False))  # noqa: T201
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2, ensure_ascii=False)
    return report


if __name__ == "__main__":
    main()
