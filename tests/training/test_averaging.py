"""Tests for average_checkpoints and the CheckpointAveraging callback."""

import os

import keras
import numpy as np
import pytest

from keras_transformer.training import CheckpointAveraging, average_checkpoints
from keras_transformer.training import averaging as averaging_module


class Counter(keras.layers.Layer):
    """Passes its input through; holds an integer weight."""

    def build(self, input_shape):
        self.count = self.add_weight(
            shape=(), dtype="int32", initializer="zeros", trainable=False
        )

    def call(self, inputs):
        return inputs


def dense_model(units=3, with_counter=False):
    layers = [keras.Input((4,)), keras.layers.Dense(units)]
    if with_counter:
        layers.append(Counter())
    return keras.Sequential(layers)


def write_checkpoints(model, directory, weight_sets):
    paths = []
    for i, weights in enumerate(weight_sets):
        model.set_weights(weights)
        paths.append(os.path.join(directory, f"ckpt-{i}.weights.h5"))
        model.save_weights(paths[-1])
    return paths


def random_weight_sets(model, count, seed=0):
    rng = np.random.default_rng(seed)
    return [
        [rng.normal(size=w.shape).astype(w.dtype) for w in model.get_weights()]
        for _ in range(count)
    ]


def test_average_of_three_checkpoints_is_the_numpy_mean(tmp_path):
    model = dense_model()
    weight_sets = random_weight_sets(model, 3)
    paths = write_checkpoints(model, tmp_path, weight_sets)
    model.set_weights(random_weight_sets(model, 1, seed=9)[0])  # unrelated start
    assert average_checkpoints(model, paths) is model
    for averaged, *values in zip(model.get_weights(), *weight_sets, strict=True):
        np.testing.assert_allclose(averaged, np.mean(values, axis=0), rtol=1e-6)


def test_integer_weights_take_the_last_checkpoint(tmp_path):
    model = dense_model(with_counter=True)
    weight_sets = random_weight_sets(model, 3)
    for count, weights in zip([4, 9, 7], weight_sets, strict=True):
        weights[-1] = np.array(count, "int32")
    paths = write_checkpoints(model, tmp_path, weight_sets)
    average_checkpoints(model, paths)
    kernel, bias, count = model.get_weights()
    assert count == 7
    np.testing.assert_allclose(
        kernel, np.mean([w[0] for w in weight_sets], 0), rtol=1e-6
    )


def test_optimizer_state_is_not_loaded(tmp_path):
    model = dense_model()
    model.compile(optimizer="adam", loss="mse")
    model.optimizer.build(model.trainable_variables)
    # The files hold the optimizer's initial state (zeros)...
    paths = write_checkpoints(model, tmp_path, random_weight_sets(model, 2))
    # ...and the live optimizer has moved on.
    for variable in model.optimizer.variables:
        variable.assign(keras.ops.ones(variable.shape, variable.dtype) * 5)
    state = [v.numpy() for v in model.optimizer.variables]
    average_checkpoints(model, paths)
    for before, variable in zip(state, model.optimizer.variables, strict=True):
        np.testing.assert_array_equal(variable.numpy(), before)


def test_empty_list_and_single_path_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="paths"):
        average_checkpoints(dense_model(), [])
    with pytest.raises(TypeError, match="paths"):
        average_checkpoints(dense_model(), str(tmp_path / "a.weights.h5"))


def test_missing_file_is_named_and_nothing_changes(tmp_path):
    model = dense_model()
    (path,) = write_checkpoints(model, tmp_path, random_weight_sets(model, 1))
    before = model.get_weights()
    missing = str(tmp_path / "missing.weights.h5")
    with pytest.raises(FileNotFoundError, match="missing.weights.h5"):
        average_checkpoints(model, [path, missing])
    for old, new in zip(before, model.get_weights(), strict=True):
        np.testing.assert_array_equal(old, new)


def test_incompatible_shapes_name_the_file_and_variable(tmp_path):
    model = dense_model(units=3)
    good = write_checkpoints(model, tmp_path, random_weight_sets(model, 1))[0]
    other = dense_model(units=5)
    bad = str(tmp_path / "wide.weights.h5")
    other.save_weights(bad)
    before = model.get_weights()
    with pytest.raises(ValueError, match=r"wide\.weights\.h5(.|\n)*kernel"):
        average_checkpoints(model, [good, bad])
    for old, new in zip(before, model.get_weights(), strict=True):
        np.testing.assert_array_equal(old, new)


def mean_of_files(paths, units=1):
    weights = []
    for path in paths:
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(units)])
        model.load_weights(path)
        weights.append(model.get_weights())
    return [np.mean(values, axis=0) for values in zip(*weights, strict=True)]


def tiny_compiled_model():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    return model


X = np.array([[1.0, 2.0], [0.5, -1.0], [2.0, 0.0], [-1.0, 1.0]], "float32")
Y = np.array([[1.0], [0.0], [2.0], [-1.0]], "float32")


def test_callback_keeps_the_last_epochs_and_leaves_their_average(tmp_path):
    model = tiny_compiled_model()
    callback = CheckpointAveraging(tmp_path, keep=3)
    model.fit(
        X, Y, batch_size=2, epochs=5, shuffle=False, callbacks=[callback], verbose=0
    )
    kept = [f"epoch-{e:06d}.weights.h5" for e in (3, 4, 5)]
    assert sorted(os.listdir(tmp_path)) == ["averaged.weights.h5", *kept]
    assert callback.checkpoints == [str(tmp_path / name) for name in kept]
    expected = mean_of_files(callback.checkpoints)
    last = mean_of_files(callback.checkpoints[-1:])
    assert not np.allclose(expected[0], last[0])  # the epochs differ
    for actual, wanted in zip(model.get_weights(), expected, strict=True):
        np.testing.assert_allclose(actual, wanted, rtol=1e-6)
    for saved, wanted in zip(
        mean_of_files([tmp_path / "averaged.weights.h5"]), expected, strict=True
    ):
        np.testing.assert_allclose(saved, wanted, rtol=1e-6)


def test_callback_every_n_steps_saves_the_final_step_too(tmp_path):
    model = tiny_compiled_model()
    callback = CheckpointAveraging(
        tmp_path, keep=5, every_n_steps=3, save_averaged=False
    )
    # 4 samples, batch 1: 4 steps per epoch, 8 steps in all.
    model.fit(
        X, Y, batch_size=1, epochs=2, shuffle=False, callbacks=[callback], verbose=0
    )
    names = [
        "step-000003.weights.h5",
        "step-000006.weights.h5",
        "step-000008.weights.h5",
    ]
    assert sorted(os.listdir(tmp_path)) == names
    for actual, wanted in zip(
        model.get_weights(), mean_of_files(callback.checkpoints), strict=True
    ):
        np.testing.assert_allclose(actual, wanted, rtol=1e-6)
    # Averaging changed the weights, not the optimizer's step count.
    assert int(model.optimizer.iterations.numpy()) == 8


def test_callback_every_n_minutes(tmp_path, monkeypatch):
    clock = iter(60.0 * np.arange(0, 100, 4))  # 4 minutes pass per call
    monkeypatch.setattr(averaging_module, "_clock", lambda: next(clock))
    model = tiny_compiled_model()
    callback = CheckpointAveraging(tmp_path, keep=2, every_n_minutes=10)
    model.fit(
        X, Y, batch_size=1, epochs=2, shuffle=False, callbacks=[callback], verbose=0
    )
    # The 8 batches end at minutes 4, 8, 12 (save), 16, 20, 24 (save), 28, 32;
    # the last step is saved at the end; the two latest are kept.
    assert callback.checkpoints == [
        str(tmp_path / "step-000006.weights.h5"),
        str(tmp_path / "step-000008.weights.h5"),
    ]
    for actual, wanted in zip(
        model.get_weights(), mean_of_files(callback.checkpoints), strict=True
    ):
        np.testing.assert_allclose(actual, wanted, rtol=1e-6)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(keep=0), "keep"),
        (dict(every_n_steps=0), "every_n_steps"),
        (dict(every_n_minutes=-1.0), "every_n_minutes"),
        (dict(every_n_steps=10, every_n_minutes=10.0), "at most one"),
    ],
)
def test_callback_invalid_arguments_are_named(tmp_path, kwargs, name):
    with pytest.raises(ValueError, match=name):
        CheckpointAveraging(tmp_path, **kwargs)


def test_callback_config_mirrors_init(tmp_path):
    callback = CheckpointAveraging(tmp_path, keep=4, every_n_minutes=10.0)
    assert callback.get_config() == {
        "directory": str(tmp_path),
        "keep": 4,
        "every_n_steps": None,
        "every_n_minutes": 10.0,
        "save_averaged": True,
        "average_at_end": True,
        "checkpoints": [],
        "write": True,
        "spare": 0,
    }
    assert CheckpointAveraging(**callback.get_config()).get_config() == (
        callback.get_config()
    )


def test_resumed_callback_keeps_the_earlier_files_and_a_spare(tmp_path):
    # A resumed run hands over the files its earlier run kept; with
    # `spare=1`, the file before them stays on disk (for a training state
    # that lists it), and older ones go.
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    earlier = [str(tmp_path / f"step-00000{i}.weights.h5") for i in (1, 2)]
    for path in earlier:
        model.save_weights(path)
    callback = CheckpointAveraging(
        tmp_path,
        keep=2,
        every_n_steps=1,
        average_at_end=False,
        checkpoints=earlier,
        spare=1,
    )
    before = [w.copy() for w in model.get_weights()]
    model.fit(
        np.ones((4, 2)),
        np.ones((4, 1)),
        batch_size=2,
        epochs=1,
        initial_epoch=0,
        verbose=0,
        callbacks=[callback],
    )
    # Steps 1 and 2 of this fit rewrote the same-named files.
    model.fit(
        np.ones((4, 2)),
        np.ones((4, 1)),
        batch_size=2,
        epochs=1,
        verbose=0,
        callbacks=[callback],
    )
    assert [os.path.basename(p) for p in callback.checkpoints] == [
        "step-000003.weights.h5",
        "step-000004.weights.h5",
    ]
    assert sorted(os.listdir(tmp_path)) == [
        "step-000002.weights.h5",
        "step-000003.weights.h5",
        "step-000004.weights.h5",
    ]
    # average_at_end=False: the weights are the trained ones, not averaged.
    assert not all(
        np.array_equal(a, b) for a, b in zip(before, model.get_weights(), strict=True)
    )
