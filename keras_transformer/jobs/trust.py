"""Which exported translators `translate` may run: the ones made here.

A SavedModel is a program: loading one runs whatever graph it holds, past
Keras's `safe_mode`. A model directory from someone else is data only
through `model.keras` (loaded with `safe_mode`) and the tokenizer. So when
this library exports a translator into a model directory it signs it: an
HMAC, with a key kept in the user's configuration directory, of the
translator's files and of the `model.keras` and tokenizer it was made
from. `translate` and `evaluate` load the SavedModel only when the
signature holds; a translator from another machine or user, or one made
from an earlier `model.keras` (stale), is passed over with a message and
the translator is built from `model.keras` instead.

The key is `$XDG_CONFIG_HOME/keras_transformer/translator.key` (by default
under `~/.config`), made on first use and readable by the user alone.
"""

from __future__ import annotations

import atexit
import hashlib
import hmac
import json
import os
import secrets
import shutil
import tempfile
from pathlib import Path

SIGNATURE_FILE = "keras_transformer_signature.json"


def model_files(model_dir: str | os.PathLike) -> tuple[Path, Path]:
    """The `model.keras` and tokenizer file a translator is made from."""
    from keras_transformer.data.tokenizer import MODEL_FILENAME
    from keras_transformer.jobs.run_dir import MODEL_FILE, TOKENIZER_DIR

    model_dir = Path(model_dir)
    return model_dir / MODEL_FILE, model_dir / TOKENIZER_DIR / MODEL_FILENAME


def sign_translator(translator_dir: Path, model_file: Path, tokenizer_file: Path):
    """Writes the signature of a translator exported from those files."""
    record = _record(translator_dir, model_file, tokenizer_file)
    record["hmac"] = _mac(record)
    temporary = translator_dir / f"{SIGNATURE_FILE}.tmp"
    temporary.write_text(json.dumps(record, indent=2))
    os.replace(temporary, translator_dir / SIGNATURE_FILE)


def private_copy(translator_dir: Path) -> Path:
    """A copy of `translator_dir` that only this process reads, for checking
    and loading: the directory itself could change between the two reads.

    The copy is removed when the process exits.

    Raises:
        ValueError: the directory holds a symbolic link (its target would
            not be what was signed).
    """
    _refuse_links(translator_dir)
    copy = Path(tempfile.mkdtemp(prefix="keras_transformer_translator_"))
    atexit.register(shutil.rmtree, copy, True)
    copy = copy / translator_dir.name
    shutil.copytree(translator_dir, copy, symlinks=True)
    _refuse_links(copy)  # (one made while it was copied)
    return copy


def _refuse_links(directory: Path) -> None:
    for path in directory.rglob("*"):
        if path.is_symlink():
            raise ValueError(f"it holds a symbolic link, {path.name!r}")


def check_translator(
    translator_dir: Path, model_file: Path, tokenizer_file: Path
) -> str | None:
    """Why the translator may not be loaded, or `None` when it may."""
    try:
        signed = json.loads((translator_dir / SIGNATURE_FILE).read_text())
    except FileNotFoundError:
        return "it carries no signature of this library (foreign, or older)"
    except (OSError, ValueError) as error:
        return f"its signature cannot be read ({error})"
    if not isinstance(signed, dict) or not isinstance(signed.get("hmac"), str):
        return "its signature is malformed"
    record = _record(translator_dir, model_file, tokenizer_file)
    if hmac.compare_digest(signed["hmac"], _mac(record)):
        return None
    if signed.get("translator") != record["translator"]:
        return "its files changed after it was signed"
    if any(signed.get(name) != record[name] for name in ("model.keras", "tokenizer")):
        return "it is stale: model.keras or the tokenizer changed after its export"
    return "it was signed with another key (made on another machine or account)"


def _record(translator_dir: Path, model_file: Path, tokenizer_file: Path) -> dict:
    files = sorted(
        path
        for path in translator_dir.rglob("*")
        if path.is_file() and not path.name.startswith(SIGNATURE_FILE)
    )
    return {
        "model.keras": _digest(model_file),
        "tokenizer": _digest(tokenizer_file),
        "translator": {
            str(path.relative_to(translator_dir)): _digest(path) for path in files
        },
    }


def _digest(path: Path) -> str | None:
    if not path.is_file():
        return None
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _mac(record: dict) -> str:
    message = json.dumps(record, sort_keys=True).encode()
    return hmac.new(_key(), message, hashlib.sha256).hexdigest()


def _key() -> bytes:
    """This user's key, made (readable by the user alone) on first use.

    Raises:
        ValueError: the key file is not 64 hexadecimal digits.
    """
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    path = Path(config) / "keras_transformer" / "translator.key"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        try:
            with os.fdopen(descriptor, "w") as f:  # mode 600
                f.write(secrets.token_hex(32))
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(temporary, path)  # the first writer's key wins
            except FileExistsError:
                pass
        finally:
            os.unlink(temporary)
    text = path.read_text().strip()
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != 32:
        raise ValueError(
            f"{path}: not a translator key (64 hexadecimal digits); delete it "
            "to make a new one (translators signed with it will be rebuilt)"
        )
    return key
