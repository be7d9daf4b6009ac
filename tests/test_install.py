"""The install steps of docs/backends.md, run as written in a fresh venv."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "backends.md"


def _steps():
    """The commands of the "Installing for JAX or PyTorch only" block."""
    text = DOC.read_text()
    section = text.split("## Installing for JAX or PyTorch only", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line.split("  #")[0].strip() for line in block.splitlines() if line]


def test_the_documented_steps_are_these():
    assert _steps() == [
        'pip install keras numpy h5py "jax[cpu]"',
        "pip install --no-deps -e .",
        'KERAS_BACKEND=jax python -c "import keras_transformer.layers"',
    ]


@pytest.mark.slow
def test_a_jax_user_installs_quietly_without_tensorflow(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    env.pop("KERAS_BACKEND", None)
    for step in _steps():
        result = subprocess.run(
            step,
            shell=True,
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        if "pip install" in step and "No matching distribution" in result.stderr:
            pytest.skip(f"the package index cannot be reached: {step}")
        assert result.returncode == 0, f"{step}\n{result.stderr[-2000:]}"
        # Quiet: no resolver errors (pip's "dependency conflicts" list).
        assert "ERROR" not in result.stderr, f"{step}\n{result.stderr[-2000:]}"
    # The layers work there, and TensorFlow is not installed.
    check = (
        "import importlib.util, numpy as np, keras\n"
        "from keras_transformer.layers import Encoder\n"
        "assert importlib.util.find_spec('tensorflow') is None\n"
        "y = Encoder(num_layers=1, num_heads=2, d_ff=8)(np.zeros((1, 3, 4)))\n"
        "print(keras.backend.backend(), tuple(y.shape))\n"
    )
    result = subprocess.run(
        ["python", "-c", check],
        env={**env, "KERAS_BACKEND": "jax"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "jax (1, 3, 4)"
