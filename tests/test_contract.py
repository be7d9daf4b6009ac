"""The Keras user's contract, on every backend: every public layer, in every
way Keras users build models, fits, saves to `.keras` and reloads in a fresh
process with the same outputs (`tests/contract_models.py` holds the cases)."""

import os
import pathlib
import subprocess
import sys

import pytest

SCRIPT = pathlib.Path(__file__).with_name("contract_models.py")
LAYERS = {
    # layer: whether it takes one input (so a Sequential model applies)
    "SharedEmbedding": True,
    "PositionalEncoding": True,
    "PointwiseFeedForward": True,
    "MultiHeadAttention": False,
    "EncoderLayer": True,
    "DecoderLayer": False,
    "Encoder": True,
    "Decoder": False,
    "Transformer": False,  # a model itself; wrapped as the others are
}


def _expected_cases():
    cases = []
    for layer, single_input in LAYERS.items():
        styles = ["functional-fixed", "functional-variable"]
        styles += ["subclassed", "subclassed-build"]
        if single_input and layer != "Transformer":
            styles += ["sequential-fixed", "sequential-variable"]
        cases += [f"{layer}-{style}" for style in styles]
    return sorted(cases)


def _run(mode, directory, backend, packages=None):
    env = {**os.environ, "KERAS_BACKEND": backend, "JAX_PLATFORMS": "cpu"}
    if packages is not None:
        paths = [str(packages), os.environ.get("PYTHONPATH")]
        env["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
    result = subprocess.run(
        [sys.executable, str(SCRIPT), mode, str(directory)],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result.stdout.splitlines()


def _check_contract(directory, backend, packages=None):
    saved = _run("save", directory, backend, packages)
    assert saved == [f"saved {case}" for case in _expected_cases()]
    # A fresh process: nothing of the saving one (registrations, names).
    reloaded = _run("load", directory, backend, packages)
    assert reloaded == [f"reloaded {case}" for case in _expected_cases()]


@pytest.mark.slow
def test_every_layer_and_model_style_reloads_on_tensorflow(tmp_path):
    _check_contract(tmp_path, "tensorflow")


@pytest.mark.slow
@pytest.mark.parametrize("backend_path", ["jax", "torch"], indirect=True)
def test_every_layer_and_model_style_reloads(tmp_path, backend_path):
    backend, packages = backend_path
    _check_contract(tmp_path, backend, packages)
