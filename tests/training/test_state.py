"""The training state: everything exact resuming needs, written atomically."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.models import Transformer
from keras_transformer.training.state import (
    StateCheckpoints,
    StateError,
    load_state,
    restore_latest,
    save_state,
    state_files,
    state_path,
    write_atomically,
)


def _model(seed=0):
    keras.utils.set_random_seed(seed)
    model = Transformer(vocab_size=20, num_layers=1, d_model=8, num_heads=2, d_ff=16)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    model.build()
    model.optimizer.build(model.trainable_variables)
    return model


def _values(model):
    return [keras.ops.convert_to_numpy(v) for v in model.variables] + [
        keras.ops.convert_to_numpy(v) for v in model.optimizer.variables
    ]


def _train_a_step(model):
    # An optimizer update and dropout draws change weights, moments, the
    # step and the dropout layers' seed states.
    ids = np.array([[5, 6, 7, 3]], "int32")
    with tf.GradientTape() as tape:
        logits = model((ids, ids), training=True)
        loss = keras.ops.mean(logits**2)
    grads = tape.gradient(loss, model.trainable_variables)
    model.optimizer.apply(grads, model.trainable_variables)


def test_round_trip_restores_weights_moments_step_and_seeds(tmp_path):
    model = _model()
    _train_a_step(model)
    seeds = [v for v in model.variables if "seed_generator" in v.path]
    assert seeds, "the model has dropout seed states"
    path = str(tmp_path / "state.npz")
    save_state(path, model, {"history": {"loss": [1.5]}})
    saved = _values(model)
    _train_a_step(model)  # everything moves on ...
    moved = zip(saved, _values(model), strict=True)
    assert any(not np.array_equal(a, b) for a, b in moved)
    record = load_state(path, model)  # ... and comes back
    assert record == {"history": {"loss": [1.5]}}
    for a, b in zip(saved, _values(model), strict=True):
        np.testing.assert_array_equal(a, b)
    assert int(model.optimizer.iterations.numpy()) == 1


def test_a_damaged_file_changes_nothing(tmp_path):
    model = _model()
    path = str(tmp_path / "state.npz")
    save_state(path, model, {})
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) // 2])  # truncated
    _train_a_step(model)
    before = _values(model)
    with pytest.raises(StateError, match="cannot be read"):
        load_state(path, model)
    for a, b in zip(before, _values(model), strict=True):
        np.testing.assert_array_equal(a, b)


def test_another_models_state_is_refused(tmp_path):
    path = str(tmp_path / "state.npz")
    save_state(path, _model(), {})
    other = Transformer(vocab_size=20, num_layers=2, d_model=8, num_heads=2, d_ff=16)
    other.compile(optimizer="adam", loss="mse")
    other.build()
    other.optimizer.build(other.trainable_variables)
    with pytest.raises(StateError, match="state of another model"):
        load_state(path, other)


def test_restore_falls_back_past_a_damaged_newest_file(tmp_path, caplog):
    model = _model()
    save_state(state_path(tmp_path, 1), model, {"step": 1})
    save_state(state_path(tmp_path, 2), model, {"step": 2})
    assert [os.path.basename(p) for p in state_files(tmp_path)] == [
        "state-000000002.npz",
        "state-000000001.npz",
    ]
    open(state_path(tmp_path, 2), "wb").write(b"not a state")
    assert restore_latest(tmp_path, model) == {"step": 1}
    assert "Skipping a damaged training state" in caplog.text
    open(state_path(tmp_path, 1), "wb").write(b"")
    with pytest.raises(StateError, match="no usable training state"):
        restore_latest(tmp_path, model)
    assert restore_latest(tmp_path / "none", model) is None


def test_a_failed_write_leaves_the_old_file(tmp_path):
    path = tmp_path / "file.txt"
    path.write_text("old")

    def fail(f):
        f.write(b"half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        write_atomically(path, fail)
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["file.txt"]  # no temporary file left


def test_callback_writes_on_schedule_and_keeps_the_newest(tmp_path):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    records = []
    states = StateCheckpoints(
        tmp_path, minutes=1e-9, record=lambda: records.append(1) or {}, keep=2
    )
    model.fit(
        np.zeros((8, 2)), np.zeros((8, 1)), batch_size=2, verbose=0, callbacks=[states]
    )
    # After each of the 4 steps, and at the end (step 4 again).
    assert len(records) == 5
    assert [os.path.basename(p) for p in state_files(tmp_path)] == [
        "state-000000004.npz",
        "state-000000003.npz",
    ]
