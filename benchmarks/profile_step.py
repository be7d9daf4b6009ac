"""Where a training step's time goes: TensorFlow op time by op type.

Trains our `Transformer` at the shape of `training.py` (vocabulary 8000,
d_model 256, 4 heads, d_ff 1024, 3 + 3 layers, 64 x 32 tokens) with
Adam and the label-smoothed loss, records `--steps` steps with
`tf.profiler`, and sums the recorded op durations by op type. Run it with
one inter-op thread, so ops run one at a time and their durations add up
to the step:

    TF_NUM_INTEROP_THREADS=1 .venv/bin/python benchmarks/profile_step.py

The trace stays in `--logdir` for TensorBoard's profile plugin. Profiling
and the single inter-op thread slow the step down; use the shares, not the
absolute times.
"""

from __future__ import annotations

import argparse
import collections
import glob
import itertools
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# The pooled CPU allocator, as `keras-transformer` sets it
# (keras_transformer_cli.use_memory_pool).
os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.tsl.profiler.protobuf import xplane_pb2  # noqa: E402

from keras_transformer.losses import MaskedCrossEntropy  # noqa: E402
from keras_transformer.models import Transformer  # noqa: E402


def op_times(logdir):
    """Total duration (ms) and count of each op type in the host trace."""
    # Each run adds a trace; read the newest.
    paths = glob.glob(os.path.join(logdir, "plugins/profile/*/*.xplane.pb"))
    path = max(paths, key=os.path.getmtime)
    space = xplane_pb2.XSpace()
    with open(path, "rb") as f:
        space.ParseFromString(f.read())
    times, counts = collections.Counter(), collections.Counter()
    for plane in space.planes:
        if not plane.name.startswith("/host:CPU"):
            continue
        names = {k: v.name for k, v in plane.event_metadata.items()}
        for line in plane.lines:
            if not line.name.startswith("tf_Compute"):
                continue
            for event in line.events:
                name = names[event.metadata_id]
                # Ops are named "name:Type"; function calls ("Process") nest
                # other ops and are left out.
                op_type = name.rsplit(":", 1)[-1] if ":" in name else None
                if op_type in (None, "Process"):
                    continue
                times[op_type] += event.duration_ps / 1e9
                counts[op_type] += 1
    return times, counts


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--logdir", default="profile_step")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument(
        "--dynamic",
        action="store_true",
        help="the length unknown to the step, as in make_batches' buckets",
    )
    args = parser.parse_args()
    keras.utils.set_random_seed(0)
    model = Transformer(
        vocab_size=8000, num_layers=3, d_model=256, num_heads=4, d_ff=1024
    )
    model.compile(
        optimizer=keras.optimizers.Adam(1e-4, beta_2=0.98, epsilon=1e-9),
        loss=MaskedCrossEntropy(label_smoothing=0.1),
    )
    rng = np.random.default_rng(0)
    source = rng.integers(4, 8000, (64, 32), dtype=np.int32)
    target = rng.integers(4, 8000, (64, 33), dtype=np.int32)
    batch = ((source, target[:, :-1]), target[:, 1:])
    data = tf.data.Dataset.from_tensors(batch).repeat()
    if args.dynamic:
        ids = tf.TensorSpec((64, None), tf.int32)
        data = tf.data.Dataset.from_generator(
            lambda: itertools.repeat(batch), output_signature=((ids, ids), ids)
        )
    model.fit(data, steps_per_epoch=3, verbose=0)  # Tracing, warm-up.
    tf.profiler.experimental.start(args.logdir)
    start = time.perf_counter()
    model.fit(data, steps_per_epoch=args.steps, verbose=0)
    seconds = (time.perf_counter() - start) / args.steps
    tf.profiler.experimental.stop()
    times, counts = op_times(args.logdir)
    total = sum(times.values()) / args.steps
    print(f"{1000 * seconds:.0f} ms/step profiled; ops add up to {total:.0f} ms")
    for op_type, ms in times.most_common(args.top):
        ms /= args.steps
        print(
            f"{op_type:32s} {ms:7.1f} ms {100 * ms / total:5.1f}% "
            f"{counts[op_type] // args.steps:5d} calls"
        )


if __name__ == "__main__":
    main()
