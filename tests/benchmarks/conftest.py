"""A tiny finished run the benchmark scripts' tests score."""

import pytest

from keras_transformer.config import config_from_dict
from keras_transformer.jobs.train import train_from_config

SOURCES = ["one cat", "two cats", "three dogs", "a dog", "four birds", "one bird"]
TARGETS = ["eine Katze", "zwei Katzen", "drei Hunde", "ein Hund", "vier Vögel"]
TARGETS.append("ein Vogel")


@pytest.fixture(scope="session")
def run(tmp_path_factory):
    """Four steps of a tiny model, snapshots at steps 2 and 4.

    Shared by the whole session: a test that changes it works on a copy.
    """
    folder = tmp_path_factory.mktemp("tiny_run")
    for split, repeat in (("train", 4), ("valid", 1)):
        for suffix, lines in (("en", SOURCES), ("de", TARGETS)):
            path = folder / f"{split}.{suffix}"
            path.write_text("\n".join(lines * repeat) + "\n", encoding="utf-8")
    files = {
        f"{split}_files": [str(folder / f"{split}.en"), str(folder / f"{split}.de")]
        for split in ("train", "valid")
    }
    config = config_from_dict(
        {
            "data": {"corpus": "files", "max_length": 16, **files},
            "tokenizer": {"vocab_size": 300},
            "model": {
                "overrides": {
                    "num_layers": 1,
                    "d_model": 16,
                    "num_heads": 2,
                    "d_ff": 32,
                    "max_length": 24,
                }
            },
            "training": {
                "steps": 4,
                "token_budget": 64,
                "warmup_steps": 10,
                "average_last": 1,
                "keep_best": 0,
                "snapshot_steps": [2, 4],
            },
            "evaluation": {"beam_size": 2, "alpha": 0.3},
            "output_dir": str(folder / "run"),
        }
    )
    train_from_config(config, verbose=0, evaluate=False)
    return folder / "run"
