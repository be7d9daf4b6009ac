"""Keras's own tests of `keras.layers.MultiHeadAttention`, run on ours.

The test file ships in the installed Keras wheel. It is read from there, every
`layers.MultiHeadAttention` is replaced by ours, and the result runs with
pytest in a fresh process: the yardstick of "drop-in". All of its tests must
pass (Keras 3.15: 48, and 2 flash-attention tests that skip on TensorFlow, as
they do for Keras's own layer).
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import keras
import pytest

KERAS_TESTS = (
    Path(keras.__file__).parent / "src/layers/attention/multi_head_attention_test.py"
)


@pytest.mark.slow
def test_keras_tests_pass_with_our_layer_swapped_in(tmp_path):
    source = KERAS_TESTS.read_text(encoding="utf-8")
    assert source.count("layers.MultiHeadAttention") > 40  # Still the same file.
    swapped = "from keras_transformer.layers import MultiHeadAttention as _Ours\n"
    swapped += source.replace("layers.MultiHeadAttention", "_Ours")
    (tmp_path / "test_keras_mha_swapped.py").write_text(swapped, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider"]
        + ["test_keras_mha_swapped.py"],
        cwd=tmp_path,  # Not under our tests/: their conftest does not apply.
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    passed = re.findall(r"^PASSED \S+::(\w+)", result.stdout, re.MULTILINE)
    failed = re.findall(r"^(?:FAILED|ERROR) \S+", result.stdout, re.MULTILINE)
    assert not failed and result.returncode == 0, result.stdout[-3000:]
    assert len(passed) >= 48, result.stdout[-3000:]
