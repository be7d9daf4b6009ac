"""Training throughput: our Transformer against keras-hub at the same shape.

Both models are built at one shape (by default vocab 8000, d_model 256,
4 heads, d_ff 1024, 3 + 3 layers, batches of 64 x 32 source and 32 target
tokens), trained with Adam through `model.fit` on one repeated batch, each
with and without XLA (`jit_compile`). Every variant is built and warmed up
(`--warmup` steps: tracing and compiling) first; then `--rounds` rounds each
time `--steps` steps of every variant in turn, and the median round is
reported (and the best). Interleaving matters on a shared VM, where the
speed of the machine drifts by 20% within minutes: a variant timed alone at
a slow moment looks slower than it is. The fp32 matmul peak of this machine (a
2048 x 2048 x 2048 matmul, best of several) is measured before each round,
so each result is also given as a share of the best peak seen:

    achieved FLOP/s = 6 x matmul parameters x target tokens / second

with the matmul parameters those of the projections, feed-forward layers and
output projection (embedding look-ups and attention's score products are not
counted, as usual).

keras-hub is a benchmark-only dependency: `pip install keras-hub`.

Usage (from the repository root):

    .venv/bin/python benchmarks/training.py --json training.json

`--variants` picks what to run (e.g. `ours ours-xla hub hub-xla`;
`-xla` compiles the whole step with XLA, `model.compile(jit_compile=True)`;
`-dynamic` feeds the same batch with its length unknown to the traced
step, as the recipe's bucketed batches are (`make_batches`); `ours-plain-loss` computes
the label-smoothed loss through `log_softmax` and automatic differentiation
instead of the one-pass custom gradient; `ours-tf-einsum` is `ours` with
Keras's einsum handing every equation to `tf.einsum`, to measure what
Keras's rewrite of the projections on a static length costs;
`ours-attention-dropout-dynamic` is `ours-dynamic` with dropout 0.1 on the
attention weights, `attention_dropout`, as the 30-minute recipe trains;
`ours-activation-dropout-dynamic` adds dropout 0.1 inside the feed-forward
networks, `activation_dropout`; `ours-bf16-dynamic` is `ours-dynamic` in
Keras's "mixed_bfloat16" policy, and `ours-bf16-float32-logits-dynamic` the
same with the projection to the vocabulary in float32, as the model
computed it before 2026-12-05); every
variant trains with `keras.optimizers.Adam`;
`--length` and `--batch-size` change the shape (the scaling runs use them).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import resource
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# The pooled CPU allocator, as `keras-transformer` sets it
# (keras_transformer_cli.use_memory_pool).
os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

# Keras's TensorFlow einsum, a private module: for `ours-tf-einsum` only.
from keras.src.backend.tensorflow import numpy as tf_numpy  # noqa: E402

from keras_transformer.losses import MaskedCrossEntropy  # noqa: E402
from keras_transformer.models import Transformer  # noqa: E402

VARIANTS = (
    "ours",
    "ours-xla",
    "ours-plain-loss",
    "ours-dynamic",
    "ours-tf-einsum",
    "ours-attention-dropout-dynamic",
    "ours-activation-dropout-dynamic",
    "ours-bf16-dynamic",
    "ours-bf16-float32-logits-dynamic",
    "hub",
    "hub-xla",
    "hub-dynamic",
)
# The variants with more than the residual dropout: their attention and
# activation dropout rates.
DROPOUTS = {
    "ours-attention-dropout-dynamic": (0.1, 0.0),
    "ours-activation-dropout-dynamic": (0.1, 0.1),
}


def matmul_peak(n: int = 2048, repeats: int = 10) -> float:
    """Best fp32 FLOP/s of an n x n x n matmul."""
    a = tf.random.normal((n, n))
    b = tf.random.normal((n, n))
    matmul = tf.function(lambda a, b: tf.reduce_sum(tf.matmul(a, b)))
    matmul(a, b).numpy()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        matmul(a, b).numpy()
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best


def matmul_parameters(vocab, d_model, d_ff, layers) -> int:
    """Weights that multiply each target token (projections, FFN, softmax)."""
    attention = 4 * d_model * d_model
    feed_forward = 2 * d_model * d_ff
    encoder = layers * (attention + feed_forward)
    decoder = layers * (2 * attention + feed_forward)
    return encoder + decoder + vocab * d_model


def ours(args, attention_dropout=0.0, activation_dropout=0.0, **kwargs):
    model = Transformer(
        vocab_size=args.vocab,
        num_layers=args.layers,
        d_model=args.d_model,
        num_heads=args.heads,
        d_ff=args.d_ff,
        dropout=0.1,
        attention_dropout=attention_dropout,
        activation_dropout=activation_dropout,
        max_length=max(args.length, 32),
        **kwargs,
    )
    return model, MaskedCrossEntropy(label_smoothing=0.1)


def hub(args):
    import keras_hub

    source = keras.Input((None,), dtype="int32")
    target = keras.Input((None,), dtype="int32")
    embedding = keras_hub.layers.ReversibleEmbedding(
        args.vocab, args.d_model, tie_weights=True, mask_zero=True
    )
    positions = keras_hub.layers.SinePositionEncoding()

    def embed(ids):
        x = embedding(ids)
        return x + positions(x)

    x = embed(source)
    for _ in range(args.layers):
        x = keras_hub.layers.TransformerEncoder(args.d_ff, args.heads, dropout=0.1)(x)
    memory = x
    y = embed(target)
    for _ in range(args.layers):
        y = keras_hub.layers.TransformerDecoder(args.d_ff, args.heads, dropout=0.1)(
            y, memory
        )
    logits = embedding(y, reverse=True)
    model = keras.Model((source, target), logits)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0)
    return model, loss


def batch(args):
    rng = np.random.default_rng(0)
    shape = (args.batch_size, args.length)
    source = rng.integers(4, args.vocab, shape, dtype=np.int32)
    target = rng.integers(4, args.vocab, (args.batch_size, args.length + 1), "int32")
    return (source, target[:, :-1]), target[:, 1:]


def prepare(variant, args):
    """The compiled model of `variant`, warmed up, and its `fit` data."""
    keras.utils.set_random_seed(0)
    if variant.startswith("ours"):
        precision = {}
        if "-bf16" in variant:
            precision["dtype"] = "mixed_bfloat16"
        if "-float32-logits" in variant:
            # The product computed in float32, as under mixed precision
            # before 2026-12-05.
            precision["projection_dtype"] = "float32"
        model, loss = ours(args, *DROPOUTS.get(variant, (0.0, 0.0)), **precision)
    else:
        model, loss = hub(args)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-4, beta_2=0.98, epsilon=1e-9),
        loss=loss,
        jit_compile="xla" in variant,
    )
    data = tf.data.Dataset.from_tensors(batch(args)).repeat()
    if variant.endswith("-dynamic"):
        data = _length_unknown(batch(args))
    with _patched(variant):
        model.fit(data, steps_per_epoch=args.warmup, verbose=0)
    return model, data


def time_steps(variant, model, data, steps) -> float:
    """Seconds per step over `steps` steps, after one untimed step."""
    clock = _Clock()
    with _patched(variant):
        model.fit(data, steps_per_epoch=steps + 1, verbose=0, callbacks=[clock])
    # Wall time from the end of the first step to the end of the last.
    return (clock.ends[-1] - clock.ends[0]) / steps


def _length_unknown(one_batch):
    """The same batch, repeated, but with the length unknown to the step.

    `make_batches` mixes buckets of several lengths, so the step `fit`
    traces for the recipe sees `(B, None)` batches; a dataset of one fixed
    shape lets TensorFlow specialize the step to it.
    """
    ids = tf.TensorSpec((one_batch[1].shape[0], None), tf.int32)
    return tf.data.Dataset.from_generator(
        lambda: itertools.repeat(one_batch), output_signature=((ids, ids), ids)
    )


@contextlib.contextmanager
def _patched(variant):
    # "ours-plain-loss": the label-smoothed loss through log_softmax and
    # automatic differentiation, not the one-pass custom gradient.
    token_losses = MaskedCrossEntropy._token_losses
    if variant == "ours-plain-loss":
        MaskedCrossEntropy._token_losses = _plain_token_losses
    if variant == "ours-tf-einsum":
        tf_numpy.einsum = _tf_einsum
    try:
        yield
    finally:
        MaskedCrossEntropy._token_losses = token_losses
        tf_numpy.einsum = _keras_einsum


_keras_einsum = tf_numpy.einsum


def _tf_einsum(subscripts, *operands, **kwargs):
    """Keras's einsum without its static-shape rewrite.

    Given no keyword arguments and fully known shapes, Keras turns
    "abc,cde->abde" (the query, key and value projections) into
    `tf.matmul` of a 3-D input and a 2-D kernel, a broadcasting batch
    matmul whose kernel gradient is computed per batch row and then
    summed. Any keyword argument sends the equation to `tf.einsum`, whose
    kernel gradient contracts batch and length in one product.
    """
    return _keras_einsum(subscripts, *operands, name="einsum", **kwargs)


def _plain_token_losses(self, y_true, y_pred):
    log_probs = keras.ops.log_softmax(keras.ops.cast(y_pred, "float32"), axis=-1)
    ids = keras.ops.where(keras.ops.equal(y_true, self.pad_id), 0, y_true)
    nll = -keras.ops.take_along_axis(log_probs, ids[..., None], axis=-1)[..., 0]
    off = self.label_smoothing / (
        keras.ops.cast(keras.ops.shape(log_probs)[-1], "float32") - 1.0
    )
    uniform_nll = -keras.ops.sum(log_probs, axis=-1)
    return (1.0 - self.label_smoothing - off) * nll + off * uniform_nll


def result(variant, seconds, args) -> dict:
    tokens = args.batch_size * args.length
    return {
        "variant": variant,
        "ms_per_step": 1000 * seconds,
        "target_tokens_per_s": tokens / seconds,
        "flops_per_s": 6 * args.matmul_parameters * tokens / seconds,
    }


class _Clock(keras.callbacks.Callback):
    """Wall-clock time at the end of each step (waiting for its loss)."""

    def __init__(self):
        super().__init__()
        self.ends = []

    def on_train_batch_end(self, batch, logs=None):
        float(logs["loss"])
        self.ends.append(time.perf_counter())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS))
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--d-ff", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--length", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10, help="timed steps a round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    for variant in args.variants:
        if variant not in VARIANTS:
            parser.error(f"unknown variant {variant!r}; choose from {VARIANTS}")
    args.matmul_parameters = matmul_parameters(
        args.vocab, args.d_model, args.d_ff, args.layers
    )
    prepared = {variant: prepare(variant, args) for variant in args.variants}
    peaks, rounds = [], {variant: [] for variant in args.variants}
    for r in range(args.rounds):
        peaks.append(matmul_peak())
        line = [f"round {r + 1}: peak {peaks[-1] / 1e9:.1f} GFLOP/s"]
        for variant, (model, data) in prepared.items():
            rounds[variant].append(time_steps(variant, model, data, args.steps))
            line.append(f"{variant} {1000 * rounds[variant][-1]:.0f} ms")
        print(", ".join(line), flush=True)
    peak = max(peaks)
    print(f"fp32 matmul peak: {peak / 1e9:.1f} GFLOP/s (best of {args.rounds} rounds)")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    results = []
    for variant, seconds in rounds.items():
        row = result(variant, statistics.median(seconds), args)
        row["ms_per_step_rounds"] = [round(1000 * s, 1) for s in seconds]
        row["ms_per_step_best"] = 1000 * min(seconds)
        row["share_of_peak"] = row["flops_per_s"] / peak
        row["peak_rss_mib"] = rss  # The whole process: all variants run in it.
        results.append(row)
        print(
            f"{variant:20s} {row['ms_per_step']:7.1f} ms/step "
            f"(best round {row['ms_per_step_best']:7.1f}) "
            f"{row['target_tokens_per_s']:6.0f} target tokens/s "
            f"{100 * row['share_of_peak']:5.1f}% of peak",
            flush=True,
        )
    print(f"peak RSS of the process: {rss:.0f} MiB")
    if args.json:
        shape = {k: getattr(args, k) for k in ("vocab", "d_model", "heads", "d_ff")}
        shape.update(layers=args.layers, batch_size=args.batch_size)
        shape.update(length=args.length, matmul_parameters=args.matmul_parameters)
        with open(args.json, "w") as f:
            report = {"peak_flops": peak, "peaks": peaks, "shape": shape}
            json.dump({**report, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
