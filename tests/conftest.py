"""Test-wide setup: quiet logs, two logical CPUs, a fixed seed per test."""

import os
import subprocess
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# The key that signs exported translators (keras_transformer.jobs.trust):
# the tests' own, for this process and the commands it starts.
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="keras_transformer_config_")

import keras  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
from backend_packages import NO_CPU_TORCH, PACKAGES  # noqa: E402

# Two logical CPUs, so MirroredStrategy tests have two replicas. Possible only
# before TensorFlow initialises its devices, hence here, before any test runs;
# ops without a strategy still run on the first device.
_cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    _cpu, [tf.config.LogicalDeviceConfiguration()] * 2
)


@pytest.fixture(autouse=True)
def _seed():
    """Every test starts from the same Keras, NumPy and Python seeds."""
    keras.utils.set_random_seed(1234)


def _install(backend, tmp_path_factory):
    """The backend's pinned packages, in a folder for `PYTHONPATH`."""
    target = tmp_path_factory.mktemp(backend)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps"]
        + ["--target", str(target), *PACKAGES[backend]],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if backend == "torch" and "No matching distribution" in result.stderr:
        pytest.skip(NO_CPU_TORCH)
    assert result.returncode == 0, f"pip could not install {backend}: {result.stderr}"
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
