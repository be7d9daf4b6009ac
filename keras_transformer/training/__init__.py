"""The training recipe: optimizer, mixed precision, checkpoint averaging,
time and step budgets, snapshots, and distribution."""

from keras_transformer.training.averaging import (
    CheckpointAveraging,
    average_checkpoints,
)
from keras_transformer.training.budget import TrainingBudget
from keras_transformer.training.distributed import (
    build_for_fit,
    fit_distributed,
    is_chief,
    make_strategy,
)
from keras_transformer.training.optimizers import transformer_optimizer
from keras_transformer.training.precision import set_mixed_precision
from keras_transformer.training.snapshots import Snapshots

__all__ = [
    "CheckpointAveraging",
    "Snapshots",
    "TrainingBudget",
    "average_checkpoints",
    "build_for_fit",
    "fit_distributed",
    "is_chief",
    "make_strategy",
    "set_mixed_precision",
    "transformer_optimizer",
]
