"""The training data, streamed and prepared once: `prepare`, then `train`."""

import json
import logging
import os

import pytest
import yaml

from keras_transformer import cli
from keras_transformer.config import config_from_dict
from keras_transformer.data import Tokenizer
from keras_transformer.data import prepared as prepared_module
from keras_transformer.jobs.prepare import stream_tokenizer, train_stream
from keras_transformer.jobs.train import train_from_config

SOURCES = ["one cat", "two cats", "three dogs", "a dog", "four birds", "one bird"]
TARGETS = ["eine Katze", "zwei Katzen", "drei Hunde", "ein Hund", "vier Vögel"]
TARGETS.append("ein Vogel")


def _recipe(tmp_path, output="run", **data):
    for suffix, lines in (("en", SOURCES), ("de", TARGETS)):
        path = tmp_path / f"train.{suffix}"
        if not path.exists():
            path.write_text("\n".join(lines * 4) + "\n")
    return {
        "data": {
            "corpus": "files",
            "train_files": [str(tmp_path / "train.en"), str(tmp_path / "train.de")],
            "max_length": 16,
            **data,
        },
        "tokenizer": {"vocab_size": 300},
        "model": {
            "preset": "tiny",
            "overrides": {"num_layers": 1, "d_model": 16, "num_heads": 2, "d_ff": 32},
        },
        "training": {
            "steps": 2,
            "token_budget": 64,
            "warmup_steps": 10,
            "average_last": 0,
            "keep_best": 0,
        },
        "output_dir": str(tmp_path / output),
    }


def test_prepared_once_and_reused_by_later_runs(tmp_path, monkeypatch, capsys):
    shared = tmp_path / "shared"
    recipe = _recipe(tmp_path, prepared_dir=str(shared), chunk_pairs=4)
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    assert cli.main(["prepare", "--config", str(path)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["kept"] == result["pairs"] == 24
    assert sorted(p.name.split("-")[0] for p in shared.iterdir()) == [
        "tokenizer",
        "train.en_train.de",
    ]

    def never(*args, **kwargs):
        raise AssertionError("prepared again")

    # Runs of the same data, wherever they are written, reuse both.
    monkeypatch.setattr(Tokenizer, "train", never)
    monkeypatch.setattr(prepared_module, "_write", never)
    for output in ("run", "other"):
        config = config_from_dict(_recipe(tmp_path, output, prepared_dir=str(shared)))
        config.data.chunk_pairs = 4
        summary = train_from_config(config, verbose=0, evaluate=False)
        assert summary["finished"] and summary["steps"] == 2
        assert not (tmp_path / output / "prepared").exists()
    assert len(list(shared.iterdir())) == 2
    # New content: a new tokenizer and new shards, never the stale ones.
    monkeypatch.undo()
    (tmp_path / "train.de").write_text("\n".join(reversed(TARGETS * 4)) + "\n")
    assert cli.main(["prepare", "--config", str(path)]) == 0
    assert len(list(shared.iterdir())) == 4


def test_the_default_place_is_the_run_s_own(tmp_path):
    config = config_from_dict(_recipe(tmp_path))
    train_from_config(config, verbose=0, evaluate=False)
    out = tmp_path / "run"
    manifest = json.loads((out / "run.json").read_text())["entries"]
    assert "prepared" in manifest
    assert len(list((out / "prepared").iterdir())) == 2
    # --overwrite keeps it: it is named by what it holds.
    train_from_config(config, verbose=0, evaluate=False, overwrite=True)
    assert len(list((out / "prepared").iterdir())) == 2


def test_the_tokenizer_trains_on_a_sample_and_says_so(tmp_path, caplog):
    config = config_from_dict(_recipe(tmp_path))
    config.tokenizer.sample_sentences = 20
    with caplog.at_level(logging.INFO, logger="keras_transformer"):
        stream_tokenizer(config, train_stream(config), tmp_path / "p")
    assert "on a random sample of 20 of 48 sentences of train.en+train.de" in (
        caplog.text
    )
    assert os.listdir(tmp_path / "p")[0].startswith("tokenizer-")


def test_an_empty_training_corpus_is_a_config_error(tmp_path):
    from keras_transformer.config import ConfigError

    recipe = _recipe(tmp_path)
    for side in ("en", "de"):
        (tmp_path / f"empty.{side}").write_text("\n\n")
    recipe["data"]["train_files"] = [
        str(tmp_path / f"empty.{s}") for s in "en de".split()
    ]
    config = config_from_dict(recipe)
    with pytest.raises(ConfigError, match="data.train_files: .* hold no sentence"):
        train_from_config(config, verbose=0)
    assert not (tmp_path / "run").exists()


def test_a_recipe_with_subword_sampling_trains_on_its_views(tmp_path):
    recipe = _recipe(tmp_path)
    recipe["tokenizer"].update(sampling_alpha=0.1, sampling_views=3)
    recipe["training"]["seed"] = 5
    summary = train_from_config(config_from_dict(recipe), verbose=0, evaluate=False)
    assert summary["finished"] and summary["steps"] == 2
    (shards,) = (tmp_path / "run" / "prepared").glob("train.en_train.de-*")
    meta = json.loads((shards / "prepared.json").read_text())
    assert meta["views"] == 3
    # Drawn from the run's seed: another seed draws other segmentations.
    assert meta["identity"]["sampling"] == {"alpha": 0.1, "views": 3, "seed": 5}
    assert sorted(p.name for p in shards.glob("v*")) == ["v000", "v001", "v002"]
