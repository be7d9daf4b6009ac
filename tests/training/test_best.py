"""BestCheckpoints keeps the lowest-scored; choose_final picks on validation."""

import json
import os

import keras
import numpy as np
import pytest

from keras_transformer.training.best import (
    SCORES_FILE,
    BestCheckpoints,
    choose_final,
    read_scores,
)
from keras_transformer.training.checkpoints import training_checkpoint


def _model():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    return model


def _epochs(best, model, scores):
    """Ends one epoch per score, a step apart, as `fit` would call it."""
    best.set_model(model)
    for epoch, score in enumerate(scores):
        model.optimizer.iterations.assign(epoch + 1)
        model.layers[0].bias.assign([float(epoch + 1)])
        best.on_epoch_end(epoch, {"val_perplexity": score})


def test_keeps_the_lowest_and_deletes_the_rest(tmp_path):
    model, best = _model(), BestCheckpoints(tmp_path, keep=2)
    _epochs(best, model, [9.0, 7.0, 8.0, float("nan"), 6.0, 10.0])
    assert [os.path.basename(p) for p in best.best()] == ["ckpt-5", "ckpt-2"]
    assert json.loads((tmp_path / SCORES_FILE).read_text()) == {
        "ckpt-2": 7.0,
        "ckpt-5": 6.0,
    }
    # The files of the others are gone; the kept ones hold their weights.
    indexes = sorted(p.name for p in tmp_path.glob("*.index"))
    assert indexes == ["ckpt-2.index", "ckpt-5.index"]
    twin = _model()
    training_checkpoint(twin).read(best.best(1)[0]).expect_partial()
    assert twin.layers[0].bias.numpy().tolist() == [5.0]


def test_a_resumed_run_goes_on_from_the_kept_scores(tmp_path):
    model = _model()
    _epochs(BestCheckpoints(tmp_path, keep=2), model, [9.0, 7.0])
    (tmp_path / "ckpt-1.index").unlink()  # a file lost: the name is dropped
    assert read_scores(tmp_path) == {"ckpt-2": 7.0}
    resumed = BestCheckpoints(tmp_path, keep=2)
    assert resumed.scores == {"ckpt-2": 7.0}


def test_without_scores_or_on_other_workers_nothing_is_written(tmp_path):
    model = _model()
    _epochs(BestCheckpoints(tmp_path / "a", keep=2, write=False), model, [1.0])
    best = BestCheckpoints(tmp_path / "b", keep=2)
    best.set_model(model)
    best.on_epoch_end(0, {"loss": 1.0})  # no validation logs
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    with pytest.raises(ValueError, match="keep"):
        BestCheckpoints(tmp_path, keep=0)


def test_choose_final_sets_the_model_to_the_lowest_scored_candidate(tmp_path):
    model = _model()
    prefixes = []
    for value in (1.0, 2.0, 6.0):
        model.set_weights([np.full((2, 1), value), np.full((1,), value)])
        prefixes.append(training_checkpoint(model).write(str(tmp_path / f"c{value}")))

    # The score: how far the kernel is from 3.
    def score():
        return abs(float(model.get_weights()[0][0, 0]) - 3.0)

    final = choose_final(
        model,
        {"last": prefixes[2:], "average": prefixes, "first": prefixes[:1], "no": []},
        score,
    )
    assert final["choice"] == "average"  # (1 + 2 + 6) / 3 = 3
    assert final["scores"] == {"last": 3.0, "average": 0.0, "first": 2.0}
    assert final["checkpoints"] == ["c1.0", "c2.0", "c6.0"]
    np.testing.assert_allclose(model.get_weights()[0], 3.0)
    with pytest.raises(ValueError, match="no candidate"):
        choose_final(model, {"none": []}, score)


def test_a_resumed_run_forgets_the_best_of_its_lost_training(tmp_path):
    model = _model()
    _epochs(BestCheckpoints(tmp_path, keep=3), model, [9.0, 7.0, 8.0])
    # The state it resumes from is step 1's: steps 2 and 3 are trained again.
    resumed = BestCheckpoints(tmp_path, keep=3)
    resumed.forget_after(1)
    assert resumed.scores == {"ckpt-1": 9.0} == read_scores(tmp_path)
    assert sorted(p.name for p in tmp_path.glob("*.index")) == ["ckpt-1.index"]


def test_non_finite_weights_are_not_kept(tmp_path):
    model, best = _model(), BestCheckpoints(tmp_path, keep=2)
    best.set_model(model)
    model.layers[0].bias.assign([float("nan")])
    best.on_epoch_end(0, {"val_perplexity": 1.0})
    assert best.scores == {} and not any(tmp_path.iterdir())


def test_a_damaged_candidate_is_passed_over(tmp_path):
    model = _model()
    good = training_checkpoint(model).write(str(tmp_path / "good"))
    bad = training_checkpoint(model).write(str(tmp_path / "bad"))
    data = tmp_path / "bad.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:10])
    final = choose_final(model, {"damaged": [bad], "good": [good]}, lambda: 1.0)
    assert final["choice"] == "good" and final["scores"] == {"good": 1.0}
