"""Beam-search time of Multi30k test2016 in one process, for code comparisons.

Loads a trained model directory (`model.keras` and `tokenizer/`) with
whatever `keras_transformer` is first on `sys.path`, builds a
`Translator(tokenizer, model, beam_size=4, alpha=1.2)`, translates 64
sentences to trace it, then times `--repeats` translations of the 1000
test2016 sentences in one call each. To compare two versions of the code,
run it once with each (the older one through `PYTHONPATH`, from its own
checkout), interleaved, on a quiet machine:

    .venv/bin/python benchmarks/decoding_in_process.py --model runs/recipe
    (cd ../old && PYTHONPATH=. ../main/.venv/bin/python \\
        ../main/benchmarks/decoding_in_process.py --model ../main/runs/recipe)

Prints the seconds of each repeat and the first translation; `--json`
also writes them with the translations, so two versions can be checked
for identical output.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402

import keras_transformer  # noqa: E402
from keras_transformer.decoding import Translator  # noqa: E402
from keras_transformer.jobs.run_dir import load_trained  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DATA = os.path.join(REPO, "..", "shared", "data", "multi30k")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="trained model directory")
    parser.add_argument("--data", default=DEFAULT_DATA, help="Multi30k directory")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    model, tokenizer = load_trained(args.model)
    with gzip.open(os.path.join(args.data, "test_2016_flickr.en.gz"), "rt") as f:
        sentences = tf.constant([line.rstrip("\n") for line in f])
    translator = Translator(tokenizer, model, beam_size=4, alpha=1.2)
    translator(sentences[:64])  # tracing
    seconds = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        translations = translator(sentences)
        seconds.append(time.perf_counter() - start)
    translations = [t.decode() for t in translations.numpy()]
    print(keras_transformer.__file__, [round(s, 2) for s in seconds], translations[0])
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"seconds": seconds, "translations": translations}, f)


if __name__ == "__main__":
    main()
