"""benchmarks/choose_by_bleu.py: the choice among step models, held out."""

import json
from pathlib import Path

import numpy as np
import pytest
import sacrebleu
from helpers import benchmark_script

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
REFERENCES = [f"ein Hund läuft über die Wiese Nummer {i} ." for i in range(40)]
WRONG = [f"eine Katze schläft Nummer {i} ." for i in range(40)]


@pytest.fixture(autouse=True)
def _beside_its_siblings(monkeypatch):
    # The script imports bleu_by_steps from its own folder, as it runs.
    monkeypatch.syspath_prepend(str(BENCHMARKS))


def _script():
    return benchmark_script("choose_by_bleu")


def test_a_better_model_is_chosen_on_every_halving_and_gains_on_the_other():
    # Step 1 translates every sentence right, the final step 2 none.
    result = _script().held_out_gains({1: REFERENCES, 2: WRONG}, REFERENCES, 5)
    assert result["chosen"] == {"1": 5, "2": 0}
    unseen = REFERENCES[:20]
    bleu = 100 - sacrebleu.corpus_bleu(WRONG[:20], [unseen]).score
    assert result["bleu_gain"] > 50 and result["bleu_gain_std"] < 5
    assert result["bleu_gain"] == pytest.approx(bleu, abs=5)
    assert result["chrf_gain"] > 30


def test_equal_models_leave_the_final_one_and_gain_nothing():
    result = _script().held_out_gains({1: WRONG, 2: list(WRONG)}, REFERENCES, 4)
    assert result["chosen"] == {"1": 0, "2": 4}
    assert (result["bleu_gain"], result["chrf_gain"]) == (0, 0)


def test_gains_are_the_halvings_mean_against_a_numpy_halving():
    # Each model right on half the sentences: which half a halving sees
    # decides the choice; recomputed here with the same random halvings.
    pairs = list(enumerate(zip(REFERENCES, WRONG, strict=True)))
    odd = [r if i % 2 else w for i, (r, w) in pairs]
    low = [r if i < 20 else w for i, (r, w) in pairs]
    hypotheses = {10: odd, 20: low}
    result = _script().held_out_gains(hypotheses, REFERENCES, splits=6, seed=3)
    rng, gains = np.random.default_rng(3), []
    for _ in range(6):
        order = rng.permutation(40)
        seen, unseen = order[:20], order[20:]

        def bleu(lines, rows):
            return sacrebleu.corpus_bleu(
                [lines[i] for i in rows], [[REFERENCES[i] for i in rows]]
            ).score

        step = max((bleu(hypotheses[s], seen), s) for s in (10, 20))[1]
        gains.append(bleu(hypotheses[step], unseen) - bleu(low, unseen))
    assert result["bleu_gain"] == pytest.approx(np.mean(gains), abs=1e-3)
    assert sum(result["chosen"].values()) == 6


@pytest.mark.slow
def test_scores_the_tiny_runs_step_models(run, tmp_path):
    out = str(tmp_path / "choose")
    result = _script().main(
        ["--run", str(run), "--valid", "run", "--splits", "3", "--out", out]
    )
    assert json.loads(Path(out + ".json").read_text()) == result
    assert [(row["step"], row["model"]) for row in result["candidates"]] == [
        (2, "snapshots/step_2"),
        (4, "snapshots/step_4"),
    ]
    assert result["chosen"] in (2, 4)
    assert sum(result["held_out"]["chosen"].values()) == 3
    assert (result["beam_size"], result["alpha"]) == (2, 0.3)


@pytest.mark.slow
def test_bad_steps_are_named(run, tmp_path):
    out = ["--valid", "run", "--out", str(tmp_path / "c")]
    with pytest.raises(SystemExit, match=r"--steps 3: no model of that step"):
        _script().main(["--run", str(run), "--steps", "3", "4", *out])
    with pytest.raises(SystemExit, match=r"leaves out the run's final model, step 4"):
        _script().main(["--run", str(run), "--steps", "2", *out])
