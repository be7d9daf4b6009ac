"""Attention on a GPU: our MultiHeadAttention against Keras's, fused or not.

Our layer's training path is Keras's own (`keras.ops.dot_product_attention`
where it applies), so on a GPU it should get the same fused attention
kernels as `keras.layers.MultiHeadAttention`. This script checks that on
the JAX backend: for each mask (none, padding, causal) and each
`flash_attention` setting (`None`: Keras decides; `False`), it builds both
layers with the same weights, compiles one forward and backward pass with
`jax.jit`, and reports

- `fused`: whether the compiled program calls cuDNN's fused attention
  (a `__cudnn$fmha` custom call in the optimized HLO);
- milliseconds per forward and backward pass (median of `--rounds` rounds
  of `--steps` calls);
- the largest difference between the two layers' outputs.

It needs JAX with a GPU and Keras, not TensorFlow:

    KERAS_BACKEND=jax python benchmarks/attention_gpu.py --json attention.json

The default shape is the paper's base model's (8 heads of 64, d_model 512)
at batch 32 and length 512, in bfloat16.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_transformer.layers import MultiHeadAttention  # noqa: E402

MASKS = ("none", "padding", "causal")


def _inputs(batch, length, d_model, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(batch, length, d_model)).astype("float32")
    # Padding: each sequence keeps a random number of its positions.
    kept = rng.integers(length // 2, length + 1, size=batch)
    padding = np.arange(length)[None, :] < kept[:, None]
    return keras.ops.cast(x, dtype), padding


def _call_args(mask, padding):
    if mask == "padding":
        return {"query_mask": padding, "value_mask": padding}
    if mask == "causal":
        return {"use_causal_mask": True}
    return {}


def measure(layer, x, kwargs, steps, rounds):
    """Forward and backward through `layer`: (fused, ms per call, output)."""
    trainable = [v.value for v in layer.trainable_variables]
    others = [v.value for v in layer.non_trainable_variables]

    def loss(trainable, x):
        out, _ = layer.stateless_call(trainable, others, x, x, **kwargs)
        return keras.ops.mean(keras.ops.cast(out, "float32") ** 2), out

    step = jax.jit(jax.value_and_grad(loss, has_aux=True))
    hlo = step.lower(trainable, x).compile().as_text()
    (_, out), grads = step(trainable, x)
    jax.block_until_ready(grads)
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(steps):
            result = step(trainable, x)
        jax.block_until_ready(result)
        times.append((time.perf_counter() - start) / steps * 1000)
    return "__cudnn$fmha" in hlo, statistics.median(times), np.asarray(out, "float32")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--key-dim", type=int, default=64)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args(argv)
    d_model = args.heads * args.key_dim
    x, padding = _inputs(args.batch, args.length, d_model, args.dtype)
    print(
        f"{jax.devices()[0].device_kind}, jax {jax.__version__}, "
        f"keras {keras.__version__}"
    )
    rows = []
    for mask in MASKS:
        for flash in (None, False):
            settings = dict(
                num_heads=args.heads,
                key_dim=args.key_dim,
                flash_attention=flash,
                dtype=args.dtype,
            )
            theirs = keras.layers.MultiHeadAttention(**settings)
            ours = MultiHeadAttention(**settings)
            theirs(x, x)
            ours(x, x)
            ours.set_weights(theirs.get_weights())
            kwargs = _call_args(mask, padding)
            results = {}
            for name, layer in (("keras", theirs), ("ours", ours)):
                try:
                    results[name] = measure(layer, x, kwargs, args.steps, args.rounds)
                except Exception as error:  # e.g. a kernel that refuses a mask
                    results[name] = (None, None, None)
                    print(
                        f"{name}, mask {mask}, flash {flash}: "
                        f"{type(error).__name__}: {str(error)[:200]}"
                    )
            difference = None
            if results["keras"][2] is not None and results["ours"][2] is not None:
                difference = float(
                    np.max(np.abs(results["keras"][2] - results["ours"][2]))
                )
            for name in ("keras", "ours"):
                fused, ms, _ = results[name]
                row = {
                    "layer": name,
                    "mask": mask,
                    "flash_attention": flash,
                    "fused": fused,
                    "ms": None if ms is None else round(ms, 3),
                    "max_difference": difference,
                }
                rows.append(row)
                print(json.dumps(row))
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"shape": vars(args), "rows": rows}, file, indent=1)
    return rows


if __name__ == "__main__":
    main()
