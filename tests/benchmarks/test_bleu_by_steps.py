"""benchmarks/bleu_by_steps.py on a tiny run with two step snapshots."""

import json
import shutil
from pathlib import Path

import pytest
from helpers import benchmark_script

from keras_transformer.config import config_from_dict
from keras_transformer.jobs.train import train_from_config

ROOT = Path(__file__).resolve().parents[2]
MULTI30K = ROOT.parent / "shared" / "data" / "multi30k"
SOURCES = ["one cat", "two cats", "three dogs", "a dog", "four birds", "one bird"]
TARGETS = ["eine Katze", "zwei Katzen", "drei Hunde", "ein Hund", "vier Vögel"]
TARGETS.append("ein Vogel")


def _script():
    return benchmark_script("bleu_by_steps")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Four steps of a tiny model, snapshots at steps 2 and 4."""
    folder = tmp_path_factory.mktemp("bleu_by_steps")
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


@pytest.mark.slow
def test_scores_each_step_snapshot_on_the_runs_validation_split(run, tmp_path):
    out = str(tmp_path / "results" / "bleu")
    result = _script().main(["--run", str(run), "--valid", "run", "--out", out])
    assert json.loads(Path(out + ".json").read_text()) == result
    # The finished model is step 4's snapshot: scored once.
    assert [(row["step"], row["model"]) for row in result["snapshots"]] == [
        (2, "snapshots/step_2"),
        (4, "snapshots/step_4"),
    ]
    assert all(0 <= row["bleu"] <= 100 for row in result["snapshots"])
    assert all(row["sentences"] == len(SOURCES) for row in result["snapshots"])
    # The run's search, and its validation perplexity at each epoch's end.
    assert (result["beam_size"], result["alpha"]) == (2, 0.3)
    assert result["valid_perplexity"]
    assert result["valid_perplexity"][-1]["step"] <= 4
    assert Path(out + ".png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_the_finished_model_is_scored_at_its_step(run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    shutil.rmtree(copy / "snapshots" / "step_4")
    script = _script()
    assert [(s, f.name) for s, f in script.step_snapshots(copy)] == [
        (2, "step_2"),
        (4, "run"),
    ]
    result = script.main(
        ["--run", str(copy), "--valid", "run", "--out", str(tmp_path / "b")]
    )
    final = result["snapshots"][-1]
    assert (final["step"], final["model"], final["sentences"]) == (4, ".", 6)
    # Without snapshots, the finished model alone.
    shutil.rmtree(copy / "snapshots")
    assert [(s, f.name) for s, f in script.step_snapshots(copy)] == [(4, "run")]


@pytest.mark.slow
def test_scores_on_multi30k_val_by_default(run, tmp_path):
    if not (MULTI30K / "val.en.gz").exists():
        pytest.skip(
            "Multi30k is not at <repo>/../shared/data/multi30k (val.{en,de}.gz)"
        )
    out = str(tmp_path / "bleu")
    result = _script().main(["--run", str(run), "--limit", "8", "--out", out])
    assert result["validation"] == "multi30k val"
    assert [row["sentences"] for row in result["snapshots"]] == [8, 8]


@pytest.mark.slow
def test_a_missing_multi30k_folder_is_named(run, tmp_path):
    with pytest.raises(SystemExit, match="no Multi30k val split there"):
        _script().main(["--run", str(run), "--data", str(tmp_path / "none")])
