"""`keras-transformer export`: the string-to-string SavedModel of a model.

The result runs with TensorFlow and tensorflow-text only:
`tf.saved_model.load(path)(tf.constant(["A man rides a bike."]))` translates
with the exported settings, and `.translate(sentences, beam_size, alpha)`
with any. The SavedModel is written under a temporary name and renamed when
complete; an existing directory is replaced only if it is a SavedModel and
`overwrite` is set.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from keras_transformer.decoding import Translator
from keras_transformer.jobs.run_dir import load_trained


def export_translator(
    model_dir: str,
    out_dir: str,
    beam_size: int = 4,
    alpha: float = 0.6,
    batch_tokens: int | None = None,
    overwrite: bool = False,
) -> str:
    """Writes the translator of the model in `model_dir` to `out_dir`.

    Args:
        model_dir: a directory written by `keras-transformer train`.
        out_dir: where the SavedModel goes: a new or empty directory, or
            with `overwrite` an earlier SavedModel.
        beam_size: beam size of its default signature (1 = greedy).
        alpha: length penalty of its default signature.
        batch_tokens: source tokens per search batch (None: by beam size,
            see `Translator`).
        overwrite: replace a SavedModel already at `out_dir`.

    Returns:
        `out_dir`.

    Raises:
        FileExistsError: `out_dir` is a file, a directory of other files, a
            SavedModel without `overwrite`, or the current directory (or
            one that holds it).
    """
    out = Path(os.path.abspath(out_dir))  # `.`, `..` and `x/` have a name
    if Path.cwd().is_relative_to(out):
        raise FileExistsError(
            f"--out: {out_dir!r} is the current directory or holds it; name a "
            "new directory for the SavedModel"
        )
    _check_destination(out, overwrite, out_dir)
    model, tokenizer = load_trained(model_dir)
    translator = Translator(
        tokenizer, model, beam_size=beam_size, alpha=alpha, batch_tokens=batch_tokens
    )
    temporary = out.with_name(f"{out.name}.tmp-export")
    shutil.rmtree(temporary, ignore_errors=True)
    translator.save(str(temporary))
    if out.exists():
        shutil.rmtree(out)
    temporary.rename(out)
    return str(out_dir)


def _check_destination(out: Path, overwrite: bool, given: str) -> None:
    if not out.exists():
        return
    if not out.is_dir():
        raise FileExistsError(f"--out: {str(given)!r} is a file")
    entries = {entry.name for entry in out.iterdir()}
    if not entries:
        return
    saved_model = "saved_model.pb" in entries and entries <= {
        "saved_model.pb",
        "variables",
        "assets",
        "fingerprint.pb",
    }
    if not saved_model:
        raise FileExistsError(
            f"--out: {str(given)!r} holds files that are not a SavedModel; "
            "choose a new directory"
        )
    if not overwrite:
        raise FileExistsError(
            f"--out: {str(given)!r} holds a SavedModel; --overwrite replaces it"
        )
