"""What subword regularization does to Multi30k's training pairs, per alpha.

Trains the recipe's tokenizer (8000 ids, on all 58,000 training sentences,
as `keras-transformer train` does for configs/multi30k_en_de*.yaml),
prepares the training pairs with their best segmentation, then, for each
`--alphas` value, one sampled view as `tokenizer.sampling_alpha` prepares
it (each draw fitting the bucket of the pair's best segmentation), and
reports per alpha:

- `changed`: the share of sentences (both sides) whose pieces differ from
  the best segmentation;
- `pieces`: pieces of the view against the best segmentation's (end ids
  left out);
- `unconstrained_pieces`: the same for free draws (no bucket limit), to
  show what the limit holds back;
- `views_seconds`: with `--views N`, the time to prepare N views at the
  first alpha.

Usage (from the repository root):

    .venv/bin/python benchmarks/subword_sampling.py \\
        --out benchmarks/results/subword_sampling.json

Without `--data`, Multi30k is read from `../shared/data/multi30k` beside the
repository; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DATA = os.path.join(REPO, "..", "shared", "data", "multi30k")


def machine() -> str:
    """The CPU as the brief asks: model, family and model numbers, vector set."""
    info = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    break  # the first processor's block
                key, _, value = line.partition(":")
                info[key.strip()] = value.strip()
    except OSError:
        return "unknown CPU"
    vectors = "AVX-512" if "avx512f" in info.get("flags", "").split() else "AVX2"
    return (
        f"{info.get('model name', '?')} (family {info.get('cpu family', '?')} "
        f"model {info.get('model', '?')}), {vectors}, {os.cpu_count()} cores"
    )


def rows_of(prepared, view: int) -> np.ndarray:
    """Every row of one view, `(rows, 2, L_max)`, buckets in order, padded."""
    width = max(prepared.bucket_lengths)
    out = []
    for b, (length, chunks) in enumerate(
        zip(prepared.bucket_lengths, prepared.chunk_counts(), strict=True)
    ):
        for i in range(chunks):
            data = np.fromfile(prepared.chunk_path(b, i, view), prepared.dtype)
            rows = data.reshape(-1, 2, length).astype(np.int32)
            out.append(np.pad(rows, [(0, 0), (0, 0), (0, width - length)]))
    return np.concatenate(out)


def compare(best: np.ndarray, view: np.ndarray) -> dict:
    from keras_transformer.data import END_ID, PAD_ID

    def pieces(rows):
        return int(np.sum((rows != PAD_ID) & (rows != END_ID)))

    return {
        "changed": round(float(np.mean(np.any(best != view, axis=2))), 4),
        "pieces": round(pieces(view) / pieces(best), 4),
    }


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=DEFAULT_DATA)
    parser.add_argument("--alphas", type=float, nargs="+", default=[0.1, 0.2, 0.3, 0.5])
    parser.add_argument("--views", type=int, default=16)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)

    import tensorflow as tf

    from keras_transformer.data import (
        SubwordSampling,
        Tokenizer,
        prepare_corpus,
        stream_parallel_files,
    )

    stream = stream_parallel_files(
        os.path.join(args.data, "train.en.gz"),
        os.path.join(args.data, "train.de.gz"),
        name="multi30k/train.en-de",
    )
    sentences, _ = stream.sample_sentences(2_000_000)
    tokenizer = Tokenizer.train(sentences, vocab_size=8000, max_sentences=None)
    root = tempfile.mkdtemp()
    best = prepare_corpus(stream, tokenizer, root, max_length=64)
    best_rows = rows_of(best, 0)
    best_pieces = sum(
        len(ids) for ids in tokenizer.tokenize(tf.constant(sentences)).to_list()
    )
    result = {"cpu": machine(), "alphas": {}}
    for alpha in args.alphas:
        sampled = prepare_corpus(
            stream,
            tokenizer,
            root,
            max_length=64,
            sampling=SubwordSampling(alpha, views=1, seed=0),
        )
        free = tokenizer.tokenize_sampled(sentences, alpha, seed=0)
        result["alphas"][str(alpha)] = {
            **compare(best_rows, rows_of(sampled, 0)),
            "unconstrained_pieces": round(sum(map(len, free)) / best_pieces, 4),
        }
        print(alpha, result["alphas"][str(alpha)], flush=True)
    if args.views:
        start = time.monotonic()
        sampling = SubwordSampling(args.alphas[0], views=args.views, seed=1)
        prepare_corpus(stream, tokenizer, root, max_length=64, sampling=sampling)
        result["views"] = args.views
        result["views_alpha"] = args.alphas[0]
        result["views_seconds"] = round(time.monotonic() - start, 1)
        print(f"{args.views} views: {result['views_seconds']} s", flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
    return result


if __name__ == "__main__":
    main()
