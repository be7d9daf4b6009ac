"""The training recipe: optimizer, mixed precision, checkpoints (resuming,
averaging, snapshots), time and step budgets, and distribution."""

from keras_transformer.training.averaging import average_checkpoints
from keras_transformer.training.best import BestCheckpoints, choose_final
from keras_transformer.training.budget import TrainingBudget
from keras_transformer.training.checkpoints import (
    Checkpoints,
    restore_latest,
    write_snapshot_model,
)
from keras_transformer.training.distributed import (
    build_for_fit,
    fit_distributed,
    is_chief,
    make_strategy,
)
from keras_transformer.training.interrupt import (
    StopOnNonFinite,
    StopOnSignal,
    TrainingDiverged,
    TrainingInterrupted,
)
from keras_transformer.training.optimizers import transformer_optimizer
from keras_transformer.training.precision import set_mixed_precision
from keras_transformer.training.progress import BudgetProgress

__all__ = [
    "BestCheckpoints",
    "BudgetProgress",
    "Checkpoints",
    "StopOnNonFinite",
    "StopOnSignal",
    "TrainingBudget",
    "TrainingDiverged",
    "TrainingInterrupted",
    "average_checkpoints",
    "build_for_fit",
    "choose_final",
    "fit_distributed",
    "is_chief",
    "make_strategy",
    "restore_latest",
    "set_mixed_precision",
    "transformer_optimizer",
    "write_snapshot_model",
]
