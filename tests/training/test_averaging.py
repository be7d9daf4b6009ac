"""Tests for average_checkpoints: Keras weight files and TF checkpoints."""

import os

import keras
import numpy as np
import pytest

from keras_transformer.training import average_checkpoints
from keras_transformer.training.checkpoints import training_checkpoint


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


@pytest.fixture(params=["weights.h5", "tf.train.Checkpoint"])
def kind(request):
    return request.param


def write_checkpoints(model, directory, weight_sets, kind="weights.h5"):
    """Keras's `.weights.h5` files, or the training job's checkpoints."""
    paths = []
    for i, weights in enumerate(weight_sets):
        model.set_weights(weights)
        if kind == "weights.h5":
            paths.append(os.path.join(directory, f"ckpt-{i}.weights.h5"))
            model.save_weights(paths[-1])
        else:
            prefix = os.path.join(directory, f"ckpt-{i}")
            paths.append(training_checkpoint(model).write(prefix))
    return paths


def random_weight_sets(model, count, seed=0):
    rng = np.random.default_rng(seed)
    return [
        [rng.normal(size=w.shape).astype(w.dtype) for w in model.get_weights()]
        for _ in range(count)
    ]


def test_average_of_three_checkpoints_is_the_numpy_mean(tmp_path, kind):
    model = dense_model()
    weight_sets = random_weight_sets(model, 3)
    paths = write_checkpoints(model, tmp_path, weight_sets, kind)
    model.set_weights(random_weight_sets(model, 1, seed=9)[0])  # unrelated start
    assert average_checkpoints(model, paths) is model
    for averaged, *values in zip(model.get_weights(), *weight_sets, strict=True):
        np.testing.assert_allclose(averaged, np.mean(values, axis=0), rtol=1e-6)


def test_integer_weights_take_the_last_checkpoint(tmp_path, kind):
    model = dense_model(with_counter=True)
    weight_sets = random_weight_sets(model, 3)
    for count, weights in zip([4, 9, 7], weight_sets, strict=True):
        weights[-1] = np.array(count, "int32")
    paths = write_checkpoints(model, tmp_path, weight_sets, kind)
    average_checkpoints(model, paths)
    kernel, bias, count = model.get_weights()
    assert count == 7
    np.testing.assert_allclose(
        kernel, np.mean([w[0] for w in weight_sets], 0), rtol=1e-6
    )


def test_optimizer_state_is_not_loaded(tmp_path, kind):
    model = dense_model()
    model.compile(optimizer="adam", loss="mse")
    model.optimizer.build(model.trainable_variables)
    # The files hold the optimizer's initial state (zeros)...
    paths = write_checkpoints(model, tmp_path, random_weight_sets(model, 2), kind)
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


def test_missing_file_is_named_and_nothing_changes(tmp_path, kind):
    model = dense_model()
    (path,) = write_checkpoints(model, tmp_path, random_weight_sets(model, 1), kind)
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


class Pair(keras.Model):
    """Two same-shaped Dense layers, as attributes named in `names`."""

    def __init__(self, names=("a", "b")):
        super().__init__()
        self.names = names
        for name in names:
            setattr(self, name, keras.layers.Dense(3, name=name))

    def call(self, x):
        return sum(getattr(self, name)(x) for name in sorted(self.names))


def test_checkpoints_are_read_by_name_not_by_position(tmp_path):
    model = Pair(("a", "b"))
    model(np.ones((1, 3)))
    flipped = Pair(("b", "a"))  # the same layers, created in the other order
    flipped(np.ones((1, 3)))
    # The weights' positions differ: `b` comes first in `flipped`.
    assert model.weights[0] is model.a.kernel
    assert flipped.weights[0] is flipped.b.kernel
    prefix = training_checkpoint(model).write(str(tmp_path / "ckpt"))
    average_checkpoints(flipped, [prefix])
    for name in ("a", "b"):
        for mine, theirs in zip(
            getattr(model, name).get_weights(),
            getattr(flipped, name).get_weights(),
            strict=True,
        ):
            np.testing.assert_array_equal(mine, theirs)
    # By position, the kernels would have been swapped.
    assert not np.array_equal(model.get_weights()[0], flipped.get_weights()[0])


def test_a_checkpoint_of_another_model_is_refused(tmp_path):
    model, other = Pair(("a", "b")), Pair(("a", "c"))
    for m in (model, other):
        m(np.ones((1, 3)))
    good = training_checkpoint(model).write(str(tmp_path / "good"))
    bad = training_checkpoint(other).write(str(tmp_path / "other"))
    before = model.get_weights()
    with pytest.raises(ValueError, match=r"other.*does not fit"):
        average_checkpoints(model, [good, bad])
    for old, new in zip(before, model.get_weights(), strict=True):
        np.testing.assert_array_equal(old, new)


def test_every_weight_of_a_transformer_is_read_by_name(tmp_path):
    # The stacks keep their layers in a list, which TensorFlow's object
    # graph of a Keras model does not reach: a fresh model (no optimizer
    # to lead to the weights by position) must still get every weight.
    from keras_transformer.models import Transformer

    def transformer():
        model = Transformer.from_preset("tiny", vocab_size=40, num_layers=2)
        model.build()
        return model

    model, twin = transformer(), transformer()
    prefix = training_checkpoint(model).write(str(tmp_path / "ckpt"))
    average_checkpoints(twin, [prefix])
    assert len(twin.weights) > 30
    for mine, theirs in zip(model.weights, twin.weights, strict=True):
        assert mine.path.split("/", 1)[1] == theirs.path.split("/", 1)[1]
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())


def test_an_earlier_layout_that_does_not_reach_every_weight_is_refused(tmp_path):
    # Files of earlier versions held the model only by its object graph,
    # which reaches the stacks' weights through the optimizer alone.
    from keras_transformer.models import Transformer

    model = Transformer.from_preset("tiny", vocab_size=40, num_layers=1)
    model.build()
    prefix = training_checkpoint(model, named_weights=False).write(str(tmp_path / "c"))
    twin = Transformer.from_preset("tiny", vocab_size=40, num_layers=1)
    twin.build()  # no optimizer
    before = [w.numpy() for w in twin.weights]
    with pytest.raises(ValueError, match="weights are not reached"):
        average_checkpoints(twin, [prefix])
    for old, new in zip(before, twin.weights, strict=True):
        np.testing.assert_array_equal(old, new.numpy())
