"""benchmarks/snapshot_as_run.py on the tiny run (snapshots at steps 2 and 4)."""

import json

import keras
import numpy as np
import pytest
from helpers import benchmark_script


def _script():
    return benchmark_script("snapshot_as_run")


def _weights(folder):
    return keras.models.load_model(folder / "model.keras", compile=False).get_weights()


def _files(folder):
    return {
        p.relative_to(folder).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in folder.rglob("*")
        if p.is_file()
    }


@pytest.mark.slow
def test_the_copy_ends_with_the_model_the_run_made_of_its_snapshot(run, tmp_path):
    before = _files(run)
    copy = tmp_path / "run_2"
    summary = _script().main(["--run", str(run), "--step", "2", "--output", str(copy)])
    assert summary["steps"] == 2
    assert summary["final_model"]["checkpoints"] == ["ckpt-2"]
    assert json.loads((copy / "summary.json").read_text())["steps"] == 2
    # The finished run turned its step-2 snapshot into the same model.
    expected = _weights(run / "snapshots" / "step_2")
    got = _weights(copy)
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a, b)
    # ...which differs from the model of step 4: the copy did not train on.
    assert any(
        not np.array_equal(a, b) for a, b in zip(got, _weights(run), strict=True)
    )
    assert _files(run) == before  # the copied run is only read
    assert not (tmp_path / "run_2.partial").exists()


@pytest.mark.slow
def test_a_missing_snapshot_and_an_existing_output_are_named(run, tmp_path):
    script = _script()
    with pytest.raises(SystemExit, match=r"--step 3: .* \(snapshots: step_2, step_4\)"):
        script.copy_snapshot(run, 3, tmp_path / "copy")
    (tmp_path / "taken").mkdir()
    with pytest.raises(SystemExit, match="--output .*taken: exists"):
        script.copy_snapshot(run, 2, tmp_path / "taken")
    assert list((tmp_path / "taken").iterdir()) == []
    assert not (tmp_path / "copy").exists()
