"""The training state: everything exact resuming needs, on one clock."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.models import Transformer
from keras_transformer.training import average_checkpoints, checkpoints
from keras_transformer.training.checkpoints import (
    CheckpointError,
    Checkpoints,
    checkpoint_prefixes,
    restore,
    restore_latest,
    training_checkpoint,
    write_snapshot_model,
)


def _model(seed=0, num_layers=1):
    keras.utils.set_random_seed(seed)
    model = Transformer(
        vocab_size=20, num_layers=num_layers, d_model=8, num_heads=2, d_ff=16
    )
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


def _save(model, directory, step, record):
    text = tf.Variable(json.dumps(record), dtype=tf.string)
    return training_checkpoint(model, text).write(
        os.path.join(directory, f"ckpt-{step}")
    )


def test_round_trip_restores_weights_moments_step_and_seeds(tmp_path):
    model = _model()
    _train_a_step(model)
    seeds = [v for v in model.variables if "seed_generator" in v.path]
    assert seeds, "the model has dropout seed states"
    prefix = _save(model, tmp_path, 1, {"history": {"loss": [1.5]}})
    saved = _values(model)
    # Into a second model of the same recipe (other auto-generated names),
    # whose weights, moments and seeds have all moved on.
    twin = _model(seed=1)
    _train_a_step(twin)
    _train_a_step(twin)
    moved = zip(saved, _values(twin), strict=True)
    assert all(not np.array_equal(a, b) for a, b in moved if a.size > 1)
    assert restore(prefix, twin) == {"history": {"loss": [1.5]}}
    for a, b in zip(saved, _values(twin), strict=True):
        np.testing.assert_array_equal(a, b)
    assert int(twin.optimizer.iterations.numpy()) == 1


def test_a_checkpoint_of_the_earlier_layout_still_resumes(tmp_path):
    # Written before the weights were named: the stacks' weights were
    # reached through the optimizer's list of trainable variables.
    model = _model()
    _train_a_step(model)
    text = tf.Variable(json.dumps({"a": 1}), dtype=tf.string)
    prefix = training_checkpoint(model, text, named_weights=False).write(
        str(tmp_path / "ckpt-1")
    )
    saved = _values(model)
    twin = _model(seed=1)
    assert restore(prefix, twin) == {"a": 1}
    for a, b in zip(saved, _values(twin), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_damaged_checkpoint_changes_nothing(tmp_path):
    model = _model()
    prefix = _save(model, tmp_path, 1, {})
    data = f"{prefix}.data-00000-of-00001"
    content = open(data, "rb").read()
    open(data, "wb").write(content[: len(content) // 2])  # truncated
    _train_a_step(model)
    before = _values(model)
    with pytest.raises(CheckpointError, match="cannot be read"):
        restore(prefix, model)
    for a, b in zip(before, _values(model), strict=True):
        np.testing.assert_array_equal(a, b)


def test_another_models_checkpoint_is_refused_and_changes_nothing(tmp_path):
    prefix = _save(_model(num_layers=2), tmp_path, 1, {})
    model = _model(seed=3)
    before = _values(model)
    with pytest.raises(CheckpointError, match="does not fit the model"):
        restore(prefix, model)
    for a, b in zip(before, _values(model), strict=True):
        np.testing.assert_array_equal(a, b)


def test_restore_falls_back_past_a_damaged_newest_one(tmp_path, caplog):
    model = _model()
    for step in (1, 2, 10):
        _save(model, tmp_path, step, {"step": step})
    names = [os.path.basename(p) for p in checkpoint_prefixes(tmp_path)]
    assert names == ["ckpt-1", "ckpt-2", "ckpt-10"]  # by step, not by name
    open(tmp_path / "ckpt-10.index", "wb").write(b"not a checkpoint")
    assert restore_latest(tmp_path, model) == {"step": 2}
    assert "Skipping a damaged training state" in caplog.text
    # Set aside, not deleted, and no longer among the checkpoints.
    assert sorted(os.listdir(tmp_path / "damaged")) == [
        "ckpt-10.data-00000-of-00001",
        "ckpt-10.index",
    ]
    assert checkpoint_prefixes(tmp_path)[-1].endswith("ckpt-2")
    for step in (1, 2):
        open(tmp_path / f"ckpt-{step}.index", "wb").write(b"")
    with pytest.raises(CheckpointError, match="no usable training state"):
        restore_latest(tmp_path, model)
    assert restore_latest(tmp_path / "none", model) is None


class _Clock:
    """A clock that advances `step` seconds each time it is read."""

    def __init__(self, step):
        self.step, self.now = step, 0.0

    def __call__(self):
        self.now += self.step
        return self.now


def _dense():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, name="dense")])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    return model


X, Y = np.arange(16.0).reshape(8, 2) / 10, np.ones((8, 1))


def test_callback_writes_on_its_clock_and_keeps_the_newest(tmp_path, monkeypatch):
    # Each clock read is 30 s on.
    monkeypatch.setattr(checkpoints, "_clock", _Clock(30.0))
    records = []
    callback = Checkpoints(
        tmp_path, minutes=1, keep=2, record=lambda: records.append(1) or {}
    )
    _dense().fit(X, Y, batch_size=2, verbose=0, callbacks=[callback])
    names = [os.path.basename(p) for p in callback.checkpoints]
    # Due after steps 2 (a minute in) and 4 (a minute after that write),
    # the epoch's end, and written again at the end of training.
    assert names == ["ckpt-2", "ckpt-4"]
    assert len(records) == 3


def test_checkpoints_by_steps_fall_on_the_same_steps_on_any_clock(
    tmp_path, monkeypatch
):
    written = {}
    # A clock that stands still would never write by minutes; one that
    # moves an hour per read, after every batch.
    for seconds in (0.0, 3600.0):
        monkeypatch.setattr(checkpoints, "_clock", _Clock(seconds))
        callback = Checkpoints(tmp_path / str(seconds), steps=3, keep=9)
        _dense().fit(X, Y, batch_size=1, epochs=2, verbose=0, callbacks=[callback])
        written[seconds] = [os.path.basename(p) for p in callback.checkpoints]
    # 16 steps: each multiple of 3, and the end.
    expected = ["ckpt-3", "ckpt-6", "ckpt-9", "ckpt-12", "ckpt-15", "ckpt-16"]
    assert written[0.0] == written[3600.0] == expected
    # Resumed after the first epoch (step 8), it writes at the same steps.
    model = _dense()
    for epoch in range(2):
        callback = Checkpoints(tmp_path / "resumed", steps=3, keep=9)
        model.fit(X, Y, batch_size=1, verbose=0, callbacks=[callback])
        assert callback.checkpoints[-1].endswith(f"-{8 * (epoch + 1)}")
    assert [os.path.basename(p) for p in callback.checkpoints] == [
        "ckpt-3",
        "ckpt-6",
        "ckpt-8",
        "ckpt-9",
        "ckpt-12",
        "ckpt-15",
        "ckpt-16",
    ]


def test_a_checkpoint_by_steps_is_written_once_per_multiple(tmp_path):
    epochs = []

    class Log(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            epochs.append(epoch)

    records = []
    callback = Checkpoints(
        tmp_path, steps=4, keep=9, record=lambda: records.append(len(epochs)) or {}
    )
    model = _dense()
    model.fit(X, Y, batch_size=1, epochs=2, verbose=0, callbacks=[Log(), callback])
    # Step 4; step 8, the first epoch's last, after its logs; step 12;
    # step 16 at the second epoch's end, and again at the end of training.
    assert records == [0, 1, 1, 2, 2]
    # A step that stands still (a loss-scale optimizer skipped the update)
    # writes nothing again; a jump past a multiple writes.
    callback.on_train_batch_end(0)
    model.optimizer.iterations.assign(21)
    callback.on_train_batch_end(0)
    callback.on_train_batch_end(0)
    assert records == [0, 1, 1, 2, 2, 2]
    assert callback.checkpoints[-1].endswith("-21")


def test_a_write_due_at_an_epochs_last_batch_waits_for_its_logs(tmp_path):
    seen = []

    class Log(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            seen.append(epoch)

    callback = Checkpoints(
        tmp_path, minutes=1e-9, record=lambda: {"epochs_logged": len(seen)}
    )
    _dense().fit(X, Y, batch_size=4, epochs=2, verbose=0, callbacks=[Log(), callback])
    # Step 2 ends epoch 1: written after its logs, as is the end (step 4).
    assert restore(callback.checkpoints[-1], _dense())["epochs_logged"] == 2


def test_invalid_arguments_are_named(tmp_path):
    for kwargs, name in (
        ({"minutes": 0}, "minutes"),
        ({}, "minutes` and `steps"),
        ({"minutes": 1, "steps": 2}, "minutes` and `steps"),
        ({"steps": 0}, "steps"),
        ({"steps": 1.5}, "steps"),
        ({"steps": True}, "steps"),
        ({"minutes": 1, "keep": 0}, "keep"),
        ({"minutes": 1, "snapshot_minutes": [-1]}, "snapshot_minutes"),
        ({"minutes": 1, "snapshot_minutes": [1]}, "snapshot_dir"),
        ({"minutes": 1, "snapshot_steps": [0]}, "snapshot_steps"),
        ({"minutes": 1, "snapshot_steps": [True]}, "snapshot_steps"),
        ({"minutes": 1, "snapshot_steps": [2.5]}, "snapshot_steps"),
        ({"minutes": 1, "snapshot_steps": [1]}, "snapshot_dir"),
    ):
        with pytest.raises(ValueError, match=name):
            Checkpoints(tmp_path, **kwargs)


def test_a_snapshot_is_the_average_training_would_end_with(tmp_path, monkeypatch):
    def train(callbacks):
        keras.utils.set_random_seed(0)
        model = _dense()
        model.fit(X, Y, batch_size=2, epochs=1, verbose=0, callbacks=callbacks)
        return model

    plain = train([])
    # A minute per clock read: 1 at the first batch's end, then 2, 3, 4.
    monkeypatch.setattr(checkpoints, "_clock", _Clock(60.0))
    callback = Checkpoints(
        tmp_path / "checkpoints",
        minutes=2,
        keep=2,
        snapshot_minutes=[3],
        snapshot_dir=tmp_path / "snapshots",
        snapshot_keep=2,
    )
    model = train([callback])
    folder = tmp_path / "snapshots" / "minute_3"
    info = json.loads((folder / "snapshot.json").read_text())
    # Minute 2 (step 2: a checkpoint), minute 3 (step 3: the snapshot).
    assert info == {"minutes": 3, "step": 3, "checkpoints": ["ckpt-2", "ckpt-3"]}
    # Kept by the snapshot after the callback's own copy of step 2 went.
    assert not (tmp_path / "checkpoints" / "ckpt-2.index").exists()
    twin = _dense()
    average_checkpoints(twin, [folder / "ckpt-2", folder / "ckpt-3"])
    expected = twin.get_weights()
    saved = keras.models.load_model(write_snapshot_model(_dense(), folder))
    for a, b in zip(saved.get_weights(), expected, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    twin = _dense()
    average_checkpoints(twin, [folder / "ckpt-3"])
    assert not np.allclose(saved.get_weights()[0], twin.get_weights()[0])
    # Training went on untouched: the same as without snapshots.
    for a, b in zip(model.get_weights(), plain.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    # The snapshot is in the record, so a resumed run does not take it again.
    record = restore(callback.checkpoints[-1], _dense())
    assert record["snapshots"] == {"minute_3": 3}
    # (Records of earlier versions name a minute's snapshot by its number.)
    assert Checkpoints(tmp_path, 1, snapshots={"3": 3}).snapshots == record["snapshots"]


def test_a_snapshot_keeps_the_best_so_far_and_is_chosen_on_validation(
    tmp_path, monkeypatch
):
    from keras_transformer.training.best import BestCheckpoints

    class Scores(keras.callbacks.Callback):  # a validation score per epoch
        def on_epoch_end(self, epoch, logs=None):
            logs["val_score"] = [5.0, 1.0, 4.0, 6.0, 7.0, 8.0][epoch]

    monkeypatch.setattr(checkpoints, "_clock", _Clock(60.0))
    best = BestCheckpoints(tmp_path / "best", keep=2, monitor="val_score")
    callback = Checkpoints(
        tmp_path / "checkpoints",
        minutes=100,
        snapshot_minutes=[5],
        snapshot_dir=tmp_path / "snapshots",
        best_dir=tmp_path / "best",
    )
    model = _dense()
    # Six epochs of one batch; the snapshot comes after minute 5.
    model.fit(
        X[:2],
        Y[:2],
        batch_size=2,
        epochs=6,
        verbose=0,
        callbacks=[Scores(), best, callback],
    )
    folder = tmp_path / "snapshots" / "minute_5"
    kept = json.loads((folder / "best" / "scores.json").read_text())
    assert kept == {"ckpt-2": 1.0, "ckpt-3": 4.0}
    assert json.loads((folder / "snapshot.json").read_text())["step"] > 3
    # Chosen on a score: the distance of the kernel from the best one's.
    target = _dense()
    name = min(kept, key=kept.get)
    average_checkpoints(target, [folder / "best" / name])
    aim = target.get_weights()[0]
    twin = _dense()

    def score():
        return float(np.abs(twin.get_weights()[0] - aim).sum())

    saved = keras.models.load_model(write_snapshot_model(twin, folder, score))
    info = json.loads((folder / "snapshot.json").read_text())
    assert info["final_model"]["choice"] == "best"
    assert info["final_model"]["checkpoints"] == [name]
    np.testing.assert_array_equal(saved.get_weights()[0], aim)


def test_no_state_is_written_once_the_loss_or_the_weights_are_not_finite(tmp_path):
    class Blow(keras.callbacks.Callback):  # step 3's update: weights of inf
        def on_train_batch_begin(self, batch, logs=None):
            if batch == 2:
                self.model.optimizer.learning_rate.assign(float("inf"))

    callback = Checkpoints(tmp_path, minutes=1e-9, keep=10)
    model = _dense()
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    model.fit(X, Y, batch_size=1, verbose=0, callbacks=[Blow(), callback])
    # Written after steps 1 and 2; not after step 3 (weights not finite),
    # nor after a loss that was not (step 4 on), nor at the end.
    names = [os.path.basename(p) for p in callback.checkpoints]
    assert names == ["ckpt-1", "ckpt-2"]
    reader = tf.train.load_checkpoint(callback.checkpoints[-1])
    for name in reader.get_variable_to_shape_map():
        value = reader.get_tensor(name)
        if np.issubdtype(np.asarray(value).dtype, np.floating):
            assert np.isfinite(value).all(), name


def test_a_snapshot_survives_its_checkpoint_written_again_at_the_same_step(
    tmp_path, monkeypatch
):
    # TensorFlow rewrites an index file in place: a snapshot sharing it
    # would read the new index against its old data.
    monkeypatch.setattr(checkpoints, "_clock", _Clock(60.0))
    history = {"loss": []}
    callback = Checkpoints(
        tmp_path / "checkpoints",
        minutes=100,
        record=lambda: {"history": history},
        snapshot_minutes=[1],
        snapshot_dir=tmp_path / "snapshots",
    )
    model = _dense()
    model.fit(X[:2], Y[:2], batch_size=2, epochs=1, verbose=0, callbacks=[callback])
    history["loss"] = [1.0] * 50  # a longer record, at the same step
    callback.save()
    folder = tmp_path / "snapshots" / "minute_1"
    info = json.loads((folder / "snapshot.json").read_text())
    assert info["checkpoints"] == ["ckpt-1"]
    twin = _dense()
    assert restore(str(folder / "ckpt-1"), twin)["history"] == {"loss": []}
    saved = keras.models.load_model(write_snapshot_model(_dense(), folder))
    for a, b in zip(saved.get_weights(), model.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_snapshot_keeps_no_best_checkpoint_from_after_its_step(tmp_path, monkeypatch):
    # Best checkpoints of a later step (a resumed run's lost training) stay out.
    later = _dense()
    best_dir = tmp_path / "best"
    best_dir.mkdir()
    training_checkpoint(later).write(str(best_dir / "ckpt-100"))
    (best_dir / "scores.json").write_text(json.dumps({"ckpt-100": 0.5}))
    monkeypatch.setattr(checkpoints, "_clock", _Clock(60.0))
    callback = Checkpoints(
        tmp_path / "checkpoints",
        minutes=100,
        snapshot_minutes=[1],
        snapshot_dir=tmp_path / "snapshots",
        best_dir=best_dir,
    )
    _dense().fit(X[:2], Y[:2], batch_size=2, verbose=0, callbacks=[callback])
    kept = tmp_path / "snapshots" / "minute_1" / "best"
    assert json.loads((kept / "scores.json").read_text()) == {}
    assert sorted(p.name for p in kept.iterdir()) == ["scores.json"]


def test_finish_snapshots_completes_one_a_kill_left_half_written(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoints, "_clock", _Clock(60.0))
    kwargs = dict(minutes=100, snapshot_minutes=[1], snapshot_dir=tmp_path / "s")
    callback = Checkpoints(tmp_path / "c", **kwargs)
    _dense().fit(X[:2], Y[:2], batch_size=2, verbose=0, callbacks=[callback])
    info = tmp_path / "s" / "minute_1" / "snapshot.json"
    expected = json.loads(info.read_text())
    info.unlink()  # killed after the checkpoint, before snapshot.json
    record = restore(callback.checkpoints[-1], _dense())
    resumed = Checkpoints(tmp_path / "c", snapshots=record["snapshots"], **kwargs)
    resumed.set_model(_dense())
    resumed.finish_snapshots()  # no training: the budget was spent
    assert json.loads(info.read_text()) == expected


class _WeightsByStep(keras.callbacks.Callback):
    """The model's weights after each step, by the optimizer's step."""

    def __init__(self):
        super().__init__()
        self.weights = {}

    def on_train_batch_end(self, batch, logs=None):
        step = int(self.model.optimizer.iterations.numpy())
        self.weights[step] = self.model.get_weights()


def _average(*weights):
    return [np.mean(arrays, axis=0) for arrays in zip(*weights, strict=True)]


def test_a_snapshot_at_a_step_is_taken_at_that_step(tmp_path, monkeypatch):
    def train(callbacks):
        keras.utils.set_random_seed(0)
        model = _dense()
        # Eight steps an epoch, two epochs.
        model.fit(X, Y, batch_size=1, epochs=2, verbose=0, callbacks=callbacks)
        return model

    plain = train([])
    # A minute per clock read: minute 2 is the end of step 2.
    monkeypatch.setattr(checkpoints, "_clock", _Clock(60.0))
    seen = _WeightsByStep()
    callback = Checkpoints(
        tmp_path / "checkpoints",
        minutes=100,
        keep=2,
        snapshot_minutes=[2],
        snapshot_steps=[8, 3],  # 8: an epoch's last step, written at its end
        snapshot_dir=tmp_path / "snapshots",
        snapshot_keep=2,
    )
    model = train([seen, callback])
    folders = tmp_path / "snapshots"
    assert sorted(p.name for p in folders.iterdir()) == ["minute_2", "step_3", "step_8"]
    expected = {  # each: its step, and the newest two checkpoints then
        "minute_2": {"minutes": 2, "step": 2, "checkpoints": ["ckpt-2"]},
        "step_3": {"step": 3, "checkpoints": ["ckpt-2", "ckpt-3"]},
        "step_8": {"step": 8, "checkpoints": ["ckpt-3", "ckpt-8"]},
    }
    for label, info in expected.items():
        folder = folders / label
        assert json.loads((folder / "snapshot.json").read_text()) == info
        # The model is the average of the weights of the steps it kept.
        steps = [int(name.split("-")[1]) for name in info["checkpoints"]]
        saved = keras.models.load_model(write_snapshot_model(_dense(), folder))
        weights = _average(*(seen.weights[s] for s in steps))
        for a, b in zip(saved.get_weights(), weights, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-6)
    # Training went on untouched: the same as without snapshots.
    for a, b in zip(model.get_weights(), plain.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    record = restore(callback.checkpoints[-1], _dense())
    assert record["snapshots"] == {"minute_2": 2, "step_3": 3, "step_8": 8}


def _resumable():
    model = _dense()
    model.optimizer.build(model.trainable_variables)
    return model


def test_step_snapshots_resume_after_a_kill_and_are_not_taken_twice(
    tmp_path, monkeypatch, caplog
):
    def checkpoints_of(record=None, steps=(3, 6)):
        return Checkpoints(
            tmp_path / "c",
            minutes=100,
            snapshot_steps=steps,
            snapshot_dir=tmp_path / "s",
            snapshots=(record or {}).get("snapshots"),
        )

    monkeypatch.setattr(checkpoints, "_clock", _Clock(1.0))
    keras.utils.set_random_seed(0)
    seen = _WeightsByStep()
    model = _resumable()
    callback = checkpoints_of()
    model.fit(X[:4], Y[:4], batch_size=1, verbose=0, callbacks=[seen, callback])
    info = tmp_path / "s" / "step_3" / "snapshot.json"
    expected = json.loads(info.read_text())
    # Killed after step 3's checkpoint, before its snapshot was complete.
    info.unlink()
    (tmp_path / "s" / "step_3" / "ckpt-3.index").unlink()

    resumed = _resumable()
    record = restore_latest(tmp_path / "c", resumed)
    assert int(resumed.optimizer.iterations.numpy()) == 4
    callback = checkpoints_of(record)
    resumed.fit(
        X[:4],
        Y[:4],
        batch_size=1,
        epochs=2,
        initial_epoch=1,
        verbose=0,
        callbacks=[seen, callback],
    )
    # Step 3's snapshot was finished as it was, not taken again at step 4
    # or later; step 6's was taken at step 6.
    assert json.loads(info.read_text()) == expected
    assert json.loads((tmp_path / "s" / "step_6" / "snapshot.json").read_text()) == {
        "step": 6,
        "checkpoints": ["ckpt-6"],
    }
    for label, step in (("step_3", 3), ("step_6", 6)):
        saved = keras.models.load_model(
            write_snapshot_model(_dense(), tmp_path / "s" / label)
        )
        for a, b in zip(saved.get_weights(), seen.weights[step], strict=True):
            np.testing.assert_array_equal(a, b)
    last = restore(callback.checkpoints[-1], _dense())
    assert last["snapshots"] == {"step_3": 3, "step_6": 6}

    # A step a resumed run is already past (its recipe changed) is not taken
    # late under its name.
    again = _resumable()
    record = restore_latest(tmp_path / "c", again)
    callback = checkpoints_of(record, steps=(3, 6, 7))
    with caplog.at_level("WARNING"):
        again.fit(X[:1], Y[:1], verbose=0, callbacks=[callback])
    assert "No snapshot step_7: training resumes at step 8" in caplog.text
    assert not (tmp_path / "s" / "step_7").exists()
