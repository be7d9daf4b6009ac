"""Test-wide setup: quiet TensorFlow logs and a fixed seed per test."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _seed():
    """Every test starts from the same Keras, NumPy and Python seeds."""
    keras.utils.set_random_seed(1234)
