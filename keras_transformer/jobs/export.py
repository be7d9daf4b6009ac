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
from keras_transformer.jobs.trust import SIGNATURE_FILE, model_files, sign_translator


def export_translator(
    model_dir: str, out_dir: str, overwrite: bool = False, **search
) -> str:
    """Writes the translator of the model in `model_dir` to `out_dir`.

    Args:
        model_dir: a directory written by `keras-transformer train`.
        out_dir: where the SavedModel goes: a new or empty directory, or
            with `overwrite` an earlier SavedModel.
        overwrite: replace a SavedModel already at `out_dir`.
        **search: settings of its default signature, passed to `Translator`
            (`beam_size`, `alpha`, `batch_tokens`; `Translator`'s defaults
            where left out).

    Returns:
        `out_dir`.

    Raises:
        FileExistsError: `out_dir` is a file, a directory of other files, a
            SavedModel without `overwrite`, or the current directory (or
            one that holds it).
    """
    out = Path(os.path.abspath(out_dir))  # `.`, `..` and `x/` have a name
    check_destination(out, overwrite, given=out_dir)
    model, tokenizer = load_trained(model_dir)
    translator = Translator(tokenizer, model, **search)
    temporary = out.with_name(f"{out.name}.tmp-export")
    shutil.rmtree(temporary, ignore_errors=True)
    translator.save(str(temporary))
    sign_translator(temporary, *model_files(model_dir))
    replace_with(temporary, out)
    return str(out)


SAVED_MODEL_FILES = frozenset(
    {"saved_model.pb", "variables", "assets", "fingerprint.pb", SIGNATURE_FILE}
)
"""The entries of a SavedModel directory."""


def check_destination(
    out: Path,
    overwrite: bool,
    files: frozenset[str] = SAVED_MODEL_FILES,
    required: str = "saved_model.pb",
    kind: str = "SavedModel",
    given: str | None = None,
) -> None:
    """Refuses an `out` the export must not write to.

    A missing or empty directory is fine; so is, with `overwrite`, one that
    holds an earlier export: `required` and nothing but `files`.

    Args:
        given: `out` as the user spelt it, for the messages.

    Raises:
        FileExistsError: `out` is a file, a directory of other files, an
            earlier export without `overwrite`, or the current directory
            (or one that holds it).
    """
    given = str(out) if given is None else given
    if Path.cwd().is_relative_to(out.absolute()):
        raise FileExistsError(
            f"--out: {given!r} is the current directory or holds it; name a "
            f"new directory for the {kind}"
        )
    if not out.exists():
        return
    if not out.is_dir():
        raise FileExistsError(f"--out: {str(given)!r} is a file")
    entries = {entry.name for entry in out.iterdir()}
    if not entries:
        return
    if required not in entries or not entries <= files:
        raise FileExistsError(
            f"--out: {str(given)!r} holds files that are not a {kind}; "
            "choose a new directory"
        )
    if not overwrite:
        raise FileExistsError(
            f"--out: {str(given)!r} holds a {kind}; --overwrite replaces it"
        )


def replace_with(temporary: Path, out: Path) -> None:
    """Moves the complete export `temporary` to `out`, replacing an earlier one."""
    if out.exists():
        shutil.rmtree(out)
    temporary.rename(out)
