"""Recipes: every shipped config loads; bad keys and values are named."""

import inspect
import os
from pathlib import Path

import pytest

from keras_transformer.config import (
    WEIGHT_NAMES,
    Config,
    ConfigError,
    ModelOverrides,
    check_paths,
    config_from_dict,
    load_config,
    reference_markdown,
)
from keras_transformer.models import Transformer

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
        ({"trainig": {}}, "unknown key trainig; did you mean training?"),
        (
            {"training": {"stepz": 3}},
            r"unknown key training.stepz; did you mean training.steps\?",
        ),
        (
            {"model": {"overrides": {"colour": "red"}}},
            "unknown key model.overrides.colour; known keys: num_layers",
        ),
        (
            {"model": {"overrides": {"dropout": -0.1}}},
            r"model.overrides.dropout: -0.1 \(",
        ),
        (
            {"model": {"overrides": {"num_heads": 3}}},
            r"model.overrides.num_heads: 3 \(must divide d_model=128\)",
        ),
        ({"model": {"overrides": {"num_layers": 0}}}, "model.overrides.num_layers: 0"),
        (
            {"model": {"overrides": {"max_length": 48}}},
            r"model.overrides.max_length: 48 \(must be at least data.max_length=64\)",
        ),
        ({"model": {"preset": "huge"}}, "model.preset: 'huge'"),
        ({"training": {"strategy": "tpu"}}, "training.strategy: 'tpu'"),
        ({"training": {"minutes": -5}}, "training.minutes: -5"),
        ({"training": {"label_smoothing": 1.5}}, "training.label_smoothing: 1.5"),
        ({"training": {"mixed_precision": "fp8"}}, "training.mixed_precision: 'fp8'"),
        ({"data": {"corpus": "wikipedia"}}, "data.corpus: 'wikipedia'"),
        ({"data": {"corpus": "files"}}, "data.train_files: None"),
        ({"data": {"train_files": ["only_one"]}}, r"data.train_files: \['only_one'\]"),
        ({"evaluation": {"beam_size": 0}}, "evaluation.beam_size: 0"),
        ({"training": {"snapshot_minutes": 10}}, "training.snapshot_minutes: 10"),
        (
            {"training": {"snapshot_minutes": [10, -1]}},
            r"training.snapshot_minutes: \[10, -1\] \(expected a list of numbers > 0\)",
        ),
        (
            {"training": {"snapshot_steps": [4000, 0]}},
            r"training.snapshot_steps: \[4000, 0\] \(expected a list of integers > 0\)",
        ),
        ({"training": {"snapshot_steps": 4000}}, "training.snapshot_steps: 4000"),
        (
            {"training": {"snapshot_steps": [True]}},
            r"training.snapshot_steps.0: True \(Input should be a valid integer",
        ),
        (
            {"training": {"snapshot_steps": [2000.0]}},
            r"training.snapshot_steps.0: 2000.0 \(Input should be a valid integer",
        ),
        ({"training": {"token_budget": 10}}, "training.token_budget: 10"),
        (
            {"training": {"weight_decay": -0.01}},
            r"training.weight_decay: -0.01 \(Input should be greater than or equal",
        ),
        (
            {"training": {"weight_decay": 0.1, "weight_decay_exclude": ["bias", ""]}},
            r"training.weight_decay_exclude: \['bias', ''\] \(expected non-empty names",
        ),
        (
            {"training": {"weight_decay": 0.1, "weight_decay_exclude": ["norm"]}},
            r"training.weight_decay_exclude: \['norm'\] \('norm' is in no weight's "
            r"name; the model's weights are named kernel, bias, gamma, beta, "
            r"embeddings, position_embeddings\)",
        ),
        (
            {"training": {"weight_decay_exclude": ["bias"]}},
            r"training.weight_decay_exclude: \['bias'\] \(has no effect with "
            r"training.weight_decay 0\)",
        ),
        (
            {"training": {"cooldown_steps": 500}},
            r"training.cooldown_steps: 500 \(needs training.steps, the step where "
            r"the rate reaches zero\)",
        ),
        (
            {"training": {"cooldown_steps": 500, "steps": 500}},
            r"training.cooldown_steps: 500 \(must be less than training.steps \(500\)",
        ),
        (
            {"training": {"cooldown_steps": -1, "steps": 500}},
            r"training.cooldown_steps: -1 \(Input should be greater than or equal to 0",
        ),
        (
            {"training": {"bidirectional_epochs": -1}},
            r"training.bidirectional_epochs: -1 \(Input should be greater than",
        ),
        (
            {"training": {"rdrop_alpha": -1}},
            r"training.rdrop_alpha: -1 \(Input should be greater than or equal to 0",
        ),
        (
            {"training": {"rdrop_alpha": 5, "strategy": "multi_worker", "steps": 9}},
            r"training.rdrop_alpha: 5.0 \(is not available with strategy multi_worker",
        ),
        (
            {"training": {"strategy": "multi_worker"}},
            "training.steps: None .required with strategy multi_worker",
        ),
        ({"output_dir": 5}, "output_dir: 5"),
        ([1, 2], "expected a mapping of sections"),
        # Exact types: no string for a number, float for an integer, string
        # for a boolean.
        (
            {"evaluation": {"alpha": "0.6"}},
            r"evaluation.alpha: '0.6' \(Input should be a valid number",
        ),
        (
            {"training": {"steps": 2.5}},
            r"training.steps: 2.5 \(Input should be a valid integer",
        ),
        (
            {"training": {"jit_compile": "yes"}},
            r"training.jit_compile: 'yes' \(Input should be a valid boolean",
        ),
        ({"training": {"validate": "no"}}, "training.validate: 'no'"),
        ({"data": {"max_length": True}}, "data.max_length: True"),
        # Numbers are finite.
        (
            {"training": {"lr_scale": float("inf")}},
            r"training.lr_scale: inf \(Input should be a finite number",
        ),
        ({"training": {"lr_scale": float("nan")}}, "training.lr_scale: nan"),
        ({"training": {"minutes": float("inf")}}, "training.minutes: inf"),
        ({"evaluation": {"alpha": float("inf")}}, "evaluation.alpha: inf"),
        ({"training": {"checkpoint_minutes": float("nan")}}, "checkpoint_minutes: nan"),
        ({"training": {"checkpoint_steps": 0}}, "checkpoint_steps: 0"),
        (
            {"training": {"snapshot_minutes": [30, float("inf")]}},
            "training.snapshot_minutes.1: inf",
        ),
        (
            {"model": {"overrides": {"dropout": float("nan")}}},
            "model.overrides.dropout: nan",
        ),
        # The renamed key points to its new name, not to the closest spelling.
        (
            {"evaluation": {"batch_size": 64}},
            r"evaluation.batch_size is now evaluation.batch_tokens \(source tokens",
        ),
        # The streamed corpus's keys.
        (
            {"tokenizer": {"sample_sentences": 0}},
            r"tokenizer.sample_sentences: 0 \(Input should be greater than or equal",
        ),
        ({"data": {"shuffle_buffer": -1}}, r"data.shuffle_buffer: -1 \("),
        (
            {"tokenizer": {"sampling_alpha": 1.5}},
            r"tokenizer.sampling_alpha: 1.5 \(Input should be less than or equal to 1",
        ),
        ({"tokenizer": {"sampling_views": 0}}, r"tokenizer.sampling_views: 0 \("),
        ({"data": {"chunk_pairs": 0}}, r"data.chunk_pairs: 0 \("),
        ({"data": {"prepared_dir": 3}}, r"data.prepared_dir: 3 \("),
        (
            {"data": {"shuffle_bufer": 3}},
            r"unknown key data.shuffle_bufer; did you mean data.shuffle_buffer\?",
        ),
        # SentencePiece needs 4 reserved ids and 256 bytes, at least.
        (
            {"tokenizer": {"vocab_size": 10}},
            r"tokenizer.vocab_size: 10 \(expected >= 261: 4 reserved ids, 256 bytes",
        ),
    ],
)
def test_invalid_recipes_name_the_key_and_value(raw, message):
    with pytest.raises(ConfigError, match=message) as error:
        config_from_dict(raw, source="recipe.yaml")
    assert str(error.value).startswith("recipe.yaml: ")
    assert "\n" not in str(error.value)  # one line


def test_overrides_replace_the_preset_and_max_length_works():
    config = config_from_dict(
        {
            "data": {"max_length": 48},
            "model": {"preset": "small", "overrides": {"max_length": 48, "d_ff": 64}},
        }
    )
    arguments = config.model.arguments(vocab_size=100, data_max_length=48)
    assert arguments["max_length"] == 48 and arguments["d_ff"] == 64
    assert arguments["num_layers"] == 3  # the preset's
    assert Transformer(**arguments).max_length == 48


@pytest.mark.parametrize(
    "key, invalid", [("activation_dropout", 1), ("word_dropout", -0.1)]
)
def test_dropout_override_reaches_the_model(key, invalid):
    config = config_from_dict({"model": {"preset": "tiny", "overrides": {key: 0.1}}})
    model = Transformer(**config.model.arguments(vocab_size=100, data_max_length=32))
    assert getattr(model, key) == 0.1
    with pytest.raises(ConfigError, match=f"model.overrides.{key}: {invalid}"):
        config_from_dict({"model": {"overrides": {key: invalid}}})


def test_projection_dtype_override_reaches_the_model():
    config = config_from_dict(
        {"model": {"preset": "tiny", "overrides": {"projection_dtype": "float32"}}}
    )
    model = Transformer(**config.model.arguments(vocab_size=100, data_max_length=32))
    assert model.projection_dtype == model.embedding.reverse_dtype == "float32"
    assert Transformer(vocab_size=100).embedding.reverse_dtype == "float32"
    with pytest.raises(ConfigError, match="model.overrides.projection_dtype: 'int8'"):
        config_from_dict({"model": {"overrides": {"projection_dtype": "int8"}}})


@pytest.mark.parametrize("learned_positions", [False, True])
def test_weight_names_are_the_names_of_the_model_weights(learned_positions):
    # training.weight_decay_exclude is checked against these before training.
    overrides = {"learned_positions": learned_positions, "norm_first": True}
    config = config_from_dict({"model": {"preset": "tiny", "overrides": overrides}})
    model = Transformer(**config.model.arguments(vocab_size=50, data_max_length=8))
    model.build()
    sinusoids = set() if learned_positions else {"position_embeddings"}
    assert {weight.name for weight in model.weights} == set(WEIGHT_NAMES) - sinusoids


def test_dotted_overrides_reach_any_depth_and_keep_their_siblings():
    raw = {"model": {"preset": "small", "overrides": {"dropout": 0.2}}}
    config = config_from_dict(
        raw, overrides={"model.overrides.key_dim": 16, "training.steps": 5}
    )
    assert config.model.overrides.key_dim == 16
    assert config.model.overrides.dropout == 0.2
    assert config.training.steps == 5
    assert raw == {"model": {"preset": "small", "overrides": {"dropout": 0.2}}}
    with pytest.raises(ConfigError, match="model.overrides.key_dims"):
        config_from_dict(raw, overrides={"model.overrides.key_dims": 16})


def test_model_overrides_cover_the_model_arguments():
    # The schema's overrides are the Transformer's arguments, so neither can
    # grow without the other.
    parameters = set(inspect.signature(Transformer).parameters) - {
        "vocab_size",
        "kwargs",
    }
    assert set(ModelOverrides.model_fields) == parameters


def test_command_line_overrides_are_checked(tmp_path):
    path = tmp_path / "recipe.yaml"
    path.write_text("training: {steps: 5}\n")
    assert load_config(path, {"training.steps": 7}).training.steps == 7
    with pytest.raises(ConfigError, match="training.minutes: 0"):
        load_config(path, {"training.minutes": 0})


@pytest.mark.parametrize(
    "text, message",
    [
        ("training:\n  steps: 3\n  steps: 5\n", "line 3: duplicate key training.steps"),
        ("data: {seed: 1}\ndata: {seed: 2}\n", "line 2: duplicate key data "),
        (
            "model:\n  overrides: {d_ff: 8, d_ff: 16}\n",
            "line 2: duplicate key model.overrides.d_ff",
        ),
    ],
)
def test_a_key_given_twice_is_named_with_its_file_and_line(tmp_path, text, message):
    path = tmp_path / "twice.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=f"twice.yaml, {message}") as error:
        load_config(path)
    assert "\n" not in str(error.value)


def test_invalid_yaml_names_the_file_and_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("training:\n  steps: [\n")
    with pytest.raises(ConfigError, match=r"broken.yaml, line 3: "):
        load_config(path)


def test_paths_named_by_the_recipe_must_exist(tmp_path):
    config = config_from_dict(
        {"data": {"corpus": "multi30k", "data_dir": str(tmp_path / "mistyped")}}
    )
    with pytest.raises(ConfigError, match="data.data_dir: no such directory"):
        check_paths(config)
    assert not (tmp_path / "mistyped").exists()  # not created
    config = config_from_dict(
        {"data": {"corpus": "files", "train_files": ["a.en", "a.de"]}}
    )
    with pytest.raises(ConfigError, match="data.train_files: no such file: 'a.en'"):
        check_paths(config)


def test_a_prepared_dir_that_cannot_be_one_is_refused_first(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("")
    for path, message in (
        (a_file / "prepared", "is not a directory"),
        (a_file, "is not a directory"),
    ):
        config = config_from_dict({"data": {"prepared_dir": str(path)}})
        with pytest.raises(ConfigError, match=f"data.prepared_dir: .* {message}"):
            check_paths(config)
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        config = config_from_dict({"data": {"prepared_dir": str(locked / "new")}})
        if os.access(locked, os.W_OK):  # root writes anyway
            check_paths(config)
        else:
            with pytest.raises(ConfigError, match="cannot be made"):
                check_paths(config)
        # An existing read-only one can hold what others prepared.
        check_paths(config_from_dict({"data": {"prepared_dir": str(locked)}}))
    finally:
        locked.chmod(0o755)


def test_the_recipe_reference_in_the_docs_is_current():
    page = Path(__file__).parent.parent / "docs" / "config.md"
    assert page.read_text(encoding="utf-8") == reference_markdown(), (
        "docs/config.md is out of date: "
        "python -m keras_transformer.config > docs/config.md"
    )


def test_the_reference_shows_choices_as_written():
    # Type names become YAML names ("float" -> "number"), choices do not.
    page = reference_markdown()
    assert "one of [float32, mixed_float16, mixed_bfloat16, auto]" in page
    assert "| `training.snapshot_minutes` | list of numbers |" in page
    assert "| `training.snapshot_steps` | list of integers | `[]` |" in page


def test_to_dict_round_trips():
    config = config_from_dict(
        {"model": {"overrides": {"num_layers": 1}}, "training": {"validate": False}}
    )
    assert config_from_dict(config.to_dict()) == config
    assert config.to_dict()["training"]["validate"] is False


def test_missing_config_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.yaml"):
        load_config(tmp_path / "nope.yaml")
