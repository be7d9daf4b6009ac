"""The layers and the model on JAX and PyTorch, in processes without TensorFlow."""

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from keras_transformer.models import Transformer

CHECKS = pathlib.Path(__file__).with_name("backend_checks.py")

# Each backend for the CPU, beside (not in) this environment: installed in
# the venv, TensorFlow would import JAX too (tf.lite does when it is there),
# which costs every TensorFlow program 0.8 s of start-up.
PACKAGES = {
    "jax": ("jax==0.10.2", "jaxlib==0.10.2", "scipy"),
    # The CPU build: PyPI has only CUDA builds (several GB); machines of
    # the project's kind keep this wheel where pip finds it.
    "torch": ("torch==2.13.0+cpu", "sympy", "mpmath", "networkx"),
}


@pytest.fixture(scope="session")
def backend_path(tmp_path_factory, request):
    backend = request.param
    target = tmp_path_factory.mktemp(backend)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps"]
        + ["--target", str(target), *PACKAGES[backend]],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if backend == "torch" and "No matching distribution" in result.stderr:
        pytest.skip(
            "pip finds no CPU build of torch 2.13.0 here (PyPI offers only CUDA "
            "builds of several GB); machines of the project's kind have it"
        )
    assert result.returncode == 0, f"pip could not install {backend}: {result.stderr}"
    return backend, target


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
    assert len(lines) == 6, lines
