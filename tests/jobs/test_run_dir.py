"""The run directory: what a run owns, who holds it, what it is known by."""

import json
import os
import signal
import subprocess
import sys
import textwrap

import keras
import pytest
import yaml
from helpers import model_dir_with_code

from keras_transformer.config import config_from_dict
from keras_transformer.jobs.run_dir import (
    LOCK_FILE,
    MANIFEST_FILE,
    RunError,
    UnsafeModelError,
    clear_run,
    foreign_entries,
    load_trained,
    record_entries,
    run_lock,
    run_status,
)


def _files(directory):
    """Every path under `directory`, with the content of each file."""
    return {
        str(p.relative_to(directory)): p.read_bytes() if p.is_file() else None
        for p in sorted(directory.rglob("*"))
    }


def _a_run(out, *extra):
    """A run's files, as the training job leaves them, and its manifest."""
    (out / "checkpoints").mkdir(parents=True)
    (out / "checkpoints" / "ckpt-2.index").write_bytes(b"state")
    (out / "config.yaml").write_text(yaml.safe_dump(config_from_dict({}).to_dict()))
    (out / "model.keras").write_bytes(b"model")
    (out / "summary.json.tmp-123").write_text("{")  # left by a killed run
    names = ("config.yaml", "checkpoints", "model.keras", "summary.json")
    record_entries(out, *names, *extra)


def test_overwrite_removes_the_manifests_entries_and_nothing_else(tmp_path):
    out = tmp_path / "run"
    _a_run(out, "test.en")
    (out / "test.en").write_text("the demo's\n")
    clear_run(out)
    assert not out.exists() or list(out.iterdir()) == []


def test_overwrite_refuses_before_removing_anything(tmp_path):
    out = tmp_path / "run"
    _a_run(out)
    (out / "notes.txt").write_text("mine")
    (out / "test.en").write_text("not written by this run")  # not in its manifest
    before = _files(out)
    with pytest.raises(RunError, match=r"no run wrote \(notes.txt, test.en\)"):
        clear_run(out)
    assert _files(out) == before
    assert foreign_entries(out) == ["notes.txt", "test.en"]


def test_a_run_of_an_earlier_version_owns_what_that_version_wrote(tmp_path):
    out = tmp_path / "run"
    (out / "logs").mkdir(parents=True)
    (out / "config.yaml").write_text("{}\n")
    (out / "test.de").write_text("Hallo\n")  # the demo's
    (out / "notes.txt").write_text("mine")
    assert foreign_entries(out) == ["notes.txt"]
    (out / "notes.txt").unlink()
    clear_run(out)
    assert list(out.iterdir()) == []


def test_a_directory_of_other_files_is_not_a_run(tmp_path):
    (tmp_path / "photo.png").write_bytes(b"png")
    with pytest.raises(RunError, match=r"not a training run's \(photo.png\)"):
        run_status(tmp_path, config_from_dict({}).to_dict())
    with pytest.raises(RunError, match="photo.png"):
        clear_run(tmp_path)
    assert (tmp_path / "photo.png").exists()


def test_a_start_that_wrote_nothing_yet_is_new(tmp_path):
    recipe = config_from_dict({}).to_dict()
    record_entries(tmp_path, "config.yaml", "tokenizer")
    (tmp_path / "config.yaml.tmp-99").write_text("half")
    assert run_status(tmp_path, recipe) == "new"
    (tmp_path / "tokenizer").mkdir()
    with pytest.raises(RunError, match="incomplete run"):
        run_status(tmp_path, recipe)


@pytest.mark.parametrize(
    "spelling",
    [
        lambda run, cwd: "run",
        lambda run, cwd: "run/",
        lambda run, cwd: "./run//",
        lambda run, cwd: str(run),
        lambda run, cwd: str(run) + "/",
        lambda run, cwd: os.path.join("..", cwd.name, "run"),
    ],
    ids=["relative", "slash", "dotted", "absolute", "absolute-slash", "parent"],
)
def test_a_run_is_the_same_however_its_path_is_spelled(tmp_path, monkeypatch, spelling):
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    written = config_from_dict({"output_dir": str(run)}).to_dict()
    (run / "config.yaml").write_text(yaml.safe_dump(written))
    (run / "summary.json").write_text(json.dumps({"finished": True, "steps": 2}))
    path = spelling(run, tmp_path)
    recipe = config_from_dict({"output_dir": path}).to_dict()
    assert run_status(path, recipe) == "finished"


def test_a_moved_run_is_the_same_run(tmp_path):
    written = config_from_dict({"output_dir": "runs/old"}).to_dict()
    moved = tmp_path / "elsewhere" / "new"
    moved.mkdir(parents=True)
    (moved / "config.yaml").write_text(yaml.safe_dump(written))
    recipe = config_from_dict({"output_dir": str(moved)}).to_dict()
    assert run_status(moved, recipe) == "resume"
    # The paths of its inputs are compared as paths, too.
    recipe["tokenizer"]["path"] = "tok/"
    written["tokenizer"]["path"] = "./tok"
    (moved / "config.yaml").write_text(yaml.safe_dump(written))
    assert run_status(moved, recipe) == "resume"
    # A different input is another recipe.
    recipe["tokenizer"]["path"] = "other"
    with pytest.raises(RunError, match="tokenizer.path: '.*tok' there, '.*other' here"):
        run_status(moved, recipe)


@pytest.mark.parametrize("saved_absolute", [True, False], ids=["abs-rel", "rel-abs"])
def test_an_input_is_the_same_however_its_path_is_spelled(
    tmp_path, monkeypatch, saved_absolute
):
    """A run's data, named relative to here or from the root, is one input."""
    monkeypatch.chdir(tmp_path / "..")
    data = tmp_path / "data"
    relative = os.path.join(tmp_path.name, "data")
    run = tmp_path / "run"
    run.mkdir()
    saved, given = (str(data), relative) if saved_absolute else (relative, str(data))
    written = config_from_dict({"data": {"data_dir": saved}}).to_dict()
    (run / "config.yaml").write_text(yaml.safe_dump(written))
    recipe = config_from_dict({"data": {"data_dir": given}}).to_dict()
    assert run_status(run, recipe) == "resume"
    recipe["data"]["data_dir"] = str(tmp_path / "other")
    with pytest.raises(RunError, match="data.data_dir: .*data.* there"):
        run_status(run, recipe)


def test_the_lock_is_created_released_and_reentrant(tmp_path):
    out = tmp_path / "a" / "run"
    with run_lock(out):
        holder = json.loads((out / LOCK_FILE).read_text())
        assert holder["pid"] == os.getpid()
        with run_lock(str(out) + "/"):  # the same directory, in this process
            pass
        assert (out / LOCK_FILE).exists()
        (out / "config.yaml").write_text("{}")
    assert not (out / LOCK_FILE).exists()
    assert (out / "config.yaml").exists()
    # A start that wrote nothing leaves no directory behind, nor its parents.
    with pytest.raises(KeyError), run_lock(tmp_path / "b" / "c"):
        raise KeyError("a check failed")
    assert not (tmp_path / "b").exists()


HOLDER = textwrap.dedent(
    """
    import sys, time
    from keras_transformer.jobs.run_dir import run_lock
    with run_lock(sys.argv[1]):
        print("locked", flush=True)
        time.sleep(600)
    """
)


def test_a_second_process_is_refused_with_the_holders_name(tmp_path, capsys):
    from keras_transformer import cli

    out = tmp_path / "run"
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump({"output_dir": str(out)}))
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(out)],
        stdout=subprocess.PIPE,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    try:
        assert holder.stdout.readline() == b"locked\n"
        before = _files(tmp_path)
        assert cli.main(["train", "--config", str(recipe)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1, err
        assert f"is in use by another process (pid {holder.pid} on " in err[0]
        assert _files(tmp_path) == before
    finally:
        # kill -9: the kernel releases the lock with the process.
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    assert not (out / MANIFEST_FILE).exists()
    with run_lock(out):
        assert json.loads((out / LOCK_FILE).read_text())["pid"] == os.getpid()


def test_a_model_that_holds_code_is_refused_before_the_code_runs(tmp_path):
    marker = tmp_path / "ran"
    model_dir = model_dir_with_code(tmp_path / "model", marker)
    with pytest.raises(UnsafeModelError) as refused:
        load_trained(model_dir)
    message = str(refused.value)
    assert message.startswith(f"Not loading {model_dir / 'model.keras'}: ")
    assert "Keras's safe mode" in message and "`Lambda` layer" in message
    assert "corrupt" not in message and "\n" not in message
    assert not marker.exists()
    # The marker does tell: outside safe mode, loading runs the code.
    keras.models.load_model(model_dir / "model.keras", safe_mode=False)
    assert marker.read_text() == "ran"


def test_a_damaged_model_is_still_called_corrupt(tmp_path):
    (tmp_path / "tokenizer").mkdir()
    (tmp_path / "model.keras").write_bytes(b"not a zip file")
    with pytest.raises(ValueError, match="it looks corrupt") as refused:
        load_trained(tmp_path)
    assert not isinstance(refused.value, UnsafeModelError)
