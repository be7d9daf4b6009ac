import json
import math
import os
import pathlib
import re
import subprocess
import sys
import zipfile

import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers import run_layer_checks
from keras import ops

from keras_transformer.layers import SharedEmbedding

B, T, V, D = 2, 4, 11, 8
IDS = np.array([[3, 5, 7, 0], [10, 1, 0, 0]], "int32")
HIDDEN = np.random.default_rng(0).normal(size=(B, T, D)).astype("float32")


def test_standard_checks_embedding(tmp_path):
    run_layer_checks(
        lambda: SharedEmbedding(vocab_size=V, d_model=D),
        IDS,
        tmp_path,
        expected_output_shape=(B, T, D),
    )


def test_standard_checks_reverse(tmp_path):
    run_layer_checks(
        lambda: SharedEmbedding(vocab_size=V, d_model=D),
        HIDDEN,
        tmp_path,
        call_kwargs={"reverse": True},
        expected_output_shape=(B, T, V),
    )


def test_one_matrix_for_embedding_and_projection():
    layer = SharedEmbedding(vocab_size=V, d_model=D, name="emb")
    x = layer(IDS)
    logits = layer(x, reverse=True)
    assert len(layer.weights) == 1 and len(layer.trainable_weights) == 1
    assert layer.weights[0].path == "emb/embeddings"
    u = layer.embeddings.numpy()
    assert u.shape == (V, D)
    # Lookups are scaled by sqrt(D); logits are not.
    np.testing.assert_allclose(np.asarray(x), u[IDS] * math.sqrt(D), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(logits), np.asarray(x) @ u.T, atol=1e-5)
    np.testing.assert_allclose(
        np.asarray(layer(HIDDEN, reverse=True)), HIDDEN @ u.T, atol=1e-5
    )


def test_float_ids_are_cast_as_keras_embedding_does():
    layer = SharedEmbedding(vocab_size=V, d_model=D)
    np.testing.assert_array_equal(
        np.asarray(layer(IDS.astype("float32"))), np.asarray(layer(IDS))
    )


def _masked_mean(x):
    # GlobalAveragePooling1D averages over the positions the Keras mask keeps.
    return np.asarray(keras.layers.GlobalAveragePooling1D()(x))


def test_mask_marks_id_zero_and_logits_carry_none():
    layer = SharedEmbedding(vocab_size=V, d_model=D)
    x = layer(IDS)
    np.testing.assert_array_equal(np.asarray(layer.compute_mask(IDS)), IDS != 0)
    keep = (IDS != 0)[..., None]
    expected = (np.asarray(x) * keep).sum(1) / keep.sum(1)
    np.testing.assert_allclose(_masked_mean(x), expected, rtol=1e-6)
    # `x` carries the mask into the reverse call; the logits drop it.
    logits = layer(x, reverse=True)
    assert layer.compute_mask(x) is None
    np.testing.assert_allclose(
        _masked_mean(logits), np.asarray(logits).mean(1), rtol=1e-5, atol=1e-6
    )


def test_mask_zero_false_gives_no_mask_and_round_trips(tmp_path):
    layer, _ = run_layer_checks(
        lambda: SharedEmbedding(vocab_size=V, d_model=D, mask_zero=False),
        IDS,
        tmp_path,
    )
    x = layer(IDS)
    np.testing.assert_allclose(_masked_mean(x), np.asarray(x).mean(1), rtol=1e-6)
    assert layer.compute_mask(IDS) is None
    assert SharedEmbedding.from_config(layer.get_config()).mask_zero is False


def test_gradients_from_logits_reach_the_single_matrix():
    # loss = sum(R * logits), logits = (s U[ids]) Uᵀ, s = sqrt(D). Then
    # dloss/dU = Rᵀ h (projection) + s * scatter(ids, R U) (lookup), h = s U[ids].
    layer = SharedEmbedding(vocab_size=V, d_model=D)
    layer.build()
    r = np.random.default_rng(1).normal(size=(B, T, V))
    with tf.GradientTape() as tape:
        logits = layer(layer(IDS), reverse=True)
        loss = ops.sum(logits * ops.convert_to_tensor(r, "float32"))
    grads = tape.gradient(loss, layer.trainable_weights)
    assert len(grads) == 1
    grad = ops.convert_to_numpy(ops.convert_to_tensor(grads[0]))
    u, s = layer.embeddings.numpy().astype(np.float64), math.sqrt(D)
    h = s * u[IDS]  # (B, T, D)
    expected = np.einsum("btv,btd->vd", r, h)
    np.add.at(expected, IDS.reshape(-1), s * (r @ u).reshape(-1, D))
    np.testing.assert_allclose(grad, expected, rtol=1e-4, atol=1e-4)


def test_symbolic_reverse_shape_in_functional_model():
    ids = keras.Input((T,), dtype="int32")
    layer = SharedEmbedding(vocab_size=V, d_model=D)
    x = layer(ids)
    logits = layer(x, reverse=True)
    assert tuple(x.shape) == (None, T, D)
    assert tuple(logits.shape) == (None, T, V)
    assert layer.compute_output_shape((None, T, D), reverse=True) == (None, T, V)
    assert layer.compute_output_shape((None, T)) == (None, T, D)
    model = keras.Model(ids, logits)
    assert len(model.weights) == 1
    assert tuple(model(IDS).shape) == (B, T, V)


@pytest.mark.parametrize("name, value", [("vocab_size", 0), ("d_model", -4)])
def test_rejects_bad_sizes(name, value):
    kwargs = {"vocab_size": V, "d_model": D, name: value}
    with pytest.raises(ValueError, match=re.escape(f"{name}={value}")):
        SharedEmbedding(**kwargs)


# The config the previous version (a plain `keras.layers.Layer`) wrote.
OLD_CONFIG = {
    "name": "emb",
    "trainable": True,
    "dtype": "float32",
    "vocab_size": V,
    "d_model": D,
    "embeddings_initializer": {
        "module": "keras.initializers",
        "class_name": "RandomNormal",
        "config": {"seed": None, "mean": 0.0, "stddev": D**-0.5},
        "registered_name": None,
    },
    "mask_zero": False,
}


def test_config_mirrors_the_constructor_and_old_configs_load():
    config = SharedEmbedding(vocab_size=V, d_model=D).get_config()
    assert config["vocab_size"] == V and config["d_model"] == D
    assert config["mask_zero"] is True
    assert not {"input_dim", "output_dim", "tie_weights"} & set(config)
    layer = SharedEmbedding.from_config(OLD_CONFIG)
    assert (layer.vocab_size, layer.d_model, layer.mask_zero) == (V, D, False)
    assert layer.embeddings_initializer.stddev == D**-0.5
    layer.build()
    assert [w.path for w in layer.weights] == ["emb/embeddings"]


def test_keras_file_with_the_old_config_loads_its_weights(tmp_path):
    ids = keras.Input((None,), dtype="int32")
    emb = SharedEmbedding(V, D, mask_zero=False, name="emb")
    model = keras.Model(ids, emb(emb(ids), reverse=True))
    model.save(tmp_path / "new.keras")
    # Rewrite the layer's config as the previous version wrote it; the
    # weights file is unchanged (one variable `embeddings`, stored as vars/0).
    old = tmp_path / "old.keras"
    with (
        zipfile.ZipFile(tmp_path / "new.keras") as src,
        zipfile.ZipFile(old, "w") as dst,
    ):
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename == "config.json":
                config = json.loads(data)
                (layer,) = [x for x in config["config"]["layers"] if x["name"] == "emb"]
                layer["config"] = {**OLD_CONFIG, "dtype": layer["config"]["dtype"]}
                data = json.dumps(config).encode()
            dst.writestr(item, data)
    loaded = keras.models.load_model(old)
    assert set(loaded.get_layer("emb").get_config()) >= set(OLD_CONFIG)
    np.testing.assert_array_equal(np.asarray(loaded(IDS)), np.asarray(model(IDS)))


def test_int8_quantize_keeps_outputs_close_and_scaled():
    layer = SharedEmbedding(vocab_size=V, d_model=D)
    x, logits = np.asarray(layer(IDS)), np.asarray(layer(HIDDEN, reverse=True))
    u = layer.embeddings.numpy()
    layer.quantize("int8")
    assert layer.quantization_mode == "int8"
    assert [(w.name, w.dtype) for w in layer.weights] == [
        ("embeddings", "int8"),
        ("embeddings_scale", "float32"),
    ]
    # int8 rows times one scale per row; the hidden states stay float.
    scale = 127 / np.abs(u).max(-1)
    dequantized = np.round(u * scale[:, None]) / scale[:, None]
    q_x = np.asarray(layer(IDS))
    np.testing.assert_allclose(q_x, dequantized[IDS] * math.sqrt(D), atol=1e-6)
    q_logits = np.asarray(layer(HIDDEN, reverse=True))
    np.testing.assert_allclose(q_logits, HIDDEN @ dequantized.T, atol=1e-5)
    assert np.abs(q_x - x).max() < 0.01 * np.abs(x).max()
    assert np.abs(q_logits - logits).max() < 0.01 * np.abs(logits).max()
    # The padding mask survives quantization.
    np.testing.assert_array_equal(np.asarray(layer.compute_mask(IDS)), IDS != 0)
    keep = (IDS != 0)[..., None]
    np.testing.assert_allclose(
        _masked_mean(layer(IDS)), (q_x * keep).sum(1) / keep.sum(1), rtol=1e-6
    )


def test_quantized_model_saves_and_loads(tmp_path):
    ids = keras.Input((None,), dtype="int32")
    emb = SharedEmbedding(V, D, name="emb")
    x = emb(ids)
    model = keras.Model(ids, [x, emb(keras.layers.Dense(D)(x), reverse=True)])
    float_outputs = [np.asarray(y) for y in model(IDS)]
    model.quantize("int8")
    outputs = [np.asarray(y) for y in model(IDS)]
    np.testing.assert_allclose(outputs[0], float_outputs[0], atol=0.05)
    model.save(tmp_path / "int8.keras")
    loaded = keras.models.load_model(tmp_path / "int8.keras")
    assert loaded.get_layer("emb").dtype_policy.name == "int8_from_float32"
    for y, expected in zip(loaded(IDS), outputs, strict=True):
        np.testing.assert_array_equal(np.asarray(y), expected)


def test_int8_layer_from_an_old_config_quantizes_weights_only():
    # The previous version saved quantized layers without a quantization
    # config; built from one, the layer must compute as it did then.
    quantized = SharedEmbedding(vocab_size=V, d_model=D)
    quantized.build()
    quantized.quantize("int8")
    policy = quantized.get_config()["dtype"]
    old = SharedEmbedding.from_config({**OLD_CONFIG, "dtype": policy})
    old.build()
    old.set_weights(quantized.get_weights())
    for inputs, kwargs in ((IDS, {}), (HIDDEN, {"reverse": True})):
        np.testing.assert_array_equal(
            np.asarray(old(inputs, **kwargs)), np.asarray(quantized(inputs, **kwargs))
        )


def test_quantize_refuses_subclasses_that_may_change_the_call():
    class Scaled(SharedEmbedding):
        def call(self, inputs, reverse=False):
            return 2 * super().call(inputs, reverse=reverse)

    layer = Scaled(vocab_size=V, d_model=D)
    layer.build()
    with pytest.raises(NotImplementedError, match="Scaled"):
        layer.quantize("int8")


def test_lora_adapts_lookups_and_logits_alike():
    layer = SharedEmbedding(vocab_size=V, d_model=D)
    layer.build()
    u = layer.embeddings.numpy()
    layer.enable_lora(2)
    assert [w.name for w in layer.trainable_weights] == [
        "lora_embeddings_a",
        "lora_embeddings_b",
    ]
    layer.lora_embeddings_b.assign(np.ones((2, D), "float32"))
    adapted = u + layer.lora_embeddings_a.numpy() @ np.ones((2, D))
    np.testing.assert_allclose(
        np.asarray(layer(IDS)), adapted[IDS] * math.sqrt(D), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        np.asarray(layer(HIDDEN, reverse=True)), HIDDEN @ adapted.T, atol=1e-5
    )


@keras.saving.register_keras_serializable(package="keras_transformer_tests")
class TiedLanguageModel(keras.Model):
    """A subclassed model with no `build`: Keras builds it on `load_model`."""

    def __init__(self, vocab_size=V, d_model=D, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.embedding = SharedEmbedding(vocab_size, d_model)
        self.hidden = keras.layers.Dense(d_model, activation="relu")

    def call(self, ids):
        return self.embedding(self.hidden(self.embedding(ids)), reverse=True)

    def get_config(self):
        return {
            **super().get_config(),
            "vocab_size": self.vocab_size,
            "d_model": self.d_model,
        }


# Run in a fresh process: loads the model and saves its outputs on IDS.
LOAD_IN_FRESH_PROCESS = """
import sys, warnings
import numpy as np
sys.path[:0] = sys.argv[1:3]
import keras
import test_shared_embedding as t
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    model = keras.models.load_model(sys.argv[3])
np.save(sys.argv[4], keras.ops.convert_to_numpy(model(t.IDS)))
print("\\n".join(str(w.message) for w in caught))
"""


def test_subclassed_model_reloads_its_weights_in_a_fresh_process(tmp_path):
    model = TiedLanguageModel()
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    model.fit(IDS, IDS, epochs=1, verbose=0)
    path = tmp_path / "lm.keras"
    model.save(path)
    expected = np.asarray(model(IDS))

    here = pathlib.Path(__file__).resolve().parent
    result = subprocess.run(
        [sys.executable, "-c", LOAD_IN_FRESH_PROCESS]
        + [str(here), str(here.parent), str(path), str(tmp_path / "out.npy")],
        capture_output=True,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    # Before, Keras could not build the model from its float placeholders,
    # said so in a warning and left the weights random.
    difference = np.max(np.abs(np.load(tmp_path / "out.npy") - expected))
    assert difference < 1e-6, f"{difference=}; load_model warned: {result.stdout}"
    assert "cannot be built automatically" not in result.stdout, result.stdout
