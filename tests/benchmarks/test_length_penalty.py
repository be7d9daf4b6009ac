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
            # the run's recipe's beam, and evaluate's scores
            assert result["scores"][name][f"{alpha:g}"] == {"beam_size": 2, **expected}


def test_the_mean_over_runs_picks_the_best_alpha(script, tmp_path, monkeypatch):
    # Scores made up per run and alpha: the tiny model's do not vary.
    bleu = {("a", 1.0): 30.0, ("a", 2.0): 33.0, ("b", 1.0): 32.0, ("b", 2.0): 27.0}

    def made_up(folder, sources, references, search):
        score = bleu[(folder.name, search["alpha"])]
        return {"bleu": score, "chrf": score + 20, "length_ratio": search["alpha"]}

    monkeypatch.setattr(script, "score_snapshot", made_up)
    monkeypatch.setattr(script, "validation_pairs", lambda *_: (["x"], ["y"]))
    monkeypatch.setattr(
        "keras_transformer.jobs.run_dir.search_settings", lambda run: {"beam_size": 4}
    )
    runs = [str(tmp_path / "a"), str(tmp_path / "b")]
    result = script.length_penalty_sweep(runs, [1.0, 2.0], str(tmp_path / "out"))
    assert result["mean_bleu"] == {"1": 31.0, "2": 30.0}
    assert result["best_alpha"] == 1.0
    assert result["scores"]["b"]["2"] == {
        "beam_size": 4,
        "bleu": 27.0,
        "chrf": 47.0,
        "length_ratio": 2.0,
    }
    assert script.table(result).splitlines() == [
        "| alpha | a | b | mean BLEU |",
        "|---|---|---|---|",
        "| 1 | 30.0 (50.0, 1.0) | 32.0 (52.0, 1.0) | **31.0** |",
        "| 2 | 33.0 (53.0, 2.0) | 27.0 (47.0, 2.0) | 30.0 |",
    ]


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
    with pytest.raises(SystemExit):
        script.main(["--run", str(run), "--alphas", "1", "--limit", "0"])
    assert "--limit: 0" in capsys.readouterr().err
    twin = tmp_path / "other" / run.name
    with pytest.raises(SystemExit, match="two runs share a folder name"):
        script.main(["--run", str(run), "--run", str(twin), "--alphas", "1"])
