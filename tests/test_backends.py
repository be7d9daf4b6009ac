"""The layers and the model on the JAX backend, in a process without TensorFlow."""

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from keras_transformer.models import Transformer

CHECKS = pathlib.Path(__file__).with_name("backend_checks.py")

# JAX for the CPU, beside (not in) this environment: installed in the venv,
# TensorFlow would import it too (tf.lite does when it is there), which costs
# every TensorFlow program 0.8 s of start-up.
JAX = ("jax==0.10.2", "jaxlib==0.10.2", "scipy")


@pytest.fixture(scope="session")
def jax_path(tmp_path_factory):
    target = tmp_path_factory.mktemp("jax")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps"]
        + ["--target", str(target), *JAX],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, f"pip could not install {JAX}: {result.stderr}"
    return target


@pytest.mark.slow
def test_jax_backend_without_tensorflow(tmp_path, jax_path):
    # Weights saved by the TensorFlow backend, with the logits they give.
    sys.path.insert(0, str(CHECKS.parent))
    try:
        import backend_checks as checks
    finally:
        sys.path.pop(0)
    model = checks.tiny_transformer()
    logits = model((checks.SOURCE, checks.TARGET))
    model.save_weights(tmp_path / "model.weights.h5")
    np.savez(tmp_path / "expected.npz", logits=np.asarray(logits))
    assert isinstance(model, Transformer)

    path = os.pathsep.join(filter(None, [str(jax_path), os.environ.get("PYTHONPATH")]))
    env = {
        **os.environ,
        "KERAS_BACKEND": "jax",
        "JAX_PLATFORMS": "cpu",
        "PYTHONPATH": path,
    }
    result = subprocess.run(
        [sys.executable, str(CHECKS), str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0] == "jax: TensorFlow's weights give TensorFlow's logits"
    assert len(lines) == 6, lines
