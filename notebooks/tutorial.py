"""The tutorial model that notebooks 5, 6 and 7 share.

Notebook 5 trains a small Transformer and saves it in `MODEL_DIR` with the
public API (`model.save`, `Tokenizer.save`); notebooks 6 and 7 load it, so a
reader waits for training once and every later notebook talks about the same
model. When the saved model is missing, or was made by another version of
notebook 5, `load_model` runs notebook 5 first, in a kernel of its own,
without writing to its file. Fast mode (`KERAS_TRANSFORMER_FAST=1`, used by
the tests) keeps its model in a folder of its own, so a model trained for
seconds never stands in for the real one. Delete the folder to train again.
The tests give each of their processes a folder of its own, outside the
repository (`KERAS_TRANSFORMER_TUTORIAL_DIR`).

The data is Multi30k (English-German image captions): `load_corpus` reads a
copy beside the repository when there is one (`../shared/data/multi30k`, as
the tests and benchmarks do), else downloads it on first use into
`keras_transformer.data.default_cache_dir()`. Without a copy or a network it
says so and falls back to the package's built-in corpus.
"""

import ast
import hashlib
import inspect
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import keras

from keras_transformer import data

NOTEBOOKS = Path(__file__).resolve().parent
FAST = os.environ.get("KERAS_TRANSFORMER_FAST", "0") == "1"
MODEL_DIR_VARIABLE = "KERAS_TRANSFORMER_TUTORIAL_DIR"
MODEL_DIR = Path(
    os.environ.get(
        MODEL_DIR_VARIABLE,
        NOTEBOOKS / ("tutorial_model_fast" if FAST else "tutorial_model"),
    )
)
TRAINING_NOTEBOOK = NOTEBOOKS / "05_training.ipynb"
LOCAL_MULTI30K = NOTEBOOKS.parent.parent / "shared" / "data" / "multi30k"
MULTI30K_SPLITS = {"train": "train", "val": "val", "test": "test_2016_flickr"}


def load_corpus(split, corpus="multi30k"):
    """English-German pairs of `split` ("train", "val" or "test").

    Args:
        split: which split.
        corpus: "multi30k", or "builtin" for `data.builtin_corpus`.

    Returns:
        A `data.ParallelCorpus`: Multi30k's, or the built-in corpus's when
        Multi30k can be neither found nor downloaded (with a message).
    """
    if corpus == "multi30k":
        name = MULTI30K_SPLITS[split]
        try:
            if LOCAL_MULTI30K.is_dir():
                return data.load_multi30k(name, LOCAL_MULTI30K, download=False)
            return data.load_multi30k(name)
        except OSError as error:
            print(
                f"Multi30k is not available ({error}).\n"
                "Falling back to the built-in corpus (dates, times, numbers): "
                "the outputs stored in these notebooks, made on Multi30k, "
                "will not match."
            )
    return data.builtin_corpus(split, seed=0)


def fingerprint():
    """A hash of notebook 5's code cells: which recipe made a saved model."""
    cells = json.loads(TRAINING_NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    code = ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "code"]
    return hashlib.sha256("\n\0".join(code).encode()).hexdigest()[:16]


def save_model(model, tokenizer, info):
    """Saves the model, its tokenizer and a description in `MODEL_DIR`."""
    (MODEL_DIR / "info.json").unlink(missing_ok=True)  # written last: "complete"
    MODEL_DIR.mkdir(exist_ok=True)
    model.save(MODEL_DIR / "model.keras")
    tokenizer.save(MODEL_DIR / "tokenizer")
    info = {**info, "notebook_05": fingerprint()}
    (MODEL_DIR / "info.json").write_text(json.dumps(info, indent=1))


def saved_info():
    """The description `save_model` wrote last; `{}` if there is none whole.

    A save stopped before or while writing it (a crash, a full disk) leaves
    none, or a cut-off file: either way the model beside it is not complete.
    """
    try:
        info = json.loads((MODEL_DIR / "info.json").read_text())
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def load_model():
    """The saved model, its tokenizer and description; trains it when missing.

    Returns:
        `(model, tokenizer, info)`; `info` is the dict notebook 5 saved
        (corpus, steps, minutes, validation scores).
    """
    info = saved_info()
    if info.get("notebook_05") != fingerprint():
        print(
            f"No model from this notebook 5 in {MODEL_DIR.name}/: "
            "running notebook 5 to train it (its file is not changed)..."
        )
        run_training_notebook()
        info = saved_info()
    model = keras.models.load_model(MODEL_DIR / "model.keras")
    tokenizer = data.Tokenizer.load(MODEL_DIR / "tokenizer")
    return model, tokenizer, info


def run_training_notebook():
    """Executes notebook 5 in a fresh kernel, as `run_notebooks.py` does."""
    script = (
        "import sys, tempfile, run_notebooks\n"
        "with tempfile.TemporaryDirectory() as kernels:\n"
        "    run_notebooks.execute(sys.argv[1], kernels)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(TRAINING_NOTEBOOK)],
        cwd=NOTEBOOKS,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"Notebook 5 failed:\n{done.stderr[-3000:]}")


def show_source(function):
    """Prints a function's code without its docstring."""
    source = textwrap.dedent(inspect.getsource(function))
    lines = source.splitlines()
    body = ast.parse(source).body[0].body
    if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        del lines[body[0].lineno - 1 : body[0].end_lineno]
    print("\n".join(lines))
