"""Tests for keras_transformer/__init__.py: importing it sets nothing global.

The `keras-transformer` command, not the import, asks for TensorFlow's
pooled CPU allocator (`cli.use_memory_pool`). Whether TensorFlow then pools
is TensorFlow's business and not promised by it (its allocator reports a
pool on some machines even with `TF_CPU_ALLOCATOR_USE_BFC=false`), so the
tests check the variable we set, not the allocator's behaviour.
"""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_transformer import cli

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


@pytest.mark.parametrize(
    ("setting", "expected"), [(None, "true"), ("false", "false"), ("true", "true")]
)
def test_command_asks_for_the_pool_unless_told_otherwise(
    setting, expected, monkeypatch, capsys
):
    monkeypatch.delenv("TF_CPU_ALLOCATOR_USE_BFC", raising=False)
    if setting is not None:
        monkeypatch.setenv("TF_CPU_ALLOCATOR_USE_BFC", setting)
    assert cli.main([]) == 2  # No command: help, before TensorFlow is imported.
    assert os.environ["TF_CPU_ALLOCATOR_USE_BFC"] == expected
    assert "demo" in capsys.readouterr().out


LOAD_AFTER_TOP_LEVEL_IMPORT = """
import json, sys
import keras_transformer
light = not any(m in sys.modules for m in ("keras", "tensorflow"))
import keras
import numpy as np
model = keras.models.load_model(sys.argv[1])
registered = sorted(
    name.split(">")[1]
    for name in keras.saving.get_custom_objects()
    if name.startswith("keras_transformer>")
)
outputs = np.asarray(model(np.load(sys.argv[2]))).tolist()
print(json.dumps({"light": light, "registered": registered, "outputs": outputs}))
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
    assert report["light"]  # Neither Keras nor TensorFlow imported by it.
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
        "keras_transformer.xla",
        "keras_transformer.layers",
        "keras_transformer.models",
        "keras_transformer.metrics",
        "keras_transformer.data",
        "importlib.reload(keras_transformer)",
    ],
)
def test_every_class_registered_whatever_is_imported_first(first):
    # The classes are imported when Keras is; a module of ours that imports
    # Keras itself must neither find its siblings half-initialized nor leave
    # any class unregistered. A reload must not stack import hooks.
    if first.startswith("importlib"):
        code = f"import importlib, keras_transformer; {first}; "
    else:
        code = f"import {first}; "
    code += (
        "import sys, keras; "
        "print(sorted(keras.saving.get_custom_objects())); "
        "print([type(f).__name__ for f in sys.meta_path])"
    )
    result = subprocess.run(
        [sys.executable, "-W", "error::UserWarning", "-c", code],
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    registered, finders = result.stdout.strip().splitlines()[-2:]
    for name in CLASSES:
        assert f"keras_transformer>{name}" in registered, (name, registered)
    assert "_AfterKerasImport" not in finders


def test_the_private_import_flag_it_relies_on_is_there(tmp_path):
    # `_import_keras_classes` skips while a module of ours is half-imported,
    # which it reads from importlib's private `spec._initializing`. If Python
    # drops the flag, this fails instead of the registration going wrong.
    (tmp_path / "probe_module.py").write_text(
        "import sys\nFLAG = sys.modules[__name__].__spec__._initializing\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        import probe_module
    finally:
        sys.path.pop(0)
    assert probe_module.FLAG is True
    assert probe_module.__spec__._initializing is False
