"""Every tutorial notebook runs top to bottom, in fast mode, without errors.

Each notebook runs in a fresh kernel started with the interpreter running the
tests (so it imports the `keras_transformer` under test, and works in a fresh
virtual environment without any installed kernelspec), in the notebook's own
folder, with `KERAS_TRANSFORMER_FAST=1`. The executed notebook is not written
back: the stored outputs come from `notebooks/run_notebooks.py`.
"""

import json
import sys
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
KERNEL_NAME = "keras-transformer-tests"

# Runs first in the kernel: fails unless it is this interpreter and imports
# the package from this checkout.
CHECK_KERNEL = f"""\
import sys
import keras_transformer
assert sys.prefix == {sys.prefix!r}, sys.prefix
assert keras_transformer.__file__.startswith({str(ROOT)!r}), keras_transformer.__file__
"""


def _kernel_manager(kernels_dir):
    spec_dir = kernels_dir / KERNEL_NAME
    spec_dir.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    spec = {"argv": argv, "display_name": "Python 3", "language": "python"}
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    specs = KernelSpecManager(
        kernel_dirs=[str(kernels_dir)], ensure_native_kernel=False
    )
    return AsyncKernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=specs)


def test_notebooks_exist():
    assert NOTEBOOKS, "no notebooks found in notebooks/"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_is_stored_executed(path):
    """Readers see the outputs: every code cell ran, in order, without error."""
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    counts = [cell.execution_count for cell in code]
    assert counts == list(range(1, len(code) + 1)), (
        f"{path.name} is not stored as run top to bottom once (execution counts "
        f"{counts}); run: python notebooks/run_notebooks.py {path.name}"
    )
    errors = [
        out for cell in code for out in cell.outputs if out.output_type == "error"
    ]
    assert not errors, f"{path.name} is stored with an error output"


@pytest.mark.slow
# One worker runs them all, in order: notebooks 6 and 7 load the model that
# notebook 5 saves (and would train it themselves, into the same folder).
# The folder is the worker's own, outside the repository: no other worker, nor
# another test run in this checkout (or a killed one's leftovers), reaches it.
@pytest.mark.xdist_group("notebooks")
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_runs(path, tmp_path, tmp_path_factory, monkeypatch):
    model_dir = tmp_path_factory.getbasetemp() / "tutorial_model"
    monkeypatch.setenv("KERAS_TRANSFORMER_TUTORIAL_DIR", str(model_dir))
    monkeypatch.setenv("KERAS_TRANSFORMER_FAST", "1")
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(CHECK_KERNEL))
    client = NotebookClient(
        nb,
        km=_kernel_manager(tmp_path / "kernels"),
        timeout=600,
        record_timing=False,
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()  # raises CellExecutionError on the first failing cell
    if path.name == "05_training.ipynb":  # It saved where it was told to.
        assert (model_dir / "model.keras").is_file()
        assert (model_dir / "info.json").is_file()
