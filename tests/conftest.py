"""Test-wide setup: quiet logs, two logical CPUs, a fixed seed per test."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

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
