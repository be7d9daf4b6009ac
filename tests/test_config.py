"""Recipes: every shipped config loads; bad keys and values are named."""

from pathlib import Path

import pytest

from keras_transformer.config import Config, config_from_dict, load_config

CONFIGS = sorted((Path(__file__).parent.parent / "configs").glob("*.yaml"))


def test_configs_exist():
    names = {path.name for path in CONFIGS}
    assert {
        "multi30k_en_de.yaml",
        "wmt14_en_de_base.yaml",
        "wmt14_en_de_big.yaml",
        "ted_pt_en.yaml",
    } <= names


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_shipped_configs_are_valid(path):
    config = load_config(path)
    assert isinstance(config, Config)
    assert config.output_dir.startswith("runs/")


def test_paper_recipes_match_the_paper():
    base = load_config(CONFIGS[0].parent / "wmt14_en_de_base.yaml")
    big = load_config(CONFIGS[0].parent / "wmt14_en_de_big.yaml")
    assert (base.model.preset, base.training.steps, base.training.average_last) == (
        "base",
        100_000,
        5,
    )
    assert (big.model.preset, big.training.steps, big.training.average_last) == (
        "big",
        300_000,
        20,
    )
    for config in (base, big):
        assert config.training.warmup_steps == 4000
        assert config.training.token_budget == 25000
        assert (config.evaluation.beam_size, config.evaluation.alpha) == (4, 0.6)
        assert config.training.strategy == "mirrored"


def test_empty_recipe_gets_documented_defaults():
    config = config_from_dict({})
    assert config.data.corpus == "builtin"
    assert config.model.preset == "tiny"
    assert config.training.label_smoothing == 0.1
    assert config.evaluation.beam_size == 4


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"trainig": {}}, "unknown key `trainig`"),
        ({"training": {"stepz": 3}}, "unknown key `training.stepz`"),
        (
            {"model": {"overrides": {"dropout": -0.1}}},
            r"`model.overrides.dropout`: -0.1",
        ),
        (
            {"model": {"overrides": {"num_heads": 3}}},
            r"`model.overrides.num_heads`: 3 \(must divide d_model=128\)",
        ),
        ({"model": {"overrides": {"colour": "red"}}}, "model.overrides.colour"),
        ({"model": {"preset": "huge"}}, "`model.preset`: 'huge'"),
        ({"training": {"strategy": "tpu"}}, "`training.strategy`: 'tpu'"),
        ({"training": {"minutes": -5}}, "`training.minutes`: -5"),
        ({"training": {"label_smoothing": 1.5}}, "`training.label_smoothing`: 1.5"),
        ({"training": {"mixed_precision": "fp8"}}, "`training.mixed_precision`"),
        ({"data": {"corpus": "wikipedia"}}, "`data.corpus`: 'wikipedia'"),
        ({"data": {"corpus": "files"}}, "`data.train_files`"),
        ({"data": {"train_files": ["only_one"]}}, "`data.train_files`"),
        ({"evaluation": {"beam_size": 0}}, "`evaluation.beam_size`: 0"),
        ({"training": {"validate": "no"}}, "`training.validate`: 'no'"),
        ({"training": {"snapshot_minutes": 10}}, "`training.snapshot_minutes`: 10"),
        (
            {"training": {"snapshot_minutes": [10, -1]}},
            r"`training.snapshot_minutes`: \[10, -1\]",
        ),
    ],
)
def test_invalid_recipes_name_the_key(raw, message):
    with pytest.raises(ValueError, match=message):
        config_from_dict(raw)


def test_missing_config_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.yaml"):
        load_config(tmp_path / "nope.yaml")
