"""benchmarks/length_penalty.py on a tiny run and one of its snapshots."""

import json
from pathlib import Path

import pytest
from helpers import benchmark_script

from keras_transformer.jobs.evaluate import evaluate_files

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def script(monkeypatch):
    # The script imports its sibling `bleu_by_steps`, as when it is run.
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return benchmark_script("length_penalty")


@pytest.mark.slow
def test_scores_each_model_at_each_alpha_as_evaluate_does(script, run, tmp_path):
    step_2 = run / "snapshots" / "step_2"
    out = str(tmp_path / "results" / "alpha")
    argv = ["--run", str(run), "--run", str(step_2), "--valid", "run"]
    result = script.main(argv + ["--alphas", "0", "0.3", "4", "--out", out])
    assert json.loads(Path(out + ".json").read_text()) == result
    assert result["runs"] == ["run", "step_2"]
    assert list(result["mean_bleu"]) == ["0", "0.3", "4"]
    valid = [str(run.parent / f"valid.{lang}") for lang in ("en", "de")]
    for name, folder in (("run", run), ("step_2", step_2)):
        for alpha in (0.0, 4.0):
            expected = evaluate_files(folder, *valid, beam_size=2, alpha=alpha)
            got = result["scores"][name][f"{alpha:g}"]
            assert got["beam_size"] == 2  # the run's recipe's
            assert (got["bleu"], got["chrf"]) == (expected["bleu"], expected["chrf"])
    for alpha, mean in result["mean_bleu"].items():
        both = [result["scores"][name][alpha]["bleu"] for name in result["runs"]]
        assert mean == pytest.approx(sum(both) / 2, abs=1e-3)
    best = max(result["mean_bleu"].values())
    assert result["mean_bleu"][f"{result['best_alpha']:g}"] == best
    rows = script.table(result).splitlines()
    assert rows[0] == "| alpha | run | step_2 | mean BLEU |"
    assert sum("**" in row for row in rows) == 1


@pytest.mark.slow
def test_each_alpha_and_the_beam_reach_the_search(script, run, tmp_path, monkeypatch):
    # The tiny model's translations do not change with alpha (they all run
    # to the length limit), so the search each score was made with is read
    # at the call.
    searches = []
    score = script.score_snapshot

    def recording(folder, sources, references, search):
        searches.append((folder.name, dict(search)))
        return score(folder, sources, references, search)

    monkeypatch.setattr(script, "score_snapshot", recording)
    out = str(tmp_path / "alpha")
    argv = ["--run", str(run), "--valid", "run", "--beam", "1"]
    result = script.main(argv + ["--alphas", "0.6", "1.5", "--out", out])
    assert searches == [
        ("run", {"beam_size": 1, "alpha": 0.6}),
        ("run", {"beam_size": 1, "alpha": 1.5}),
    ]
    valid = [str(run.parent / f"valid.{lang}") for lang in ("en", "de")]
    expected = evaluate_files(run, *valid, beam_size=1, alpha=0.6)
    got = result["scores"]["run"]["0.6"]
    assert (got["beam_size"], got["bleu"]) == (1, expected["bleu"])


def test_bad_arguments_are_named(script, tmp_path, capsys):
    run = tmp_path / "run"
    with pytest.raises(SystemExit):
        script.main(["--run", str(run), "--alphas", "-1"])
    assert "--alphas: [-1.0] holds a negative value" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        script.main(["--run", str(run), "--alphas", "1", "--beam", "0"])
    assert "--beam: 0" in capsys.readouterr().err
    twin = tmp_path / "other" / run.name
    with pytest.raises(SystemExit, match="two runs share a folder name"):
        script.main(["--run", str(run), "--run", str(twin), "--alphas", "1"])
