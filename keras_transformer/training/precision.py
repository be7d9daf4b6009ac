"""Choosing the global floating-point policy for training."""

import logging
from collections.abc import Sequence
from pathlib import Path

import keras

logger = logging.getLogger(__name__)

POLICIES = ("float32", "mixed_float16", "mixed_bfloat16")
# `training.mixed_precision: auto`: mixed_bfloat16 where the machine computes
# bfloat16 in hardware, float32 elsewhere (`auto_policy`).
AUTO = "auto"

# The /proc/cpuinfo flags of the instructions that compute in each mixed
# policy's half-precision type; without them the CPU converts in software.
_CPU_FLAGS = {
    "mixed_bfloat16": ("avx512_bf16", "amx_bf16"),
    "mixed_float16": ("avx512_fp16", "amx_fp16"),
}


def set_mixed_precision(policy: str) -> None:
    """Sets the global Keras dtype policy used by layers created afterwards.

    A thin, validated wrapper around `keras.mixed_precision.set_dtype_policy`.
    Under a mixed policy layers compute in float16 or bfloat16 and keep their
    variables in float32; `keras_transformer` losses and metrics always
    compute in float32. `Model.compile` wraps the optimizer in a
    `keras.optimizers.LossScaleOptimizer` by itself under "mixed_float16".
    Call it before building the model; layers that already exist keep their
    policy.

    Args:
        policy: One of "float32", "mixed_float16" or "mixed_bfloat16".

    Raises:
        ValueError: If `policy` is not one of the three names above.

    Example:

    >>> set_mixed_precision("mixed_bfloat16")
    >>> layer = keras.layers.Dense(2)
    >>> layer.compute_dtype, layer.variable_dtype
    ('bfloat16', 'float32')
    >>> set_mixed_precision("float32")  # back to the default
    >>> keras.mixed_precision.dtype_policy().name
    'float32'

    References:
        Micikevicius et al., "Mixed Precision Training", ICLR 2018.
    """
    if policy not in POLICIES:
        raise ValueError(
            f"policy must be one of {', '.join(repr(p) for p in POLICIES)}. "
            f"Received: policy={policy!r}"
        )
    keras.mixed_precision.set_dtype_policy(policy)
    logger.debug("Global dtype policy set to %s.", policy)


def cpu_flags(path: str | Path = "/proc/cpuinfo") -> frozenset[str] | None:
    """The instruction-set flags the CPU reports, or None where it cannot tell.

    Reads the first `flags` line of Linux's `/proc/cpuinfo`; other systems
    (and a file without that line) give None.

    Example:

    >>> flags = cpu_flags("/no/such/file")
    >>> flags is None
    True
    """
    try:
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                name, _, value = line.partition(":")
                if name.strip() == "flags":
                    return frozenset(value.split())
    except OSError:
        return None
    return None


def cpu_precision_warning(
    policy: str, gpus: int, flags: frozenset[str] | None
) -> str | None:
    """Why `policy` may train slower than float32 here, or None.

    A mixed policy pays on a CPU only where it has instructions for the
    half-precision type: AVX512_BF16 or AMX for bfloat16, AVX512_FP16 or
    AMX for float16. Without them the conversions are done in software.
    Nothing is said where a GPU does the work or the flags are unknown.

    Args:
        policy: the dtype policy's name.
        gpus: how many GPUs the run sees.
        flags: the CPU's flags (`cpu_flags()`), or None.

    Example:

    >>> import textwrap
    >>> warning = cpu_precision_warning("mixed_bfloat16", 0, frozenset({"avx2"}))
    >>> print(textwrap.fill(warning, 72))
    training.mixed_precision: mixed_bfloat16 on a CPU without avx512_bf16 or
    amx_bf16 instructions converts in software and may train slower than
    float32 (docs/training.md, "Mixed precision")
    >>> cpu_precision_warning("mixed_bfloat16", 0, frozenset({"avx512_bf16"}))
    >>> cpu_precision_warning("mixed_bfloat16", 1, frozenset({"avx2"}))
    """
    needed = _CPU_FLAGS.get(policy)
    if needed is None or gpus or flags is None or flags.intersection(needed):
        return None
    return (
        f"training.mixed_precision: {policy} on a CPU without "
        f"{' or '.join(needed)} instructions converts in software and may "
        'train slower than float32 (docs/training.md, "Mixed precision")'
    )


def auto_policy(
    gpu_capabilities: Sequence[tuple[int, int] | None],
    flags: frozenset[str] | None,
) -> tuple[str, str]:
    """The policy `training.mixed_precision: auto` trains in here, and why.

    `mixed_bfloat16` where bfloat16 products run in hardware: on GPUs when
    every one the run sees has compute capability 8.0 or more (Ampere on),
    and without a GPU on a CPU that lists `avx512_bf16` or `amx_bf16`.
    Elsewhere `float32`: on a CPU without those instructions bfloat16 is
    converted in software, and the two-hour recipe trained about 4.6 times
    slower in it than in float32 on an AVX2 CPU (docs/training.md, "Mixed
    precision"). Unknown capabilities or flags count as missing.

    Args:
        gpu_capabilities: each GPU's (major, minor) compute capability, or
            None where it is not known; empty without a GPU.
        flags: the CPU's flags (`cpu_flags()`), or None.

    Example:

    >>> auto_policy([], frozenset({"avx2", "fma"}))
    ('float32', 'the CPU lists neither avx512_bf16 nor amx_bf16')
    >>> auto_policy([], frozenset({"avx512f", "avx512_bf16"}))[0]
    'mixed_bfloat16'
    >>> auto_policy([(8, 0)], None)[0], auto_policy([(7, 5)], None)[0]
    ('mixed_bfloat16', 'float32')
    """
    if gpu_capabilities:
        if all(c is not None and tuple(c) >= (8, 0) for c in gpu_capabilities):
            return "mixed_bfloat16", "every GPU has compute capability 8.0 or more"
        return "float32", "a GPU has compute capability below 8.0 (or unknown)"
    needed = _CPU_FLAGS["mixed_bfloat16"]
    if flags is not None and flags.intersection(needed):
        return (
            "mixed_bfloat16",
            f"the CPU lists {' or '.join(sorted(flags & set(needed)))}",
        )
    if flags is None:
        return "float32", "the CPU's flags cannot be read"
    return "float32", f"the CPU lists neither {' nor '.join(needed)}"
