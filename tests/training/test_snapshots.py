import json
import os

import keras
import numpy as np
import pytest

from keras_transformer.training import Snapshots


def _model():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    return model


def test_saves_each_minute_once_with_its_step(tmp_path):
    model = _model()
    # 0 minutes has passed after the first batch; 60 never does here.
    snapshots = Snapshots(tmp_path, minutes=[60, 0])
    x, y = np.ones((8, 2)), np.ones((8, 1))
    model.fit(x, y, batch_size=2, epochs=2, verbose=0, callbacks=[snapshots])
    assert sorted(os.listdir(tmp_path)) == ["minute_0"]
    assert snapshots.saved == {0: 1}  # Saved after the first step, not again.
    folder = tmp_path / "minute_0"
    info = json.loads((folder / "snapshot.json").read_text())
    assert info == {"minutes": 0, "step": 1}
    # The file holds the weights after step 1, not the final ones.
    saved = keras.models.load_model(folder / "model.keras")
    assert not np.allclose(saved.get_weights()[0], model.get_weights()[0])


def test_folder_names():
    assert Snapshots.folder_name(10) == "minute_10"
    assert Snapshots.folder_name(2.5) == "minute_2.5"


@pytest.mark.parametrize("minutes", [[-1], ["10"], [True]])
def test_invalid_minutes_are_named(minutes):
    with pytest.raises(ValueError, match="minutes"):
        Snapshots("unused", minutes=minutes)


class _MinutePerCall:
    """A clock that advances one minute each time it is read."""

    def __init__(self):
        self.calls = 0

    def monotonic(self):
        self.calls += 1
        return 60.0 * (self.calls - 1)


def test_averaged_snapshot_is_what_training_would_end_with(tmp_path, monkeypatch):
    from keras_transformer.training import CheckpointAveraging, average_checkpoints
    from keras_transformer.training import snapshots as snapshots_module

    x, y = np.arange(16.0).reshape(8, 2), np.ones((8, 1))

    def train(callbacks):
        keras.utils.set_random_seed(0)
        model = _model()
        model.fit(x, y, batch_size=2, epochs=1, verbose=0, callbacks=callbacks)
        return model

    plain = train([])
    monkeypatch.setattr(snapshots_module, "time", _MinutePerCall())
    averaging = CheckpointAveraging(
        tmp_path / "checkpoints",
        keep=2,
        every_n_steps=2,
        average_at_end=False,
        spare=4,  # older files stay on disk, for the checks below
    )
    # Minute 3 ends after the third batch: checkpoints of steps 2 and 3.
    snapshots = Snapshots(tmp_path / "snapshots", minutes=[3], averaging=averaging)
    model = train([averaging, snapshots])
    info = json.loads(
        (tmp_path / "snapshots" / "minute_3" / "snapshot.json").read_text()
    )
    assert info["step"] == 3
    assert info["averaged"] == ["step-000002.weights.h5", "step-000003.weights.h5"]
    saved = keras.models.load_model(tmp_path / "snapshots" / "minute_3" / "model.keras")
    twin = _model()
    average_checkpoints(
        twin, [tmp_path / "checkpoints" / name for name in info["averaged"]]
    )
    for a, b in zip(saved.get_weights(), twin.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    # Not the raw weights of step 3.
    twin.load_weights(tmp_path / "checkpoints" / "step-000003.weights.h5")
    assert not np.allclose(saved.get_weights()[0], twin.get_weights()[0])
    # Training went on from the raw weights: the same as without snapshots.
    for a, b in zip(model.get_weights(), plain.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)
