"""Runs the docstring examples of the data modules."""

import doctest

import pytest

from keras_transformer import data

MODULES = [
    getattr(data, name)
    for name in (
        "batching",
        "builtin",
        "corpus",
        "files",
        "multi30k",
        "prepared",
        "sampling",
        "segmentation",
        "shard_batches",
        "streams",
        "tfds_corpora",
        "tokenizer",
    )
]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_docstring_examples(module):
    result = doctest.testmod(
        module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    )
    assert result.attempted > 0, f"{module.__name__} has no examples"
    assert result.failed == 0
