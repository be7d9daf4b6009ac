"""How fast could a training step be? Its matmuls, timed one by one.

A training step of the benchmark shape (see `training.py`) is mostly 2-D
matmuls: for each weight matrix `W` (in x out) and `M` tokens, the forward
`x W` (M x in x out), the input gradient `dy Wᵀ` and the weight gradient
`xᵀ dy`. This script times each of them alone, as TensorFlow runs it in a
training step (same shapes, same transpose flags), on the current kernels
(Eigen, or oneDNN with `TF_ENABLE_ONEDNN_OPTS=1`), and adds them up:

    bound = sum over weights of (forward + input grad + weight grad)

Attention's score products and everything that is not a matmul count as
zero, so no step on these kernels can be faster than `bound`, and no step
can reach a larger share of the machine's peak than

    6 x matmul parameters x tokens / bound / peak

with `peak` the fastest matmul rate seen in the run (the 2048^3 matmul at
the start and end, and every matmul timed).

Then it times the rest of the work the model requires, each piece alone
at the library's fastest implementation (forward and backward): the
heads' attention (score products and softmax,
`keras.ops.dot_product_attention` as the layer runs it), the loss over
the vocabulary, the dropouts, the layer normalizations and the optimizer
update (of the matmul weights). Added to the matmuls, that is what the
step's required work takes run piece by piece, as a share of the 2048^3
matmul's rate (the peak `training.py` reports against). A step also has
bias and residual additions, gradient sums, the embedding look-up and
Keras's own work, counted as zero here; and its ops can overlap on
TensorFlow's two inter-op threads, which a sum of pieces timed alone
does not show.

Usage (from the repository root):

    .venv/bin/python benchmarks/matmul_bound.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# The pooled CPU allocator, as `keras-transformer` sets it
# (keras_transformer_cli.use_memory_pool).
os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_transformer.losses import _compiled_cross_entropy  # noqa: E402


def shapes(vocab, d_model, d_ff, layers):
    """(name, in, out, count) of every weight matrix multiplying each token."""
    d = d_model
    return [
        ("self-attention Q, K, V", d, d, 3 * 2 * layers),
        ("attention output", d, d, 3 * layers),
        ("cross-attention Q, K, V", d, d, 3 * layers),
        ("feed-forward inner", d, d_ff, 2 * layers),
        ("feed-forward outer", d_ff, d, 2 * layers),
        ("softmax (tied embedding)", d, vocab, 1),
    ]


def seconds(fn, *args, repeats):
    """Best time of `repeats` calls (each waits for its result)."""
    fn(*args).numpy()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args).numpy()
        best = min(best, time.perf_counter() - start)
    return best


def _one(fn):
    # Fetch one element only, so copying the result out costs nothing.
    return tf.function(lambda a, b: fn(a, b)[0, 0])


FORWARD = _one(lambda x, w: tf.matmul(x, w))
INPUT_GRAD = _one(lambda dy, w: tf.matmul(dy, w, transpose_b=True))
WEIGHT_GRAD = _one(lambda x, dy: tf.matmul(x, dy, transpose_a=True))


def _with_gradient(fn):
    """`fn(x, *rest)` forward and backward (gradient with respect to `x`)."""

    def run(x, *rest):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x, *rest)
            y = y[0] if isinstance(y, tuple) else y
        return tape.gradient(y, x, output_gradients=tf.ones_like(y))[0, 0]

    return tf.function(run)


def other_work(args):
    """(name, count, seconds) of each required piece of work but the matmuls."""
    d, heads, layers = args.d_model, args.heads, args.layers
    batch, length = args.tokens // args.length, args.length
    x = tf.random.normal((batch, length, d))
    q = tf.reshape(x, (batch, length, heads, d // heads))
    causal = tf.linalg.band_part(tf.ones((length, length), "bool"), -1, 0)
    full = tf.ones((batch, 1, length, length), "bool")
    norm = keras.layers.LayerNormalization(epsilon=1e-6)
    norm.build(x.shape)
    logits = tf.random.normal((args.tokens, args.vocab))
    ids = tf.random.uniform((args.tokens,), maxval=args.vocab, dtype="int32")
    # The heads' attention as `MultiHeadAttention` runs it (Keras's layer).
    attend = _with_gradient(
        lambda q, mask: keras.ops.dot_product_attention(q, q, q, mask=mask)
    )
    work = [
        ("attention, padding mask", 2 * layers, attend, q, full),
        ("attention, causal mask", layers, attend, q, full & causal),
        (
            "loss (softmax over the vocabulary)",
            1,
            _with_gradient(lambda x: _compiled_cross_entropy(ids, x, 0.1)),
            logits,
        ),
        (
            "dropout",
            2 + 5 * layers,
            _with_gradient(
                lambda x, seed: tf.nn.experimental.stateless_dropout(x, 0.1, seed)
            ),
            x,
            tf.constant([1, 2]),  # An input: a constant seed would fold.
        ),
        ("layer normalization", 5 * layers, _with_gradient(norm), x),
    ]
    rows = [
        (name, count, seconds(fn, *inputs, repeats=args.repeats))
        for name, count, fn, *inputs in work
    ]
    weights = [
        tf.Variable(tf.zeros((fan_in, fan_out)))
        for _, fan_in, fan_out, count in shapes(args.vocab, d, args.d_ff, layers)
        for _ in range(count)
    ]
    gradients = [tf.fill(w.shape, 1e-3) for w in weights]
    adam = keras.optimizers.Adam(1e-4, beta_2=0.98, epsilon=1e-9)
    best, _ = update_seconds(adam, weights, gradients, args.repeats)
    rows.append(("Adam update (keras.optimizers.Adam)", 1, best))
    return rows


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
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--d-ff", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=64 * 32)
    parser.add_argument("--length", type=int, default=32, help="tokens a sentence")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    m = args.tokens
    n = 2048
    a, b = tf.random.normal((n, n)), tf.random.normal((n, n))
    square = 2 * n**3 / seconds(FORWARD, a, b, repeats=args.repeats)
    print(f"fp32 matmul peak ({n}^3): {square / 1e9:.1f} GFLOP/s")
    fastest = square
    print(f"{'weight':30s} {'count':>5s}  GFLOP/s: forward  input grad  weight grad")
    total, flops = 0.0, 0
    table = shapes(args.vocab, args.d_model, args.d_ff, args.layers)
    for name, fan_in, fan_out, count in table:
        x, w = tf.random.normal((m, fan_in)), tf.random.normal((fan_in, fan_out))
        dy = tf.random.normal((m, fan_out))
        times = [
            seconds(FORWARD, x, w, repeats=args.repeats),
            seconds(INPUT_GRAD, dy, w, repeats=args.repeats),
            seconds(WEIGHT_GRAD, x, dy, repeats=args.repeats),
        ]
        work = 2 * m * fan_in * fan_out
        rates = "".join(f"{work / t / 1e9:12.1f}" for t in times)
        fastest = max(fastest, work / min(times))
        print(f"{name:30s} {count:5d}  {rates}")
        total += count * sum(times)
        flops += count * 3 * work
    # The VM's speed drifts: take the fastest of the 2048^3 matmul, measured
    # again now, and of every matmul above as the peak.
    square = max(square, 2 * n**3 / seconds(FORWARD, a, b, repeats=args.repeats))
    peak = max(fastest, square)
    print(f"matmuls alone: {1000 * total:.0f} ms a step ({flops / 1e9:.1f} GFLOP)")
    print(
        f"at most {100 * flops / total / peak:.1f}% of the peak "
        f"({peak / 1e9:.1f} GFLOP/s, the fastest matmul seen)"
    )
    print(f"{'other work (forward and backward)':40s} {'count':>5s}  ms each")
    required = total
    for name, count, time_each in other_work(args):
        print(f"{name:40s} {count:5d}  {1000 * time_each:7.2f}")
        required += count * time_each
    print(
        f"matmuls and the work above, piece by piece: {1000 * required:.0f} ms "
        f"a step, {100 * flops / required / square:.1f}% of the {n}^3 matmul's "
        f"rate ({square / 1e9:.1f} GFLOP/s)"
    )


if __name__ == "__main__":
    main()
