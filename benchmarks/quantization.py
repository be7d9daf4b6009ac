"""BLEU and speed of the recipe model in float32 and after `quantize("int8")`.

Loads a trained model directory, translates Multi30k test2016 (English ->
German, 1000 sentences) with beam 4 (alpha 0.6) in process, quantizes the
model with Keras's `model.quantize("int8")` (the attention projections and
the shared embedding; the kernel-1 Conv1D feed-forward stays float) and
translates again. Prints sacrebleu BLEU and chrF (with signatures), the
translation time of each, the weights' size in memory and how many
translations differ.

Usage (from the repository root; the recipe model takes 30 minutes):

    .venv/bin/keras-transformer train --config configs/multi30k_en_de.yaml \\
        --minutes 30 --output runs/multi30k_en_de
    .venv/bin/python benchmarks/quantization.py --model runs/multi30k_en_de
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import time
import warnings

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DATA = os.path.join(REPO, "..", "shared", "data", "multi30k")


def read(path: str) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def weight_bytes(model) -> int:
    return sum(v.numpy().nbytes for v in model.weights)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="trained model directory")
    parser.add_argument("--data", default=DEFAULT_DATA, help="Multi30k directory")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()

    import tensorflow as tf

    from keras_transformer.decoding import Translator
    from keras_transformer.evaluation import score_translations
    from keras_transformer.jobs.run_dir import load_trained

    sources = read(os.path.join(args.data, "test_2016_flickr.en.gz"))
    references = read(os.path.join(args.data, "test_2016_flickr.de.gz"))
    model, tokenizer = load_trained(args.model)

    def run(name: str) -> tuple[dict, list[str]]:
        translator = Translator(tokenizer, model)
        translator(tf.constant(sources[:1]))  # Trace outside the timing.
        start = time.perf_counter()
        out = translator(tf.constant(sources)).numpy()
        seconds = time.perf_counter() - start
        hypotheses = [t.decode("utf-8") for t in out]
        scores = score_translations(hypotheses, references)
        result = {**scores, "seconds": round(seconds, 2)}
        result["weight_mb"] = round(weight_bytes(model) / 2**20, 2)
        print(name, json.dumps(result), flush=True)
        return result, hypotheses

    results = {}
    results["float32"], float_out = run("float32")
    with warnings.catch_warnings():  # Keras names each layer it leaves float.
        warnings.simplefilter("ignore")
        model.quantize("int8")
    results["int8"], int8_out = run("int8")
    results["differing_translations"] = sum(
        a != b for a, b in zip(float_out, int8_out, strict=True)
    )
    print("differing translations:", results["differing_translations"])
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
