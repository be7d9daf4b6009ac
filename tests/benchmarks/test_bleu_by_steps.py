"""benchmarks/bleu_by_steps.py on a tiny run with two step snapshots."""

import json
import shutil
from pathlib import Path

import pytest
from helpers import benchmark_script

ROOT = Path(__file__).resolve().parents[2]
MULTI30K = ROOT.parent / "shared" / "data" / "multi30k"


def _script():
    return benchmark_script("bleu_by_steps")


def _valid_sentences(run):
    """The tiny run's validation sentences (`conftest.run` writes them)."""
    return (run.parent / "valid.en").read_text(encoding="utf-8").splitlines()


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
    sentences = len(_valid_sentences(run))
    assert all(row["sentences"] == sentences for row in result["snapshots"])
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
    sentences = len(_valid_sentences(run))
    assert (final["step"], final["model"], final["sentences"]) == (4, ".", sentences)
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


@pytest.mark.slow
def test_dtype_rebuilds_each_model_with_its_weights(run, tmp_path):
    # The tiny run trained in float32: rebuilt in float32 from its config and
    # given its weights, each model translates as the saved one does (a model
    # left with fresh weights would not).
    script = _script()
    common = ["--run", str(run), "--valid", "run"]
    saved = script.main([*common, "--out", str(tmp_path / "saved")])
    rebuilt = script.main(
        [*common, "--dtype", "float32", "--out", str(tmp_path / "rebuilt")]
    )
    assert rebuilt["dtype"] == "float32" and "dtype" not in saved
    assert rebuilt["snapshots"] == saved["snapshots"]
    folder = script.step_snapshots(run)[-1][1]
    sentences = _valid_sentences(run)[:3]
    search = {"beam_size": 2, "alpha": 0.3}
    in_bf16 = script.translator_in_policy(folder, "mixed_bfloat16", **search)
    assert len(in_bf16(sentences)["translations"]) == 3
