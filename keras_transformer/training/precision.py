"""Choosing the global floating-point policy for training."""

import logging

import keras

logger = logging.getLogger(__name__)

POLICIES = ("float32", "mixed_float16", "mixed_bfloat16")


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
