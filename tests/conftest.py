"""Test-wide setup: quiet logs, two logical CPUs, a fixed seed per test."""

import atexit
import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# The key that signs exported translators (keras_transformer.jobs.trust):
# the tests' own, for this process and the commands it starts; removed
# when the process ends.
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="keras_transformer_config_")
atexit.register(shutil.rmtree, os.environ["XDG_CONFIG_HOME"], ignore_errors=True)

import pytest  # noqa: E402
from backend_packages import NO_CPU_TORCH, PACKAGES  # noqa: E402


@contextlib.contextmanager
def _stderr_to_devnull():
    """TensorFlow writes its start-up lines (oneDNN, the CUDA probe) to file
    descriptor 2 before its logging reads TF_CPP_MIN_LOG_LEVEL. In a
    pytest-xdist worker that descriptor is the main process's capture, which
    prints them after the run's summary; here they go nowhere (an error
    still raises, and prints once the descriptor is back)."""
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


with _stderr_to_devnull():
    import keras
    import tensorflow as tf

    # Two logical CPUs, so MirroredStrategy tests have two replicas. Possible
    # only before TensorFlow initialises its devices, hence here, before any
    # test runs; ops without a strategy still run on the first device.
    _cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        _cpu, [tf.config.LogicalDeviceConfiguration()] * 2
    )


@pytest.fixture(autouse=True)
def _seed():
    """Every test starts from the same Keras, NumPy and Python seeds."""
    keras.utils.set_random_seed(1234)


def _install(backend, tmp_path_factory):
    """The backend's pinned packages, in a folder for `PYTHONPATH`.

    Installed once a run: the folder lies beside the per-worker temporary
    folders of pytest-xdist, and a lock keeps the other workers waiting
    until the first has installed it (or has found that it cannot).
    """
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # common to every worker of this run
    target = shared / f"packages-{backend}"
    with open(shared / f"packages-{backend}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        done = shared / f"packages-{backend}.done"
        if done.exists():
            outcome = done.read_text()
            if outcome != "installed":
                pytest.skip(outcome)
            return target
        result = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps"]
            + ["--target", str(target), *PACKAGES[backend]],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if backend == "torch" and "No matching distribution" in result.stderr:
            done.write_text(NO_CPU_TORCH)
            pytest.skip(NO_CPU_TORCH)
        assert result.returncode == 0, (
            f"pip could not install {backend}: {result.stderr}"
        )
        done.write_text("installed")
    return target


# One fixture per backend, so each installs once a session (one fixture
# parametrized over both would install again whenever the backend changes).
@pytest.fixture(scope="session")
def jax_packages(tmp_path_factory):
    return _install("jax", tmp_path_factory)


@pytest.fixture(scope="session")
def torch_packages(tmp_path_factory):
    return _install("torch", tmp_path_factory)


@pytest.fixture
def backend_path(request):
    """(backend, the folder holding its packages); parametrized indirectly."""
    backend = request.param
    return backend, request.getfixturevalue(f"{backend}_packages")
