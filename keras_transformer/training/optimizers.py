"""The optimizer of the paper: Adam on the warm-up schedule."""

from typing import Any

import keras

from keras_transformer.schedules import LinearCooldown, TransformerSchedule


def transformer_optimizer(
    d_model: int,
    warmup_steps: int = 4000,
    scale: float = 1.0,
    cooldown: tuple[int, int] | None = None,
    **adam_kwargs: Any,
) -> keras.optimizers.Adam:
    """Adam with beta_1=0.9, beta_2=0.98, epsilon=1e-9 on `TransformerSchedule`.

    Args:
        d_model: The model width `D`, passed to `TransformerSchedule`.
        warmup_steps: Warm-up steps of the schedule (4000 in the paper).
        scale: Constant factor on the learning rate (1.0 in the paper).
        cooldown: `(start, steps)`: after step `start` the rate falls
            linearly to zero over `steps` steps (`LinearCooldown`); `None`
            (the paper): no cool-down.
        **adam_kwargs: Further arguments of Adam, such as
            `clipnorm` or `weight_decay` (decoupled; a `weight_decay` of 0
            is left out, so the step has no decay op at all). `beta_1`,
            `beta_2` and `epsilon` given here replace the paper's values.
            `learning_rate` is not accepted: the schedule is the point of
            this function.

    Returns:
        A `keras.optimizers.Adam` with `learning_rate` a
        `TransformerSchedule(d_model, warmup_steps, scale)`, or with
        `cooldown` that schedule in a `LinearCooldown`.

    Example:

    >>> optimizer = transformer_optimizer(d_model=512)
    >>> optimizer.beta_1, optimizer.beta_2, optimizer.epsilon
    (0.9, 0.98, 1e-09)
    >>> optimizer.get_config()["learning_rate"]["registered_name"]
    'keras_transformer>TransformerSchedule'

    References:
        Vaswani et al., "Attention Is All You Need", 2017, section 5.3
        (Optimizer).
    """
    if "learning_rate" in adam_kwargs:
        raise ValueError(
            "transformer_optimizer sets learning_rate to a TransformerSchedule; "
            "pass d_model, warmup_steps and scale instead. Received: "
            f"learning_rate={adam_kwargs['learning_rate']!r}"
        )
    options = {"beta_1": 0.9, "beta_2": 0.98, "epsilon": 1e-9}
    options.update(adam_kwargs)
    if not options.get("weight_decay"):
        options.pop("weight_decay", None)
    schedule = TransformerSchedule(d_model, warmup_steps=warmup_steps, scale=scale)
    if cooldown is not None:
        schedule = LinearCooldown(schedule, *cooldown)
    return keras.optimizers.Adam(learning_rate=schedule, **options)
