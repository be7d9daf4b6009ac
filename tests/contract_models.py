"""Every public layer in every way Keras users build models, saved and reloaded.

Run by `tests/test_contract.py`, twice per backend, each time in a fresh
process:

    KERAS_BACKEND=jax python tests/contract_models.py save DIR
    KERAS_BACKEND=jax python tests/contract_models.py load DIR

`save` builds one model per case (layer x model style x sequence length),
fits it one epoch (eagerly), and saves it to `DIR/CASE.keras` with its inputs and
outputs (`DIR/CASE.npz`). `load` loads each with `keras.models.load_model`
(no `custom_objects`) and checks that its outputs are the same; any warning
while loading (Keras warns, instead of failing, when it cannot build a
model to restore its weights) is an error. Prints one line per case.
"""

import os
import sys
import warnings

import keras
import numpy as np

import keras_transformer  # noqa: F401  (registers the classes)
from keras_transformer.layers import (
    Decoder,
    DecoderLayer,
    Encoder,
    EncoderLayer,
    MultiHeadAttention,
    PointwiseFeedForward,
    PositionalEncoding,
    SharedEmbedding,
)
from keras_transformer.models import Transformer

D, VOCAB, FIT_LENGTH, OTHER_LENGTH = 8, 30, 5, 7


def _layers():
    """name -> (make the layer, its inputs: "ids" or "x", or two of them)."""
    stack = dict(num_layers=1, num_heads=2, d_ff=16, dropout=0.1, max_length=32)
    return {
        "SharedEmbedding": (lambda: SharedEmbedding(VOCAB, D), ("ids",)),
        "PositionalEncoding": (lambda: PositionalEncoding(max_length=32), ("x",)),
        "PointwiseFeedForward": (lambda: PointwiseFeedForward(16, dropout=0.1), ("x",)),
        "MultiHeadAttention": (
            lambda: MultiHeadAttention(num_heads=2, key_dim=4),
            ("x", "x"),
        ),
        "EncoderLayer": (lambda: EncoderLayer(num_heads=2, d_ff=16), ("x",)),
        "DecoderLayer": (lambda: DecoderLayer(num_heads=2, d_ff=16), ("x", "x")),
        "Encoder": (lambda: Encoder(**stack), ("x",)),
        "Decoder": (lambda: Decoder(**stack), ("x", "x")),
        "Transformer": (
            lambda: Transformer(VOCAB, num_layers=1, d_model=D, num_heads=2, d_ff=16),
            ("ids", "ids"),
        ),
    }


def _input_spec(kind, length):
    if kind == "ids":
        return keras.Input((length,), dtype="int32")
    return keras.Input((length, D))


def _data(kinds, length, seed):
    rng = np.random.default_rng(seed)
    arrays = []
    for kind in kinds:
        if kind == "ids":
            ids = rng.integers(1, VOCAB, size=(4, length)).astype("int32")
            ids[1, -2:] = 0  # padding
            arrays.append(ids)
        else:
            arrays.append(rng.normal(size=(4, length, D)).astype("float32"))
    return arrays


def _apply(layer, inputs):
    if isinstance(layer, keras.Model):  # Transformer: one (source, target) input
        return layer(tuple(inputs))
    return layer(*inputs) if len(inputs) > 1 else layer(inputs[0])


@keras.saving.register_keras_serializable(package="contract")
class Wrapped(keras.Model):
    """A subclassed model without `build`: the layer, called in `call`."""

    def __init__(self, layer_name, **kwargs):
        super().__init__(**kwargs)
        self.layer_name = layer_name
        self.inner = _layers()[layer_name][0]()
        self.out = keras.layers.Dense(3)

    def call(self, inputs):
        inputs = list(inputs) if isinstance(inputs, list | tuple) else [inputs]
        return self.out(_apply(self.inner, inputs))

    def get_config(self):
        return {**super().get_config(), "layer_name": self.layer_name}


@keras.saving.register_keras_serializable(package="contract")
class WrappedWithBuild(Wrapped):
    """The same with an explicit `build`, which builds each sublayer."""

    def build(self, input_shape):
        kinds = _layers()[self.layer_name][1]
        shapes = [input_shape] if len(kinds) == 1 else list(input_shape)
        if len(kinds) == 1:
            self.inner.build(shapes[0])
        elif isinstance(self.inner, keras.Model):  # Transformer
            self.inner.build(tuple(shapes))
        else:
            self.inner.build(*shapes)
        out_shape = (*shapes[0][:-1], D) if kinds[0] == "x" else (*shapes[0], D)
        if isinstance(self.inner, Transformer):
            out_shape = (*shapes[1], VOCAB)
        self.out.build(out_shape)


def cases():
    """name -> (build the model, the input kinds, whether lengths vary)."""
    found = {}
    for name, (make, kinds) in _layers().items():
        for length in (FIT_LENGTH, None):
            tag = "fixed" if length else "variable"

            def functional(make=make, kinds=kinds, length=length):
                inputs = [_input_spec(k, length) for k in kinds]
                y = keras.layers.Dense(3)(_apply(make(), inputs))
                return keras.Model(inputs if len(inputs) > 1 else inputs[0], y)

            found[f"{name}-functional-{tag}"] = (functional, kinds, length is None)
            if len(kinds) == 1 and name != "Transformer":

                def sequential(make=make, kinds=kinds, length=length):
                    return keras.Sequential(
                        [_input_spec(kinds[0], length), make(), keras.layers.Dense(3)]
                    )

                found[f"{name}-sequential-{tag}"] = (sequential, kinds, length is None)
        for style, model_class in (
            ("subclassed", Wrapped),
            ("subclassed-build", WrappedWithBuild),
        ):
            found[f"{name}-{style}"] = (
                lambda name=name, model_class=model_class: model_class(name),
                kinds,
                True,
            )
    return found


def save(directory):
    for i, (case, (build, kinds, varies)) in enumerate(sorted(cases().items())):
        keras.utils.set_random_seed(i)
        model = build()
        model.compile(optimizer="adam", loss="mse")
        x = _data(kinds, FIT_LENGTH, seed=i)
        inputs = x if len(x) > 1 else x[0]
        prediction = model.predict(inputs, verbose=0)
        # One eager epoch: tracing a training step per case was most of this
        # script's time; predictions, here and after reloading, run compiled
        # (compiled training is tested in tests/models and tests/training).
        model.run_eagerly = True
        model.fit(inputs, np.zeros_like(prediction), epochs=1, verbose=0)
        model.run_eagerly = False
        arrays = {f"x{j}": a for j, a in enumerate(x)}
        arrays["y"] = model.predict(inputs, verbose=0)
        if varies:
            other = _data(kinds, OTHER_LENGTH, seed=100 + i)
            arrays.update({f"other{j}": a for j, a in enumerate(other)})
            arrays["other_y"] = model.predict(
                other if len(other) > 1 else other[0], verbose=0
            )
        model.save(os.path.join(directory, f"{case}.keras"))
        np.savez(os.path.join(directory, f"{case}.npz"), **arrays)
        print(f"saved {case}")


def load(directory):
    for case in sorted(cases()):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            model = keras.models.load_model(os.path.join(directory, f"{case}.keras"))
        data = np.load(os.path.join(directory, f"{case}.npz"))
        for prefix, output in (("x", "y"), ("other", "other_y")):
            names = [f"{prefix}{j}" for j in range(3) if f"{prefix}{j}" in data]
            if not names:
                continue
            x = [data[k] for k in names]
            y = model.predict(x if len(x) > 1 else x[0], verbose=0)
            difference = float(np.abs(y - data[output]).max())
            assert difference <= 1e-6, f"{case}: outputs differ by {difference}"
        print(f"reloaded {case}")


if __name__ == "__main__":
    mode, directory = sys.argv[1:3]
    {"save": save, "load": load}[mode](directory)
