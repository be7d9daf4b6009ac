"""Runs the docstring examples of the training-recipe modules."""

import doctest

import keras
import pytest

from keras_transformer import losses, metrics
from keras_transformer.schedules import linear_cooldown, transformer_schedule
from keras_transformer.training import (
    averaging,
    best,
    budget,
    checkpoints,
    interrupt,
    optimizers,
    precision,
    progress,
)

MODULES = [
    transformer_schedule,
    linear_cooldown,
    losses,
    metrics,
    optimizers,
    precision,
    averaging,
    checkpoints,
    interrupt,
    budget,
    progress,
    best,
]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_docstring_examples(module):
    try:
        result = doctest.testmod(
            module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
        )
    finally:
        keras.mixed_precision.set_dtype_policy("float32")
    assert result.attempted > 0, f"{module.__name__} has no examples"
    assert result.failed == 0
