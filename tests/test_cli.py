"""The command line: errors users meet, and a whole train-to-export run."""

import gzip
import json
import subprocess
import sys

import pytest
import yaml

from keras_transformer import cli
from keras_transformer.jobs.run_dir import load_trained

SOURCES = ["one cat", "two cats", "three dogs", "a dog", "four birds", "one bird"]
TARGETS = [
    "eine Katze",
    "zwei Katzen",
    "drei Hunde",
    "ein Hund",
    "vier Vögel",
    "ein Vogel",
]


def _write(path, lines, gz=False):
    text = "\n".join(lines) + "\n"
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return str(path)


def test_no_command_prints_help(capsys):
    assert cli.main([]) == 2
    assert "demo" in capsys.readouterr().out


def test_missing_config_is_a_clear_error(tmp_path, capsys):
    assert cli.main(["train", "--config", str(tmp_path / "missing.yaml")]) == 1
    assert "missing.yaml" in capsys.readouterr().err


def test_invalid_config_names_the_key(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"model": {"overrides": {"dropout": -1}}}))
    assert cli.main(["train", "--config", str(path)]) == 1
    assert "model.overrides.dropout" in capsys.readouterr().err


def test_model_dir_errors(tmp_path, capsys):
    assert cli.main(["translate", "--model", str(tmp_path / "none")]) == 1
    assert "Model directory not found" in capsys.readouterr().err
    (tmp_path / "model.keras").write_bytes(b"not a zip file")
    assert cli.main(["export", "--model", str(tmp_path), "--out", "x"]) == 1
    assert "No tokenizer" in capsys.readouterr().err
    (tmp_path / "tokenizer").mkdir()
    assert cli.main(["export", "--model", str(tmp_path), "--out", "x"]) == 1
    assert "corrupt" in capsys.readouterr().err


@pytest.mark.slow
def test_train_evaluate_translate_export(tmp_path):
    src = _write(tmp_path / "train.en.gz", SOURCES * 4, gz=True)
    tgt = _write(tmp_path / "train.de.gz", TARGETS * 4, gz=True)
    out = tmp_path / "run"
    config = {
        "data": {
            "corpus": "files",
            "train_files": [src, tgt],
            "test_files": [src, tgt],
            "max_length": 16,
        },
        "tokenizer": {"vocab_size": 300},
        "model": {
            "preset": "tiny",
            "overrides": {"num_layers": 1, "d_model": 16, "num_heads": 2, "d_ff": 32},
        },
        "training": {
            "steps": 3,
            "warmup_steps": 10,
            "average_last": 2,
            "checkpoint_minutes": 0.001,
            "snapshot_minutes": [0.0001],  # Reached after the first step.
            "token_budget": 64,
        },
        "evaluation": {"beam_size": 2, "batch_tokens": 64},
        "output_dir": str(out),
    }
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(config))
    assert cli.main(["train", "--config", str(path)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 3
    assert 0.0 <= summary["test"]["bleu"] <= 100.0
    assert summary["test"]["sentences"] == len(SOURCES) * 4
    for name in ("model.keras", "tokenizer", "config.yaml", "logs", "checkpoints"):
        assert (out / name).exists(), name
    # A snapshot is a model directory of its own, taken after step 1.
    snapshot = out / "snapshots" / "minute_0.0001"
    assert json.loads((snapshot / "snapshot.json").read_text())["step"] == 1
    model, tokenizer = load_trained(snapshot)
    assert tokenizer.vocab_size == model.vocab_size

    # `train` exported the translator that `translate` loads.
    assert (out / "translator" / "saved_model.pb").exists()
    python = [sys.executable, "-m", "keras_transformer"]
    translated = subprocess.run(
        [*python, "translate", "--model", str(out), "--beam", "1"],
        input="one cat\n\nthree dogs\n",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert translated.returncode == 0, translated.stderr
    assert len(translated.stdout.splitlines()) == 3  # The empty line stays.
    # A file: an over-long line (the model takes 63 tokens) and bytes that
    # are not UTF-8 are translated, each with one warning naming its line.
    lines = [b"one cat", b"", b"two " * 80, b"four \xff birds", b"a dog"]
    (tmp_path / "input.txt").write_bytes(b"\n".join(lines) + b"\n")
    translated = subprocess.run(
        [*python, "translate", "--model", str(out), str(tmp_path / "input.txt")],
        capture_output=True,
        timeout=300,
    )
    assert translated.returncode == 0, translated.stderr
    assert len(translated.stdout.decode().split("\n")) == len(lines) + 1
    assert translated.stdout.decode().split("\n")[1] == ""
    errors = translated.stderr.decode()
    assert errors.count("input.txt, line 3: longer than the model's 63 tokens") == 1
    assert errors.count("input.txt, line 4: bytes that are not UTF-8") == 1
    assert "line 1" not in errors and "line 5" not in errors

    scores = subprocess.run(
        [
            *python,
            "evaluate",
            "--model",
            str(out),
            "--source",
            src,
            "--reference",
            tgt,
            "--beam",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert scores.returncode == 0, scores.stderr
    result = json.loads(scores.stdout)
    assert "tok:13a" in result["bleu_signature"]
    assert result["sentences"] == len(SOURCES) * 4

    exported = tmp_path / "exported"
    assert (
        cli.main(["export", "--model", str(out), "--out", str(exported), "--beam", "1"])
        == 0
    )
    assert (exported / "saved_model.pb").exists()
