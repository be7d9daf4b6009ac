"""The directory of a training run, and what is in it.

```
run_dir/
  run.json             the manifest: every file and folder the run wrote
  run.lock             held (flock) by the one process writing the run
  config.yaml          the recipe (a run is of one recipe), written once the
                       data and the tokenizer are known to be usable
  tokenizer/           the SentencePiece model of the shared vocabulary
  checkpoints/         the training state (`training.checkpoints`): resumed
                       from, averaged at the end, kept by snapshots
  snapshots/           the model after chosen minutes
  logs/                TensorBoard logs
  model.keras          the trained model (averaged weights when averaging)
  translator/          the string-to-string SavedModel
  summary.json         what happened; `"finished": true` once all is done
```

Every file here is written atomically: a crash leaves the previous version
or the new one. A name enters the manifest before the run writes it, so
`--overwrite` removes what the run wrote, and refuses to start when the
directory holds anything else. A run is known by its contents: the path
it is reached by (relative or absolute, moved) is no part of it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import socket
import time
from pathlib import Path

from keras_transformer.config import ConfigError, config_from_dict, read_yaml

MODEL_FILE = "model.keras"
TOKENIZER_DIR = "tokenizer"
TRANSLATOR_DIR = "translator"
CONFIG_FILE = "config.yaml"
SUMMARY_FILE = "summary.json"
CHECKPOINT_DIR = "checkpoints"
OLD_STATE_DIR = "state"
"""Where earlier versions kept their `.npz` training state."""
SNAPSHOT_DIR = "snapshots"
LOG_DIR = "logs"
MANIFEST_FILE = "run.json"
LOCK_FILE = "run.lock"
PREPARED_DIR = "prepared"
"""The tokenized training corpus (`data.prepared_dir` by default): a cache,
named by its contents, that a run may leave or find there."""
RUN_ENTRIES = (
    CONFIG_FILE,
    TOKENIZER_DIR,
    OLD_STATE_DIR,
    CHECKPOINT_DIR,
    SNAPSHOT_DIR,
    LOG_DIR,
    MODEL_FILE,
    TRANSLATOR_DIR,
    SUMMARY_FILE,
)
"""What the training job writes."""
DEMO_ENTRIES = (
    "test.en",
    "test.de",
    "cross_attention.png",
    "encoder_attention.png",
    "positional_encoding.png",
)
"""What the demo writes beside a training run."""


class RunError(ValueError):
    """The output directory holds something a run must not touch."""


class UnsafeModelError(ValueError):
    """A model file holds code that Keras's `safe_mode` refuses to run."""


def read_manifest(directory: str | Path) -> list[str] | None:
    """The names the run in `directory` wrote, by its manifest; `None`
    when there is no manifest (or it cannot be read)."""
    path = Path(directory) / MANIFEST_FILE
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))["entries"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        return None
    return entries


def owned_entries(directory: str | Path) -> set[str]:
    """The names in `directory` that a run of this project wrote.

    Those of its manifest; for a run of an earlier version, which kept no
    manifest, the names that version wrote (`RUN_ENTRIES`, `DEMO_ENTRIES`)
    beside its `config.yaml`. The manifest and the lock file always.
    """
    directory = Path(directory)
    entries = read_manifest(directory)
    if entries is None:
        entries = []
        if (directory / CONFIG_FILE).is_file():  # a run of an earlier version
            entries = [
                name
                for name in (*RUN_ENTRIES, *DEMO_ENTRIES)
                if (directory / name).exists()
            ]
    return {*entries, MANIFEST_FILE, LOCK_FILE, PREPARED_DIR}


def _is_ours(name: str, owned: set[str]) -> bool:
    """`name` is owned, or the temporary file of an owned name
    (`summary.json.tmp-PID`, `model.tmp-PID.keras`, `translator.tmp-export`)."""
    if name in owned:
        return True
    return any(
        name.startswith((f"{entry}.tmp-", f"{Path(entry).stem}.tmp-"))
        for entry in owned
    )


def foreign_entries(directory: str | Path) -> list[str]:
    """The names in `directory` that no run of this project wrote."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    owned = owned_entries(directory)
    return sorted(e.name for e in directory.iterdir() if not _is_ours(e.name, owned))


def record_entries(directory: str | Path, *names: str) -> None:
    """Adds `names` to the run's manifest (atomically), before they are written.

    A run of an earlier version gets its manifest here, listing what that
    version wrote.
    """
    directory = Path(directory)
    current = owned_entries(directory) - {MANIFEST_FILE, LOCK_FILE}
    entries = sorted(current | set(names))
    if read_manifest(directory) == entries:
        return
    from keras_transformer import __version__

    manifest = {"written_by": f"keras_transformer {__version__}", "entries": entries}
    write_text(directory / MANIFEST_FILE, json.dumps(manifest, indent=2) + "\n")


def _listing(names: list[str], most: int = 5) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def run_status(directory: str | Path, recipe: dict) -> str:
    """What training `recipe` into `directory` means.

    A recipe that differs from the run's only in its budget
    (`training.minutes`, `training.steps`) is the same recipe trained for
    longer or shorter: an unfinished run resumes under the new budget, and a
    finished one trains on when the budget goes past where it stopped.

    Returns:
        "new" (no run there yet), "resume" (a run of this recipe that has not
        finished), "extend" (a finished run of this recipe that the budget
        takes further) or "finished".

    Raises:
        RunError: `directory` is a file, holds files of no run, or holds a
            run of another recipe.
    """
    directory = Path(directory)
    if not directory.exists():
        return "new"
    if not directory.is_dir():
        raise RunError(f"output_dir: {str(directory)!r} is a file, not a directory")
    if not (directory / CONFIG_FILE).is_file():
        foreign = foreign_entries(directory)
        if foreign:
            raise RunError(
                f"output_dir: {str(directory)!r} holds files that are not a "
                f"training run's ({_listing(foreign)}); choose another output "
                "directory"
            )
        written = sorted(
            e.name
            for e in directory.iterdir()
            if e.name not in (MANIFEST_FILE, LOCK_FILE, PREPARED_DIR)
            and ".tmp-" not in e.name
        )
        if written:
            raise RunError(
                f"output_dir: {str(directory)!r} holds an incomplete run (no "
                f"{CONFIG_FILE}, but {_listing(written)}); --overwrite starts "
                "it over"
            )
        return "new"  # a start that stopped before writing anything
    try:
        saved = read_yaml(directory / CONFIG_FILE)
    except (OSError, ConfigError):
        saved = None
    try:  # with the defaults of keys added since it was written
        saved = config_from_dict(saved).to_dict()
    except ConfigError:
        pass
    saved, wanted = run_identity(saved), run_identity(recipe)
    if saved != wanted and not _differ_in_budget_only(saved, wanted):
        raise RunError(
            f"output_dir: {str(directory)!r} holds a run of another recipe "
            f"({_first_difference(saved, wanted)}); choose another output "
            "directory, or --overwrite to replace that run"
        )
    summary = read_summary(directory)
    if not summary.get("finished"):
        if any((directory / OLD_STATE_DIR).glob("state-*.npz")):
            raise RunError(
                f"output_dir: {str(directory)!r} holds an unfinished run of an "
                "earlier version, whose training state (state/*.npz) this "
                "version cannot resume; --overwrite to train it again"
            )
        return "resume"
    return "extend" if _goes_further(recipe["training"], summary) else "finished"


PATH_KEYS = {
    "data": ("data_dir", "train_files", "valid_files", "test_files"),
    "tokenizer": ("path",),
}
"""The recipe's paths to its inputs, compared as absolute paths."""


def run_identity(recipe):
    """What makes two recipes the same run: all but `output_dir`.

    Where the run is written is not what it is: the same run is reached by
    a relative or an absolute path, with or without a trailing slash, and
    after it was moved. The paths of its inputs are compared as absolute
    paths (`data/`, `./data` and the same folder named from the root are
    one input; relative ones are taken from the current directory).
    """
    if not isinstance(recipe, dict):
        return recipe
    identity = {key: value for key, value in recipe.items() if key != "output_dir"}
    if isinstance(identity.get("data"), dict):  # where shards go, not what
        identity["data"] = {
            k: v for k, v in identity["data"].items() if k != "prepared_dir"
        }
    for section, keys in PATH_KEYS.items():
        if not isinstance(identity.get(section), dict):
            continue
        identity[section] = dict(identity[section])
        for key in keys:
            value = identity[section].get(key)
            if isinstance(value, str):
                identity[section][key] = os.path.abspath(value)
            elif isinstance(value, list):
                identity[section][key] = [
                    os.path.abspath(v) if isinstance(v, str) else v for v in value
                ]
    return identity


BUDGET_KEYS = ("minutes", "steps")
"""The keys of `training` that say how long, not what, to train."""


def _differ_in_budget_only(saved, recipe: dict) -> bool:
    if not isinstance(saved, dict) or not isinstance(saved.get("training"), dict):
        return False

    def without_budget(r):
        training = {k: v for k, v in r["training"].items() if k not in BUDGET_KEYS}
        return {**r, "training": training}

    return without_budget(saved) == without_budget(recipe)


def _goes_further(training: dict, summary: dict) -> bool:
    """Whether every limit `training` sets lies past where the run stopped."""
    limits = [
        (training.get(key), summary.get(key))
        for key in BUDGET_KEYS
        if training.get(key) is not None
    ]
    return bool(limits) and all(
        done is not None and limit > done for limit, done in limits
    )


def keep_finished_model(directory: str | Path) -> Path:
    """Keeps a finished run's model before the run trains on.

    The model (and tokenizer) go to `snapshots/step_{N}/` beside a
    `snapshot.json` with the step, the minutes and the test scores the run
    ended with; nothing is copied when a snapshot of that step (e.g.
    `snapshots/minute_60`) holds it already. The summary is then replaced by
    an unfinished one that records the finished run under `"extended"`, so a
    crash from here on resumes.

    Returns:
        The snapshot folder that holds the finished model.
    """
    directory = Path(directory)
    record_entries(directory, SNAPSHOT_DIR, SUMMARY_FILE)
    summary = read_summary(directory)
    summary.pop("history", None)
    step = summary.get("steps")
    snapshots = directory / SNAPSHOT_DIR
    folder = None
    for record in sorted(snapshots.glob("*/snapshot.json")):
        try:
            if json.loads(record.read_text(encoding="utf-8")).get("step") == step:
                folder = record.parent
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
    if folder is None:
        folder = snapshots / f"step_{step}"
        folder.mkdir(parents=True, exist_ok=True)
        for name in (MODEL_FILE, TOKENIZER_DIR):
            source, temporary = directory / name, folder / f"{name}.tmp-copy"
            if source.is_dir():
                shutil.copytree(source, temporary, dirs_exist_ok=True)
                if (folder / name).is_dir():  # copied before a crash
                    shutil.rmtree(folder / name)
            else:
                shutil.copyfile(source, temporary)
            os.replace(temporary, folder / name)
        record = {"minutes": summary.get("minutes"), "step": step}
        if "test" in summary:
            record["test"] = summary["test"]
        write_text(folder / "snapshot.json", json.dumps(record) + "\n")
    earlier = read_summary(directory).get("extended", [])
    summary.pop("extended", None)
    summary.pop("finished", None)
    extended = [*earlier, {**summary, "kept_in": str(folder.relative_to(directory))}]
    write_text(
        directory / SUMMARY_FILE,
        json.dumps({"finished": False, "extended": extended}, indent=2) + "\n",
    )
    return folder


def clear_run(directory: str | Path) -> None:
    """Removes what a run wrote in `directory` (its manifest's), nothing else.

    Raises:
        RunError: `directory` holds anything else; nothing is removed then.
    """
    directory = Path(directory)
    if not directory.is_dir():
        return
    foreign = foreign_entries(directory)
    if foreign:
        raise RunError(
            f"output_dir: {str(directory)!r} holds files that no run wrote "
            f"({_listing(foreign)}); --overwrite removes only a run's own "
            "files: move them, or choose another output directory"
        )
    owned = owned_entries(directory)
    for path in sorted(directory.iterdir()):
        if path.name in (MANIFEST_FILE, LOCK_FILE, PREPARED_DIR):
            continue  # (the prepared corpus is named by its contents: kept)
        if not _is_ours(path.name, owned):
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    (directory / MANIFEST_FILE).unlink(missing_ok=True)  # last: it names the rest


_held: dict[str, list] = {}
"""The run directories this process has locked: real path -> [fd, depth]."""


@contextlib.contextmanager
def run_lock(directory: str | Path):
    """Holds `directory` for this process alone while the block runs.

    An exclusive `flock` on `directory/run.lock`, which names the holder
    (pid, host, start time). The kernel releases it when the process ends,
    `kill -9` included; the file is removed when the block ends. The
    directory (and its parents) are created if needed, and removed again
    if the block leaves them empty, as after a start that failed its
    checks. Re-entrant within a process (the demo holds it around `train`).

    Raises:
        RunError: another process holds it (the message names the holder),
            or `directory` is a file.
    """
    directory = Path(directory)
    key = os.path.realpath(directory)
    if key in _held:
        _held[key][1] += 1
        try:
            yield
        finally:
            _held[key][1] -= 1
        return
    if directory.exists() and not directory.is_dir():
        raise RunError(f"output_dir: {str(directory)!r} is a file, not a directory")
    created = missing_parents(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / LOCK_FILE
    try:
        fd = _acquire(path, directory)
    except BaseException:
        remove_empty(created)
        raise
    _held[key] = [fd, 1]
    try:
        yield
    finally:
        del _held[key]
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # before the lock goes: see `_acquire`
        os.close(fd)
        remove_empty(created)


def _acquire(path: Path, directory: Path) -> int:
    """The file descriptor of `path`, locked; its holder's details written."""
    for _ in range(100):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise RunError(
                f"output_dir: {str(directory)!r} is in use by another process "
                f"({holder}); one process at a time writes a run: wait for it "
                "to end, or stop it"
            ) from None
        # A holder that ended removed the file after we opened it: our lock
        # is on a file no one else will open. Try again on the new one.
        try:
            current = os.stat(path)
        except FileNotFoundError:
            current = None
        mine = os.fstat(fd)
        if current and (current.st_ino, current.st_dev) == (mine.st_ino, mine.st_dev):
            info = {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
            }
            data = (json.dumps(info) + "\n").encode()
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)
            return fd
        os.close(fd)
    raise RunError(f"output_dir: {str(directory)!r}: cannot take its lock file")


def _holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode())
        return f"pid {info['pid']} on {info['host']}, since {info['started']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "its details are not written yet"


def missing_parents(path: Path) -> list[Path]:
    """`path` and its ancestors that do not exist, deepest first."""
    missing = []
    path = Path(os.path.abspath(path))
    while not path.exists():
        missing.append(path)
        path = path.parent
    return missing


def remove_empty(directories: list[Path]) -> None:
    """Removes those of `directories` (deepest first) that are empty."""
    for directory in directories:
        try:
            directory.rmdir()
        except OSError:
            return


def remove_temporaries(directory: str | Path) -> None:
    """Removes the half-written files a killed run left.

    Files are written under a temporary name and renamed when complete
    (`training.atomic.write_atomically`: `*.tmp-*`; TensorFlow's
    checkpoints: `ckpt-N_temp/` and `checkpoint.tmp*`); a run killed while
    writing leaves the temporary file behind, which nothing else reads.
    """
    directory = Path(directory)
    if not directory.is_dir():
        return
    found = [*directory.rglob("*.tmp-*"), *directory.rglob("*_temp")]
    found += (directory / CHECKPOINT_DIR).glob("checkpoint.tmp*")
    for path in found:
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def read_summary(directory: str | Path) -> dict:
    path = Path(directory) / SUMMARY_FILE
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return {}


def write_text(path: str | Path, text: str) -> None:
    """Writes `text` to `path` atomically."""
    from keras_transformer.training.atomic import write_atomically

    data = text.encode("utf-8")
    write_atomically(path, lambda f: f.write(data))


def write_summary(directory: str | Path, updates: dict) -> dict:
    """Merges `updates` into `summary.json` (atomically); returns the whole."""
    summary = {**read_summary(directory), **updates}
    record_entries(directory, SUMMARY_FILE)
    write_text(Path(directory) / SUMMARY_FILE, json.dumps(summary, indent=2) + "\n")
    return summary


def load_trained(model_dir: str | os.PathLike):
    """The `(model, tokenizer)` saved in `model_dir` by a training run.

    The model is loaded for inference: without its optimizer, and in
    Keras's safe mode: a model file that holds Python code (a `Lambda`
    layer's function, say) is refused before any of it runs.

    Raises:
        FileNotFoundError: the directory, its model or its tokenizer is missing.
        UnsafeModelError: the model holds code that safe mode will not run.
        ValueError: the model or the tokenizer cannot be read.
    """
    import keras

    import keras_transformer.models  # noqa: F401 (registers the model's classes)
    from keras_transformer import data

    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise FileNotFoundError(f"Model directory not found: {model_dir}")
    model_path = model_dir / MODEL_FILE
    if not model_path.is_file():
        raise FileNotFoundError(f"No {MODEL_FILE} in {model_dir}: train a model first.")
    tokenizer_path = model_dir / TOKENIZER_DIR
    if not tokenizer_path.exists():
        raise FileNotFoundError(
            f"No tokenizer in {model_dir} (expected {tokenizer_path}); the model "
            "cannot be used without the vocabulary it was trained with."
        )
    try:
        model = keras.models.load_model(model_path, compile=False, safe_mode=True)
    except Exception as error:  # noqa: BLE001 - re-raised with the file named
        if _refused_by_safe_mode(error):
            reason = str(error).split(". ")[0].strip()
            raise UnsafeModelError(
                f"Not loading {model_path}: it holds Python code, which "
                f"Keras's safe mode does not run ({reason})"
            ) from None
        raise ValueError(
            f"Cannot load {model_path}: it looks corrupt ({error})"
        ) from None
    return model, data.Tokenizer.load(tokenizer_path)


def _refused_by_safe_mode(error: Exception) -> bool:
    """Whether `keras.models.load_model` refused `error`'s file in safe mode.

    Keras raises a `ValueError` whose message tells how to override it,
    `safe_mode=False`, for each kind of code it will not load (a Python
    lambda, a `Lambda` layer's, a `TFSMLayer`, a vocabulary file outside the
    archive).
    """
    return isinstance(error, ValueError) and "safe_mode=False" in str(error)


DEFAULT_SEARCH = {"beam_size": 4, "alpha": 0.6}
"""Search settings of a model whose recipe says nothing (the paper's)."""


def search_settings(model_dir: str | os.PathLike) -> dict:
    """The beam size and length penalty the model's recipe chose.

    Read from the run's `config.yaml` (`evaluation.beam_size` and
    `evaluation.alpha`); a snapshot folder (`RUN/snapshots/minute_30`) uses
    its run's. Without a recipe: `DEFAULT_SEARCH`, beam 4 and alpha 0.6.

    Returns:
        `{"beam_size": int, "alpha": float}`.

    Raises:
        ConfigError: the recipe cannot be read, or its values are not a
            beam size and a length penalty (the file and key are named).
    """
    model_dir = Path(model_dir)
    candidates = [model_dir / CONFIG_FILE]
    if model_dir.parent.name == SNAPSHOT_DIR:
        candidates.append(model_dir.parent.parent / CONFIG_FILE)
    for path in candidates:
        if path.is_file():
            recipe = read_yaml(path)
            if recipe is None:
                break
            if not isinstance(recipe, dict):
                raise ConfigError(
                    f"{path}: expected a recipe (a mapping of sections), got "
                    f"a {type(recipe).__name__}"
                )
            evaluation = recipe.get("evaluation") or {}
            if not isinstance(evaluation, dict):
                raise ConfigError(
                    f"{path}: evaluation: {evaluation!r} (expected a mapping)"
                )
            given = {k: evaluation[k] for k in DEFAULT_SEARCH if k in evaluation}
            checked = config_from_dict({"evaluation": given}, source=str(path))
            return {
                "beam_size": checked.evaluation.beam_size,
                "alpha": float(checked.evaluation.alpha),
            }
    return dict(DEFAULT_SEARCH)


def _first_difference(saved, recipe: dict, prefix: str = "") -> str:
    if not isinstance(saved, dict):
        return "its config.yaml is not a recipe"
    for key in sorted(set(saved) | set(recipe)):
        a, b = saved.get(key), recipe.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            if a != b:
                return _first_difference(a, b, f"{prefix}{key}.")
        elif a != b:
            return f"{prefix}{key}: {a!r} there, {b!r} here"
    return "none"
