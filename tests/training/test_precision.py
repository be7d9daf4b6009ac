"""Tests for keras_transformer.training.set_mixed_precision."""

import keras
import pytest

from keras_transformer.training import set_mixed_precision
from keras_transformer.training.precision import (
    auto_policy,
    cpu_flags,
    cpu_precision_warning,
)


@pytest.fixture(autouse=True)
def _restore_policy():
    yield
    keras.mixed_precision.set_dtype_policy("float32")


@pytest.mark.parametrize(
    "policy, compute_dtype",
    [
        ("float32", "float32"),
        ("mixed_float16", "float16"),
        ("mixed_bfloat16", "bfloat16"),
    ],
)
def test_sets_the_global_policy(policy, compute_dtype):
    set_mixed_precision(policy)
    assert keras.mixed_precision.dtype_policy().name == policy
    layer = keras.layers.Dense(2)
    assert (layer.compute_dtype, layer.variable_dtype) == (compute_dtype, "float32")


@pytest.mark.parametrize("policy", ["float16", "bfloat16", "mixed_float32", "fp16"])
def test_unknown_policy_is_named_and_nothing_changes(policy):
    set_mixed_precision("mixed_bfloat16")
    with pytest.raises(ValueError, match=f"policy='{policy}'"):
        set_mixed_precision(policy)
    assert keras.mixed_precision.dtype_policy().name == "mixed_bfloat16"


CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
flags\t\t: fpu sse2 avx2 fma avx512f avx512_bf16
bugs\t\t: sysret_ss_attrs

processor\t: 1
flags\t\t: fpu sse2 avx2 fma avx512f avx512_bf16
"""


def test_cpu_flags_reads_the_flags_line(tmp_path):
    (tmp_path / "cpuinfo").write_text(CPUINFO)
    flags = cpu_flags(tmp_path / "cpuinfo")
    assert flags == {"fpu", "sse2", "avx2", "fma", "avx512f", "avx512_bf16"}


def test_cpu_flags_is_none_where_the_cpu_cannot_tell(tmp_path):
    assert cpu_flags(tmp_path / "absent") is None
    (tmp_path / "cpuinfo").write_text("processor\t: 0\nmodel name\t: M1\n")
    assert cpu_flags(tmp_path / "cpuinfo") is None


@pytest.mark.parametrize(
    "policy, gpus, flags, names",
    [
        ("mixed_bfloat16", 0, {"avx2", "fma"}, "avx512_bf16 or amx_bf16"),
        ("mixed_bfloat16", 0, {"avx512f", "avx512_fp16"}, "avx512_bf16 or amx_bf16"),
        ("mixed_float16", 0, {"avx512f", "avx512_bf16"}, "avx512_fp16 or amx_fp16"),
        ("mixed_bfloat16", 0, {"avx512_bf16"}, None),
        ("mixed_bfloat16", 0, {"amx_bf16"}, None),
        ("mixed_float16", 0, {"amx_fp16"}, None),
        ("mixed_bfloat16", 1, {"avx2"}, None),  # a GPU computes
        ("mixed_float16", 2, {"avx2"}, None),
        ("mixed_bfloat16", 0, None, None),  # flags unknown: nothing said
        ("float32", 0, {"avx2"}, None),
    ],
)
def test_cpu_precision_warning(policy, gpus, flags, names):
    flags = None if flags is None else frozenset(flags)
    warning = cpu_precision_warning(policy, gpus, flags)
    if names is None:
        assert warning is None
    else:
        assert warning.startswith(
            f"training.mixed_precision: {policy} on a CPU without {names} instructions"
        )


@pytest.mark.parametrize(
    "gpus, flags, policy",
    [
        ([], {"avx2", "fma"}, "float32"),  # Zen 2 and 3: converted in software
        ([], {"avx512f", "avx512_fp16"}, "float32"),
        ([], None, "float32"),  # flags unknown
        ([], {"avx512f", "avx512_bf16"}, "mixed_bfloat16"),  # Zen 4
        ([], {"amx_bf16"}, "mixed_bfloat16"),  # Xeon with AMX
        ([(8, 0)], {"avx2"}, "mixed_bfloat16"),  # a GPU computes: A100
        ([(9, 0), (8, 6)], None, "mixed_bfloat16"),
        ([(7, 0)], {"avx512_bf16"}, "float32"),  # V100: no bfloat16 units
        ([(9, 0), (7, 5)], None, "float32"),  # every GPU must have them
        ([None], {"amx_bf16"}, "float32"),  # capability unknown
    ],
)
def test_auto_policy(gpus, flags, policy):
    flags = None if flags is None else frozenset(flags)
    chosen, why = auto_policy(gpus, flags)
    assert chosen == policy and why
