"""Learning-rate schedules."""

from keras_transformer.schedules.transformer_schedule import TransformerSchedule

__all__ = ["TransformerSchedule"]
