"""Tests for keras_transformer/__init__.py: a plain import of the Keras classes.

`import keras_transformer` imports the modules that define (and register)
its Keras classes, whichever module of ours is imported first, imports no
TensorFlow on the JAX backend, and sets no environment variable: the
`keras-transformer` command, not the import, asks for TensorFlow's pooled
CPU allocator (tests/test_cli.py).
"""

import importlib.util
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

# TensorFlow and Keras first: what they set on import (TensorFlow imports
# JAX where it is installed, which sets TPU_SKIP_MDS_QUERY) is not ours.
SCRIPT = """
import os
import keras
import tensorflow
before = dict(os.environ)
import keras_transformer
import keras_transformer.layers
print(sorted(set(os.environ.items()) ^ set(before.items())))
"""


def test_import_sets_no_environment_variable():
    env = {k: v for k, v in os.environ.items() if k != "TF_CPU_ALLOCATOR_USE_BFC"}
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env={**env, "TF_CPP_MIN_LOG_LEVEL": "3"},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    assert result.stdout.strip().splitlines()[-1] == "[]"


LOAD_AFTER_TOP_LEVEL_IMPORT = """
import json, sys
import keras_transformer
import keras
import numpy as np
model = keras.models.load_model(sys.argv[1])
registered = sorted(
    name.split(">")[1]
    for name in keras.saving.get_custom_objects()
    if name.startswith("keras_transformer>")
)
outputs = np.asarray(model(np.load(sys.argv[2]))).tolist()
print(json.dumps({"registered": registered, "outputs": outputs}))
"""


def test_keras_file_loads_after_the_top_level_import_alone(tmp_path):
    from keras_transformer.layers import Encoder, SharedEmbedding

    ids = keras.Input((None,), dtype="int32")
    embedding = SharedEmbedding(vocab_size=20, d_model=8)
    hidden = Encoder(num_layers=1, num_heads=2, d_ff=16, max_length=8)(embedding(ids))
    model = keras.Model(ids, embedding(hidden, reverse=True))
    batch = np.array([[3, 4, 5, 0]], "int32")
    model.save(tmp_path / "model.keras")
    np.save(tmp_path / "batch.npy", batch)
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            LOAD_AFTER_TOP_LEVEL_IMPORT,
            str(tmp_path / "model.keras"),
            str(tmp_path / "batch.npy"),
        ],
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    for name in ("Transformer", "MaskedCrossEntropy", "Perplexity", "Encoder"):
        assert name in report["registered"], report["registered"]
    np.testing.assert_allclose(
        np.array(report["outputs"]), np.asarray(model(batch)), atol=1e-6
    )


CLASSES = ("SharedEmbedding", "Transformer", "MaskedCrossEntropy", "Perplexity")
CLASSES += ("TransformerSchedule",)


@pytest.mark.parametrize(
    "first",
    [
        "keras_transformer.layers",
        "keras_transformer.models",
        "keras_transformer.metrics",
        "keras_transformer.data",
    ],
)
def test_every_class_registered_whatever_is_imported_first(first):
    # Any module of ours runs the package's `__init__` first; none may find
    # a sibling half-imported (a circular import) or leave a class out.
    code = (
        f"import {first}; import keras; "
        "print(sorted(keras.saving.get_custom_objects()))"
    )
    result = subprocess.run(
        [sys.executable, "-W", "error::UserWarning", "-c", code],
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    registered = result.stdout.strip().splitlines()[-1]
    for name in CLASSES:
        assert f"keras_transformer>{name}" in registered, (name, registered)


NO_TENSORFLOW = """
import sys
import keras_transformer
import keras
print(keras.backend.backend())
print(sorted(m for m in sys.modules if m.split(".")[0].startswith("tensorflow")))
"""


@pytest.mark.skipif(
    importlib.util.find_spec("jax") is None,
    reason="JAX is not installed in this environment (tests/test_backends.py "
    "installs it beside it and runs the layers there with TensorFlow blocked)",
)
def test_the_import_on_jax_imports_no_tensorflow():
    result = subprocess.run(
        [sys.executable, "-c", NO_TENSORFLOW],
        env={**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["jax", "[]"], result.stdout
