"""The warm-up then inverse-square-root learning rate of the Transformer."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up, then decay with the inverse square root of the step.

    The learning rate at training step `step` is

        lrate = scale * d_model**-0.5
                * min(step**-0.5, step * warmup_steps**-1.5)

    It grows linearly for the first `warmup_steps` steps, peaks at
    `step == warmup_steps` with `scale * (d_model * warmup_steps)**-0.5`, and
    then decays proportionally to `step**-0.5`.

    Step 0: the formula is infinite at `step = 0` (`0**-0.5`), and a Keras
    optimizer asks for the rate of its first update with
    `optimizer.iterations == 0`. The schedule therefore evaluates
    `max(step, 1)`: `schedule(0) == schedule(1)`, and `schedule(n)` equals the
    paper's formula exactly for every `n >= 1`.

    The schedule is a pure function of `step` (no state, no Python-side
    counters), so it gives the same rate on every replica under a
    `tf.distribute` strategy and inside a compiled `tf.function`. `step` may
    be a Python number or a scalar tensor of any numeric dtype (the optimizer
    passes its `int64` iteration counter); the rate is computed in float32.

    Args:
        d_model: The model width `D` (`d_model` in the paper); the rate is
            scaled by `d_model**-0.5`.
        warmup_steps: Number of warm-up steps; the paper uses 4000.
        scale: Constant factor applied to the whole rate (1.0 in the paper).

    Returns:
        Called with `step`, a float32 scalar tensor: the learning rate.

    Example:

    >>> schedule = TransformerSchedule(d_model=512, warmup_steps=4000)
    >>> round(float(schedule(4000)), 8)  # the peak: (512 * 4000) ** -0.5
    0.00069877
    >>> float(schedule(0)) == float(schedule(1))
    True
    >>> optimizer = keras.optimizers.Adam(learning_rate=schedule)

    References:
        Vaswani et al., "Attention Is All You Need", 2017, section 5.3
        (Optimizer), equation (3).
    """

    def __init__(
        self, d_model: int, warmup_steps: int = 4000, scale: float = 1.0
    ) -> None:
        if d_model <= 0:
            raise ValueError(
                f"d_model must be a positive number. Received: d_model={d_model}"
            )
        if warmup_steps <= 0:
            raise ValueError(
                "warmup_steps must be a positive number. "
                f"Received: warmup_steps={warmup_steps}"
            )
        if scale <= 0:
            raise ValueError(
                f"scale must be a positive number. Received: scale={scale}"
            )
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.scale = scale

    def __call__(self, step):
        # Guard step 0, where step**-0.5 is infinite (see the class docstring).
        step = ops.maximum(ops.cast(step, "float32"), 1.0)
        warmup = ops.cast(self.warmup_steps, "float32")
        factor = ops.cast(self.scale * float(self.d_model) ** -0.5, "float32")
        decay = ops.rsqrt(step)
        ramp = step * warmup**-1.5
        return factor * ops.minimum(decay, ramp)

    def get_config(self) -> dict:
        return {
            "d_model": self.d_model,
            "warmup_steps": self.warmup_steps,
            "scale": self.scale,
        }
