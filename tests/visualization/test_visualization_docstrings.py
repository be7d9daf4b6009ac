"""Runs every docstring example of keras_transformer.visualization."""

import doctest

import pytest

from keras_transformer.visualization import (
    attention,
    diagrams,
    positional_encoding,
    saving,
    schedule,
)

MODULES = [attention, diagrams, positional_encoding, saving, schedule]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_docstring_examples(module):
    result = doctest.testmod(
        module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    )
    assert result.attempted > 0, f"{module.__name__} has no examples"
    assert result.failed == 0
