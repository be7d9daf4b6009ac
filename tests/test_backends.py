"""The layers and the model on JAX and PyTorch, in processes without TensorFlow."""

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from keras_transformer.models import Transformer

CHECKS = pathlib.Path(__file__).with_name("backend_checks.py")


@pytest.mark.slow
@pytest.mark.parametrize("backend_path", ["jax", "torch"], indirect=True)
def test_backend_without_tensorflow(tmp_path, backend_path):
    backend, packages = backend_path
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

    path = os.pathsep.join(filter(None, [str(packages), os.environ.get("PYTHONPATH")]))
    env = {
        **os.environ,
        "KERAS_BACKEND": backend,
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
    assert lines[0] == f"{backend}: TensorFlow's weights give TensorFlow's logits"
    assert len(lines) == 9, lines
