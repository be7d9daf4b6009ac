"""The install steps of docs/backends.md, run as written in a fresh venv."""

import os
import pathlib
import re
import subprocess
import sys

import pytest
from backend_packages import NO_CPU_TORCH, PACKAGES

REPO = pathlib.Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "backends.md"


def _steps(backend):
    """The commands of the "Installing for JAX or PyTorch only" block that
    ends on `KERAS_BACKEND=backend`."""
    text = DOC.read_text()
    section = text.split("## Installing for JAX or PyTorch only", 1)[1]
    section = section.split("\n## ", 1)[0]
    for block in re.findall(r"```bash\n(.*?)```", section, re.S):
        steps = [line.split("  #")[0].strip() for line in block.splitlines() if line]
        if steps[-1].startswith(f"KERAS_BACKEND={backend} "):
            return steps
    raise AssertionError(f"no block for {backend} in {DOC.name}")


def test_the_documented_steps_are_these():
    assert _steps("jax") == [
        'pip install "jax[cpu]"',
        "pip install keras numpy h5py",
        "pip install --no-deps -e .",
        'KERAS_BACKEND=jax python -c "import keras_transformer.layers"',
    ]
    assert _steps("torch") == [
        "pip install torch --index-url https://download.pytorch.org/whl/cpu",
        "pip install keras numpy h5py",
        "pip install --no-deps -e .",
        'KERAS_BACKEND=torch python -c "import keras_transformer.layers"',
    ]


def _install(tmp_path, steps):
    """Runs `steps` in a fresh venv, each quietly; its environment."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    env.pop("KERAS_BACKEND", None)
    for step in steps:
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
            if "torch" in step:
                pytest.skip(NO_CPU_TORCH)
            pytest.skip(f"the package index cannot be reached: {step}")
        assert result.returncode == 0, f"{step}\n{result.stderr[-2000:]}"
        # Quiet: no resolver errors (pip's "dependency conflicts" list).
        assert "ERROR" not in result.stderr, f"{step}\n{result.stderr[-2000:]}"
    return env


def _check_layers(tmp_path, env, backend):
    """The layers work on `backend`, and TensorFlow is not installed."""
    check = (
        "import importlib.util, numpy as np, keras\n"
        "from keras_transformer.layers import Encoder\n"
        "assert importlib.util.find_spec('tensorflow') is None\n"
        "y = Encoder(num_layers=1, num_heads=2, d_ff=8)(np.zeros((1, 3, 4)))\n"
        "print(keras.backend.backend(), tuple(y.shape))\n"
    )
    result = subprocess.run(
        ["python", "-c", check],
        env={**env, "KERAS_BACKEND": backend},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == f"{backend} (1, 3, 4)"


@pytest.mark.slow
@pytest.mark.xdist_group("install")  # both write the checkout's egg-info
def test_a_jax_user_installs_quietly_without_tensorflow(tmp_path):
    env = _install(tmp_path, _steps("jax"))
    _check_layers(tmp_path, env, "jax")


@pytest.mark.slow
@pytest.mark.xdist_group("install")  # both write the checkout's egg-info
def test_a_pytorch_user_installs_quietly_without_tensorflow(tmp_path):
    # The first step is PyTorch as pytorch.org gives it for the machine
    # (download.pytorch.org, out of the test's reach): here the CPU build
    # the backend tests use, from where pip finds it; then the steps as
    # written.
    torch, *rest = _steps("torch")
    assert torch.startswith("pip install torch ")
    env = _install(tmp_path, [f'pip install "{PACKAGES["torch"][0]}"', *rest])
    _check_layers(tmp_path, env, "torch")
