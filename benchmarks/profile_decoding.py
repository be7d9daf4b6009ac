"""Where translation time goes: start-up phases, then op time by search part.

Times, in one process, what `keras-transformer translate` does: importing
TensorFlow, Keras and the package, loading the model and tokenizer, the
first call (tracing the search, graph optimization, one sentence), and then
translating `--sentences` sentences of Multi30k test2016 under
`tf.profiler`. The recorded op time is summed by the part of the search
each op belongs to (the name scopes of `keras_transformer.decoding`):
tokenize, encoder, decoder (the steps' layers), select (top-k, hypothesis
bookkeeping), reorder (beam reorder and compaction gathers of the caches),
compact (results of finished sentences), detokenize, and "other" (loop
control, the translator's batching). Run it with one inter-op thread, so
ops run one at a time and their durations add up:

    TF_NUM_INTEROP_THREADS=1 .venv/bin/python benchmarks/profile_decoding.py \\
        --model runs/multi30k_en_de

`--saved-model DIR` profiles an exported translator instead of building
one from `model.keras`. Profiling slows ops down; use the shares.
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import os
import time

START = time.perf_counter()
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")

import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402, F401 (the SentencePiece ops)
from tensorflow.tsl.profiler.protobuf import xplane_pb2  # noqa: E402

IMPORTED_TF = time.perf_counter()

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DATA = os.path.join(REPO, "..", "shared", "data", "multi30k")
PARTS = (
    "tokenize",
    "detokenize",
    "encoder",
    "reorder",
    "compact",
    "select",
    "decoder",
)


def part_of(name: str) -> str:
    """The innermost search part named in an op's scope path."""
    scopes = name.split(":", 1)[0].split("/")
    for scope in reversed(scopes):
        base = scope.rsplit("_", 1)[0] if scope[-1:].isdigit() else scope
        if base in PARTS:
            return base
    return "other"


def op_times(logdir: str) -> collections.Counter:
    """Total op duration (s) by search part in the newest host trace."""
    paths = glob.glob(os.path.join(logdir, "plugins/profile/*/*.xplane.pb"))
    space = xplane_pb2.XSpace()
    with open(max(paths, key=os.path.getmtime), "rb") as f:
        space.ParseFromString(f.read())
    times = collections.Counter()
    for plane in space.planes:
        if not plane.name.startswith("/host:CPU"):
            continue
        names = {k: v.name for k, v in plane.event_metadata.items()}
        for line in plane.lines:
            if not line.name.startswith("tf_Compute"):
                continue
            for event in line.events:
                name = names[event.metadata_id]
                # "name:Type"; function calls and loops nest other ops.
                op_type = name.rsplit(":", 1)[-1] if ":" in name else None
                if op_type in (None, "Process", "While", "StatelessWhile", "If"):
                    continue
                if op_type in ("StatelessIf", "PartitionedCall"):
                    continue
                if op_type == "StatefulPartitionedCall":
                    continue
                times[part_of(name)] += event.duration_ps / 1e12
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="directory with model.keras + tokenizer")
    parser.add_argument("--saved-model", help="an exported translator instead")
    parser.add_argument("--data", default=DEFAULT_DATA, help="Multi30k directory")
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--logdir", default="profile_decoding")
    args = parser.parse_args()
    with gzip.open(os.path.join(args.data, "test_2016_flickr.en.gz"), "rt") as f:
        sentences = [line.strip() for line in f][: args.sentences]

    phases = {"import tensorflow + tensorflow_text": IMPORTED_TF - START}
    mark = time.perf_counter()
    if args.saved_model:
        translator = tf.saved_model.load(args.saved_model)
        phases["load the SavedModel"] = time.perf_counter() - mark
    else:
        from keras_transformer.decoding import Translator
        from keras_transformer.jobs.run_dir import load_trained

        phases["import keras + keras_transformer"] = time.perf_counter() - mark
        mark = time.perf_counter()
        model, tokenizer = load_trained(args.model)
        translator = Translator(tokenizer, model, beam_size=args.beam)
        phases["load model + tokenizer"] = time.perf_counter() - mark
    mark = time.perf_counter()
    translator(tf.constant(sentences[:1])).numpy()
    phases["first call (trace, optimize, 1 sentence)"] = time.perf_counter() - mark

    tf.profiler.experimental.start(args.logdir)
    mark = time.perf_counter()
    for i in range(0, len(sentences), args.batch_size):
        translator(tf.constant(sentences[i : i + args.batch_size])).numpy()
    seconds = time.perf_counter() - mark
    tf.profiler.experimental.stop()

    for phase, s in phases.items():
        print(f"{phase:44s} {s:6.2f} s")
    print(
        f"{'translate ' + str(len(sentences)) + ' sentences (profiled)':44s} "
        f"{seconds:6.2f} s  ({len(sentences) / seconds:.1f} sentences/s)"
    )
    times = op_times(args.logdir)
    total = sum(times.values())
    print(f"\nop time {total:.2f} s ({100 * total / seconds:.0f}% of the wall time)")
    for part, s in times.most_common():
        print(f"  {part:12s} {s:6.2f} s {100 * s / total:5.1f}%")


if __name__ == "__main__":
    main()
