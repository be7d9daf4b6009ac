"""Shared checks for the tests of `keras_transformer` layers."""

import importlib.util
import inspect
import json
import os
from pathlib import Path

import keras
import numpy as np
from keras import ops


def run_layer_checks(
    layer_factory,
    inputs,
    tmp_path,
    call_kwargs=None,
    expected_output_shape=None,
    atol=1e-6,
    run_eagerly=True,
):
    """Runs the standard checks every layer must pass.

    1. Build and eager call on `inputs`.
    2. `compute_output_shape` agrees with the eager output's shape.
    3. A fresh layer, built symbolically in a Functional model from
       `keras.Input`s of the right dtypes, has the same output shape and, with
       the eager layer's weights, the same outputs.
    4. `from_config(get_config())` and a JSON `serialize_keras_object`
       round trip give a layer with the same config and, with the same
       weights, the same outputs.
    5. One `fit` step of the Functional model (mse on the outputs) is finite
       and changes the layer's weights, when it has trainable ones.
    6. The model saved as `.keras` and loaded without `custom_objects` gives
       identical outputs.

    Args:
        layer_factory: zero-argument callable returning a fresh layer.
        inputs: one NumPy array, or a dict `{call argument name: array}` of
            the call's tensor arguments, in positional order.
        tmp_path: pytest's `tmp_path`, for the `.keras` file.
        call_kwargs: non-tensor keyword arguments of the call.
        expected_output_shape: optional shape the eager output must have.
        atol: tolerance of the "identical outputs" comparisons.
        run_eagerly: run the `fit` step eagerly. Tracing a train step costs
            seconds of CPU per layer; graph-mode training is covered by the
            Sequential model test in `tests/layers/test_encoder.py`.

    Returns:
        `(layer, output)`: the eagerly called layer and its NumPy output.
    """
    if not isinstance(inputs, dict):
        inputs = {"inputs": inputs}
    call_kwargs = dict(call_kwargs or {})
    names, arrays = list(inputs), [np.asarray(a) for a in inputs.values()]

    # 1. Build and eager call.
    layer = layer_factory()
    output = layer(*arrays, **call_kwargs)
    assert layer.built
    output = ops.convert_to_numpy(output)
    assert np.all(np.isfinite(output))
    if expected_output_shape is not None:
        assert output.shape == tuple(expected_output_shape)

    # 2. `compute_output_shape` agrees with the eager call.
    assert tuple(_compute_output_shape(layer, names, arrays, call_kwargs)) == (
        output.shape
    )

    # 3. Symbolic call and build in a Functional model.
    model = _functional_model(layer_factory(), names, arrays, call_kwargs)
    model_layer = model.layers[-1]
    assert tuple(model.output.shape) == (None, *output.shape[1:])
    model_layer.set_weights(layer.get_weights())
    np.testing.assert_allclose(_predict(model, arrays), output, atol=atol)

    # 4. Config round trip, directly and through JSON.
    config = layer.get_config()
    assert layer.__class__.from_config(config).get_config() == config
    serialized = json.loads(json.dumps(keras.saving.serialize_keras_object(layer)))
    clone = keras.saving.deserialize_keras_object(serialized)
    assert type(clone) is type(layer)
    assert clone.get_config() == config
    clone(*arrays, **call_kwargs)
    clone.set_weights(layer.get_weights())
    np.testing.assert_allclose(
        ops.convert_to_numpy(clone(*arrays, **call_kwargs)), output, atol=atol
    )

    # 5. One training step.
    before = [w.numpy().copy() for w in model_layer.trainable_weights]
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2), loss="mse", run_eagerly=run_eagerly
    )
    targets = np.random.default_rng(0).normal(size=output.shape).astype("float32")
    history = model.fit(_feed(arrays), targets, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    after = [w.numpy().copy() for w in model_layer.trainable_weights]
    if before:
        assert any(not np.array_equal(b, a) for b, a in zip(before, after, strict=True))

    # 6. `.keras` save and load, without custom_objects.
    path = tmp_path / f"{layer.__class__.__name__}.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    assert type(loaded.layers[-1]) is type(layer)
    np.testing.assert_allclose(
        _predict(loaded, arrays), _predict(model, arrays), atol=atol
    )
    return layer, output


def _functional_model(layer, names, arrays, call_kwargs):
    symbolic = [
        keras.Input(shape=a.shape[1:], dtype=str(a.dtype), name=name)
        for name, a in zip(names, arrays, strict=True)
    ]
    outputs = layer(*symbolic, **call_kwargs)
    return keras.Model(symbolic[0] if len(symbolic) == 1 else symbolic, outputs)


def _compute_output_shape(layer, names, arrays, call_kwargs):
    accepted = inspect.signature(layer.compute_output_shape).parameters
    kwargs = {k: v for k, v in call_kwargs.items() if k in accepted}
    if len(arrays) == 1:
        return layer.compute_output_shape(arrays[0].shape, **kwargs)
    shapes = {f"{n}_shape": a.shape for n, a in zip(names, arrays, strict=True)}
    return layer.compute_output_shape(**shapes, **kwargs)


def _feed(arrays):
    return arrays[0] if len(arrays) == 1 else list(arrays)


def _predict(model, arrays):
    return ops.convert_to_numpy(model(_feed(arrays), training=False))


def mirrored_strategy(devices):
    """A MirroredStrategy over `devices` (the two logical CPUs of conftest).

    On CPUs MirroredStrategy all-reduces with collective ops whose keys
    restart at the same value in every new strategy: a second strategy in the
    same process then fails ("Shape mismatch in the collective instance 100")
    and aborts all later collectives. Reducing through one device uses none.
    """
    import tensorflow as tf

    return tf.distribute.MirroredStrategy(
        [d.name for d in devices],
        cross_device_ops=tf.distribute.ReductionToOneDevice(),
    )


def model_dir_with_code(directory, marker):
    """A model directory whose `model.keras` holds a Python lambda.

    The lambda (a `keras.layers.Lambda` layer's function) writes "ran" to
    `marker` whenever it is called, as loading the model outside Keras's
    safe mode does: `marker` tells whether the file's code ran. The
    directory has a tokenizer folder too, so only the model can stop a load.

    Returns:
        `directory`, created.
    """
    directory, marker = Path(directory), str(marker)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tokenizer").mkdir(exist_ok=True)
    inputs = keras.Input((None,), dtype="int32")
    ran = keras.layers.Lambda(lambda x: (open(marker, "w").write("ran"), x)[1])
    keras.Model(inputs, ran(inputs)).save(directory / "model.keras")
    Path(marker).unlink()  # (written when the model was built)
    return directory


def benchmark_script(name):
    """`benchmarks/<name>.py` imported as a module, `os.environ` left as it was.

    The scripts set TensorFlow's environment variables for their own
    process; a test that imports one should not pass them on to the
    processes later tests start.
    """
    path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    environ = dict(os.environ)
    try:
        spec.loader.exec_module(module)
    finally:
        os.environ.clear()
        os.environ.update(environ)
    return module
