"""Tests for keras_transformer/__init__.py: the CPU memory pool it turns on."""

import os
import subprocess
import sys

import pytest

# Whether TensorFlow's CPU allocator keeps statistics: only its pooling
# (BFC) allocator does; the default one raises.
SCRIPT = """
import keras_transformer
import tensorflow as tf

x = tf.ones((1000, 1000)) + 1.0
try:
    info = tf.config.experimental.get_memory_info("CPU:0")
except ValueError:
    print("no pool")
else:
    print("pool", info["peak"] >= 4_000_000)
"""


@pytest.mark.parametrize(
    ("setting", "expected"),
    [(None, "pool True"), ("false", "no pool"), ("true", "pool True")],
)
def test_import_turns_the_pool_on_unless_told_otherwise(setting, expected):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPU_ALLOCATOR_USE_BFC"}
    if setting is not None:
        env["TF_CPU_ALLOCATOR_USE_BFC"] = setting
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    assert result.stdout.strip().splitlines()[-1] == expected
