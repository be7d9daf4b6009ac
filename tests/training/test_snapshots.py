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
