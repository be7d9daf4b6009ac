"""benchmarks/checkpoint_averages.py on a tiny run that keeps best checkpoints."""

import json
from pathlib import Path

import pytest
from helpers import benchmark_script

from keras_transformer.config import config_from_dict
from keras_transformer.jobs.train import train_from_config

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SOURCES = ["one cat", "two cats", "three dogs", "a dog", "four birds", "one bird"]
TARGETS = ["eine Katze", "zwei Katzen", "drei Hunde", "ein Hund", "vier Vögel"]
TARGETS.append("ein Vogel")


@pytest.mark.slow
def test_scores_best_last_kept_and_all_averages(tmp_path, monkeypatch):
    for split in ("train", "valid"):
        for suffix, lines in (("en", SOURCES), ("de", TARGETS)):
            (tmp_path / f"{split}.{suffix}").write_text("\n".join(lines * 4) + "\n")
    files = {
        f"{split}_files": [str(tmp_path / f"{split}.en"), str(tmp_path / f"{split}.de")]
        for split in ("train", "valid")
    }
    small = {"num_layers": 1, "d_model": 16, "num_heads": 2, "d_ff": 32}
    config = {
        "data": {"corpus": "files", "max_length": 16, **files},
        "tokenizer": {"vocab_size": 300},
        "model": {"overrides": {**small, "max_length": 24}},
        "training": {
            "epochs": 3,
            "token_budget": 64,
            "warmup_steps": 10,
            "average_last": 2,
            "keep_best": 2,
            "checkpoint_steps": 2,
        },
        "evaluation": {"beam_size": 2, "alpha": 0.3},
        "output_dir": str(tmp_path / "run"),
    }
    train_from_config(config_from_dict(config), verbose=0, evaluate=False)
    run = tmp_path / "run"
    # The script imports its sibling `bleu_by_steps`, as when it is run.
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    script = benchmark_script("checkpoint_averages")
    found = script.candidates(run, 2)
    kept = sorted(p.name[:-6] for p in (run / "checkpoints").glob("ckpt-*.index"))
    best = sorted(p.name[:-6] for p in (run / "checkpoints/best").glob("ckpt-*.index"))
    assert len(best) == 2 and len(kept) == 3  # average_last + 1 kept
    assert [Path(p).name for p in found["best"]] == sorted(best, key=_step)
    assert [Path(p).name for p in found["kept"]] == sorted(kept, key=_step)
    assert found["last"] == found["kept"][-2:]
    names = [Path(p).name for p in found["all"]]
    assert names == sorted(set(best) | set(kept), key=_step)  # each once, by step

    out = str(tmp_path / "results" / "averages")
    result = script.main(["--run", str(run), "--valid", "run", "--out", out])
    assert json.loads(Path(out + ".json").read_text()) == result
    assert set(result["averages"]) == {"best", "last", "kept", "all"}
    assert (result["beam_size"], result["alpha"]) == (2, 0.3)
    assert result["sentences"] == len(SOURCES) * 4
    for row in result["averages"].values():
        assert row["valid_perplexity"] > 1 and 0 <= row["bleu"] <= 100
    # The last `average_last` average is what the run itself scored as "last".
    summary = json.loads((run / "summary.json").read_text())
    scored = summary["final_model"]["scores"]["last"]
    assert result["averages"]["last"]["valid_perplexity"] == pytest.approx(
        scored, rel=1e-3
    )


def _step(name):
    return int(name.rsplit("-", 1)[1])
