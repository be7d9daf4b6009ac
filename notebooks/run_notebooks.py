"""Executes the tutorial notebooks in place, so their stored outputs are fresh.

Run from the repository root with the project's virtual environment:

    .venv/bin/python notebooks/run_notebooks.py                  # all, normal mode
    .venv/bin/python notebooks/run_notebooks.py 02_attention.ipynb
    KERAS_TRANSFORMER_FAST=1 .venv/bin/python notebooks/run_notebooks.py
    .venv/bin/python notebooks/run_notebooks.py --no-write       # times only

Each notebook runs top to bottom in a fresh kernel started with this
interpreter (so the installed `keras_transformer` is the one imported), in its
own folder, and is written back with its outputs. The first code cell of every
notebook prints the mode, so readers know which mode produced the outputs.
TensorFlow's start-up lines on stderr (oneDNN, CUDA, absl, which
`TF_CPP_MIN_LOG_LEVEL` does not silence) and SentencePiece's note that it
normalizes nothing are left out of the stored outputs.
The tests (`tests/test_notebooks.py`) run the same notebooks in fast mode
without writing them back.
"""

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parent
KERNEL_NAME = "keras-transformer-notebooks"
# Log lines that are not the notebook's: TensorFlow's start-up lines, written
# to stderr before any Python runs or at its first op (the CUDA probe of a
# machine without a GPU), and SentencePiece's normalization note (tokenizers
# trained before it was avoided).
STARTUP_NOISE = re.compile(
    r"^(WARNING: All log messages before absl::InitializeLog\(\) is called.*"
    r"|[IWE]\d{4} [\d:. ]+\d+ (port|cudart_stub|cpu_feature_guard|cuda_platform)"
    r"\.cc:\d+\].*"
    r"|normalizer\.cc\(\d+\) LOG\(INFO\) precompiled_charsmap is empty\..*)$\n?",
    re.MULTILINE,
)


def kernel_manager(kernels_dir):
    """A kernel manager whose only kernel runs `sys.executable`."""
    spec_dir = Path(kernels_dir) / KERNEL_NAME
    spec_dir.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    spec = {"argv": argv, "display_name": "Python 3", "language": "python"}
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    specs = KernelSpecManager(
        kernel_dirs=[str(kernels_dir)], ensure_native_kernel=False
    )
    return AsyncKernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=specs)


def execute(path, kernels_dir, timeout=1800):
    """Runs one notebook and returns it with its outputs (the file is unchanged)."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        km=kernel_manager(kernels_dir),
        timeout=timeout,
        record_timing=False,
        resources={"metadata": {"path": str(Path(path).parent)}},
    )
    client.execute()
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [out for out in map(_drop_noise, cell.outputs) if out]
    return nb


def _drop_noise(output):
    if output.output_type == "stream" and output.name == "stderr":
        output.text = STARTUP_NOISE.sub("", output.text)
        if not output.text.strip():
            return None
    return output


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="notebook file names (default: all)")
    parser.add_argument(
        "--no-write",
        action="store_true",
        help="run and time them, but leave the stored outputs as they are",
    )
    args = parser.parse_args(argv)
    paths = [NOTEBOOKS / name for name in args.names] or sorted(
        NOTEBOOKS.glob("*.ipynb")
    )
    mode = "fast" if os.environ.get("KERAS_TRANSFORMER_FAST") == "1" else "normal"
    with tempfile.TemporaryDirectory() as kernels_dir:
        for path in paths:
            start = time.perf_counter()
            nb = execute(path, kernels_dir)
            seconds = time.perf_counter() - start
            if not args.no_write:
                nbformat.write(nb, path)
            print(f"{path.name}: {seconds:.0f} s ({mode} mode)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
