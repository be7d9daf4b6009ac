"""Learning-rate schedules."""

from keras_transformer.schedules.linear_cooldown import LinearCooldown
from keras_transformer.schedules.transformer_schedule import TransformerSchedule

__all__ = ["LinearCooldown", "TransformerSchedule"]
