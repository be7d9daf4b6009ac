"""A schedule that ends in a straight line down to zero."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_transformer")
class LinearCooldown(keras.optimizers.schedules.LearningRateSchedule):
    """Another schedule until `start`, then linearly down to zero.

    The learning rate at step `step` is

        schedule(step)                                   for step <= start
        schedule(start) * (start + steps - step) / steps for start < step

    and 0 from `start + steps` on: the rate the wrapped schedule reached
    at `start` falls in a straight line over the last `steps` steps of
    training, the cool-down of a run whose length is known (Hägele et al.
    2024 study it after a constant rate; here it follows the paper's
    inverse square root). A run of `N` steps takes `start = N - steps`.

    A Keras optimizer asks for the rate of each update at its iteration
    count before the update, so of a run of `N = start + steps` updates the
    last `steps` ones take `steps / steps, ..., 1 / steps` of the rate at
    `start`: the rate reaches zero just after the last update.

    Like the schedules it wraps, it is a pure function of `step`: a run
    resumed from a checkpoint continues on the same line as long as `start`
    and `steps` stay the same.

    Args:
        schedule: the schedule until `start` (a `LearningRateSchedule`).
        start: the last step of `schedule`'s rate (>= 0).
        steps: how many steps the rate takes to reach zero (>= 1).

    Returns:
        Called with `step`, a float32 scalar tensor: the learning rate.

    Example:

    >>> from keras_transformer.schedules import TransformerSchedule
    >>> paper = TransformerSchedule(d_model=256, warmup_steps=800)
    >>> schedule = LinearCooldown(paper, start=9000, steps=1000)
    >>> float(schedule(9000)) == float(paper(9000))
    True
    >>> round(float(schedule(9500)) / float(paper(9000)), 4)  # half-way
    0.5
    >>> float(schedule(10000)), float(schedule(12000))
    (0.0, 0.0)

    References:
        Hägele et al., "Scaling Laws and Compute-Optimal Training Beyond
        Fixed Training Durations", 2024 (the cool-down).
    """

    def __init__(
        self,
        schedule: keras.optimizers.schedules.LearningRateSchedule,
        start: int,
        steps: int,
    ) -> None:
        if not isinstance(schedule, keras.optimizers.schedules.LearningRateSchedule):
            raise TypeError(
                "schedule must be a keras.optimizers.schedules.LearningRateSchedule. "
                f"Received: schedule={schedule!r}"
            )
        if start < 0:
            raise ValueError(f"start must be >= 0. Received: start={start}")
        if steps < 1:
            raise ValueError(f"steps must be >= 1. Received: steps={steps}")
        self.schedule = schedule
        self.start = start
        self.steps = steps

    def __call__(self, step):
        step = ops.cast(step, "float32")
        start = ops.cast(self.start, "float32")
        before = self.schedule(ops.minimum(step, start))
        left = (start + float(self.steps) - step) / float(self.steps)
        return before * ops.clip(left, 0.0, 1.0)

    def get_config(self) -> dict:
        return {
            "schedule": keras.optimizers.schedules.serialize(self.schedule),
            "start": self.start,
            "steps": self.steps,
        }

    @classmethod
    def from_config(cls, config: dict) -> "LinearCooldown":
        config = dict(config)
        config["schedule"] = keras.optimizers.schedules.deserialize(config["schedule"])
        return cls(**config)
