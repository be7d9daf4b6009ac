"""The train job in process: policy restored, overrides used, files atomic."""

import json

import keras
import pytest

from keras_transformer.config import config_from_dict
from keras_transformer.jobs.run_dir import load_trained
from keras_transformer.jobs.train import train_from_config

SOURCES = ["one cat", "two cats", "three dogs", "a dog", "four birds", "one bird"]
TARGETS = ["eine Katze", "zwei Katzen", "drei Hunde", "ein Hund", "vier Vögel"]
TARGETS.append("ein Vogel")


def _config(tmp_path, **training):
    for suffix, lines in (("en", SOURCES), ("de", TARGETS)):
        (tmp_path / f"train.{suffix}").write_text("\n".join(lines * 4) + "\n")
    return config_from_dict(
        {
            "data": {
                "corpus": "files",
                "train_files": [str(tmp_path / "train.en"), str(tmp_path / "train.de")],
                "max_length": 16,
            },
            "tokenizer": {"vocab_size": 300},
            "model": {
                "preset": "tiny",
                "overrides": {
                    "num_layers": 1,
                    "d_model": 16,
                    "num_heads": 2,
                    "d_ff": 32,
                    "max_length": 24,
                },
            },
            "training": {
                "steps": 2,
                "token_budget": 64,
                "warmup_steps": 10,
                "average_last": 0,
                **training,
            },
            "output_dir": str(tmp_path / "run"),
        }
    )


@pytest.mark.slow
def test_mixed_precision_run_restores_the_policy_and_uses_the_overrides(tmp_path):
    assert keras.config.dtype_policy().name == "float32"
    summary = train_from_config(
        _config(tmp_path, mixed_precision="mixed_bfloat16"), verbose=0
    )
    assert keras.config.dtype_policy().name == "float32"  # as before the run
    assert summary["finished"] and summary["steps"] == 2
    model, _ = load_trained(tmp_path / "run")
    assert model.max_length == 24  # model.overrides.max_length
    assert model.dtype_policy.name == "mixed_bfloat16"
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert saved["resumed_from_step"] == 0
    # Every file was written under a temporary name and renamed.
    assert not [p for p in (tmp_path / "run").rglob("*") if ".tmp" in p.name]
