"""Checkpoint averaging: the final model is the mean of the last checkpoints."""

import logging
import os
from collections.abc import Sequence

import keras
import numpy as np
import tensorflow as tf

logger = logging.getLogger(__name__)

PathLike = str | os.PathLike


def average_checkpoints(model: keras.Model, paths: Sequence[PathLike]) -> keras.Model:
    """Sets the weights of `model` to the element-wise mean of checkpoints.

    Each path is a checkpoint of a model of the same architecture: the
    prefix of a `tf.train.Checkpoint` of its weights by name (what
    `Checkpoints` writes, `weights_by_path`; files of earlier versions hold
    the model as `model`), or a `.weights.h5` file written by
    `model.save_weights` or
    `keras.callbacks.ModelCheckpoint(save_weights_only=True)`. Every
    floating-point weight of `model` (trainable and non-trainable:
    `model.weights`) becomes the mean of its values in the files,
    accumulated in float64; a weight of any other dtype (an integer
    counter, say) takes its value from the last file. Only the model's
    weights change: the state of `model.optimizer` stored in the files is
    not loaded, and the optimizer keeps its own.

    Args:
        model: A built model to load into; it is modified in place.
        paths: The checkpoint files, oldest first (the order only matters for
            non-float weights).

    Returns:
        `model`, holding the averaged weights.

    Raises:
        ValueError: If `paths` is empty, the model is not built, or a file
            does not fit the model (the message names the file and, from
            Keras, the variable). The model is left unchanged.
        FileNotFoundError: If a file does not exist (nothing is loaded).
        TypeError: If `paths` is a single path rather than a list.

    Example:

    >>> import os, shutil, tempfile
    >>> import numpy as np
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> directory = tempfile.mkdtemp()
    >>> paths = [os.path.join(directory, f"{i}.weights.h5") for i in range(3)]
    >>> for path, value in zip(paths, [1.0, 2.0, 6.0]):
    ...     model.set_weights([np.full((2, 1), value), np.full((1,), -value)])
    ...     model.save_weights(path)
    >>> model = average_checkpoints(model, paths)
    >>> [w.ravel().tolist() for w in model.get_weights()]
    [[3.0, 3.0], [-3.0]]
    >>> prefix = tf.train.Checkpoint(model=model).write(directory + "/ckpt")
    >>> model = average_checkpoints(model, [prefix, paths[0]])
    >>> [w.ravel().tolist() for w in model.get_weights()]
    [[2.0, 2.0], [-2.0]]
    >>> shutil.rmtree(directory)

    References:
        Vaswani et al., "Attention Is All You Need", 2017, section 6.1: the
        base models average the last 5 checkpoints, the big ones the last 20,
        written at 10-minute intervals.
    """
    if isinstance(paths, str | os.PathLike):
        raise TypeError(
            f"paths must be a list of checkpoint files. Received: paths={paths!r}"
        )
    paths = [os.fspath(path) for path in paths]
    if not paths:
        raise ValueError(
            "paths must name at least one checkpoint file. Received: paths=[]"
        )
    missing = [path for path in paths if not _exists(path)]
    if missing:
        raise FileNotFoundError(f"Checkpoint files not found: {missing}")
    if not model.built:
        raise ValueError(
            f"The model {model.name!r} must be built before checkpoints are "
            "averaged into it; call it on a batch or use `model.build()`."
        )

    variables = model.weights
    originals = [v.numpy() for v in variables]
    is_float = [keras.backend.is_float_dtype(v.dtype) for v in variables]
    sums = [np.zeros(value.shape, np.float64) for value in originals]
    for path in paths:
        try:
            _load_model_weights(model, path)
        except Exception as error:
            _assign(variables, originals)
            if not isinstance(error, ValueError):
                raise
            raise ValueError(
                f"Checkpoint {path!r} does not fit the model {model.name!r}; "
                f"the model was left unchanged. Keras reported: {error}"
            ) from error
        for i, variable in enumerate(variables):
            if is_float[i]:
                sums[i] += variable.numpy().astype(np.float64)

    # Non-float weights keep the value of the last file, loaded just above.
    for variable, total, floating in zip(variables, sums, is_float, strict=True):
        if floating:
            variable.assign(keras.ops.cast(total / len(paths), variable.dtype))
    logger.info("Averaged %d checkpoints into %s.", len(paths), model.name)
    return model


def weights_by_path(model: keras.Model) -> dict:
    """The model's weights by their Keras path below it, for `tf.train`.

    `{"encoder/layer_0/self_attention/query/kernel": variable, ...}`:
    the path of sublayer names (`variable.path` less the model's own name,
    which Keras numbers per process), so a checkpoint finds every weight
    again by name, also the weights of sublayers kept in lists (which
    TensorFlow's object graph of a Keras model does not reach).

    Raises:
        ValueError: two weights have one path (sublayers of one name).
    """
    named = {}
    for variable in model.weights:
        path = variable.path.split("/", 1)[-1]
        if path in named:
            raise ValueError(
                f"Two weights of the model {model.name!r} have the path "
                f"{path!r}: give its sublayers distinct names"
            )
        named[path] = variable
    return named


def _load_model_weights(model: keras.Model, path: str) -> None:
    """Loads the model's own variables from `path`, not the optimizer's."""
    if path.endswith(".weights.h5"):
        optimizer = getattr(model, "optimizer", None)
        model.load_weights(path, objects_to_skip=[optimizer] if optimizer else None)
        return
    # The model tracks its optimizer, which is read with it: put it back.
    optimizer = getattr(model, "optimizer", None)
    optimizer = list(optimizer.variables) if optimizer is not None else []
    state = [keras.ops.convert_to_numpy(v) for v in optimizer]
    try:
        if _has_weights_by_path(path):
            status = tf.train.Checkpoint(weights=weights_by_path(model)).read(path)
            status.assert_existing_objects_matched().expect_partial()
        else:  # written before the weights were named (reached by position)
            _read_earlier_layout(model, path)
    except (AssertionError, tf.errors.OpError) as error:
        raise ValueError(" ".join(str(error).split())[:300]) from None
    finally:
        _assign(optimizer, state)


def _read_earlier_layout(model: keras.Model, path: str) -> None:
    """Reads a checkpoint that holds the model only as `model`.

    Its object graph reaches the stacks' weights only through the model's
    optimizer (by position), so every weight is checked to have been read:
    each float weight is NaN until then.
    """
    floats = [v for v in model.weights if keras.backend.is_float_dtype(v.dtype)]
    for variable in floats:
        variable.assign(keras.ops.full(variable.shape, np.nan, variable.dtype))
    status = tf.train.Checkpoint(model=model).read(path)
    status.assert_existing_objects_matched().expect_partial()
    unread = [v.path for v in floats if np.isnan(keras.ops.convert_to_numpy(v)).any()]
    if unread:
        raise ValueError(
            f"{len(unread)} weights are not reached in this checkpoint of an "
            f"earlier version (e.g. {unread[0]!r}): it reaches them through the "
            "optimizer; read it into the compiled model that trained it"
        )


def _has_weights_by_path(prefix: str) -> bool:
    keys = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    return any(key.startswith("weights/") for key in keys)


def _exists(path: str) -> bool:
    """A `.weights.h5` file, or a checkpoint prefix (its `.index` file)."""
    return os.path.isfile(path) or os.path.isfile(path + ".index")


def _assign(variables, values) -> None:
    for variable, value in zip(variables, values, strict=True):
        variable.assign(value)
