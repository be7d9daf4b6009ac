"""The training recipe: optimizer, mixed precision, checkpoint averaging."""

from keras_transformer.training.averaging import (
    CheckpointAveraging,
    average_checkpoints,
)
from keras_transformer.training.budget import TrainingBudget
from keras_transformer.training.optimizers import transformer_optimizer
from keras_transformer.training.precision import set_mixed_precision

__all__ = [
    "CheckpointAveraging",
    "TrainingBudget",
    "average_checkpoints",
    "set_mixed_precision",
    "transformer_optimizer",
]
