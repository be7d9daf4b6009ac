"""Shared fixtures for the data tests: the local Multi30k copy, tiny tokenizers."""

import itertools
import pathlib

import pytest

from keras_transformer.data import (
    ParallelCorpus,
    Tokenizer,
    builtin_corpus,
    load_multi30k,
)

REPO = pathlib.Path(__file__).resolve().parents[2]
# The real corpus lives next to the repository, never inside it.
MULTI30K_DIR = REPO.parent / "shared" / "data" / "multi30k"


@pytest.fixture(scope="session")
def multi30k_dir() -> pathlib.Path:
    if not (MULTI30K_DIR / "train.en.gz").exists():
        pytest.skip(
            "Multi30k is not at <repo>/../shared/data/multi30k "
            "(files train/val/test_2016_flickr.{en,de}.gz)"
        )
    return MULTI30K_DIR


@pytest.fixture(scope="session")
def multi30k_val(multi30k_dir) -> ParallelCorpus:
    return load_multi30k("val", data_dir=multi30k_dir)


@pytest.fixture(scope="session")
def multi30k_tokenizer(multi30k_dir) -> Tokenizer:
    """Small vocabulary trained on the first 2000 training pairs."""
    train = load_multi30k("train", data_dir=multi30k_dir)
    return Tokenizer.train(itertools.islice(train, 2000), vocab_size=500)


@pytest.fixture(scope="session")
def builtin_tokenizer() -> Tokenizer:
    """Small vocabulary trained on 1500 pairs of the built-in corpus."""
    return Tokenizer.train(builtin_corpus("train", max_pairs=1500), vocab_size=500)
