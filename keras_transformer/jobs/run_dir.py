"""The directory of a training run, and what is in it.

```
run_dir/
  config.yaml          the recipe, written first (a run is of one recipe)
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
or the new one.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import yaml

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
"""Everything a run writes; `--overwrite` removes these and nothing else."""


class RunError(ValueError):
    """The output directory holds something a run must not touch."""


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
    entries = {entry.name for entry in directory.iterdir()}
    if not entries:
        return "new"
    config = directory / CONFIG_FILE
    if not config.is_file():
        raise RunError(
            f"output_dir: {str(directory)!r} holds files that are not a "
            "training run's; choose another output directory"
        )
    try:
        saved = yaml.safe_load(config.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError):
        saved = None
    if saved != recipe and not _differ_in_budget_only(saved, recipe):
        raise RunError(
            f"output_dir: {str(directory)!r} holds a run of another recipe "
            f"({_first_difference(saved, recipe)}); choose another output "
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
    """Removes what a run wrote in `directory` (`RUN_ENTRIES`), nothing else."""
    directory = Path(directory)
    for name in RUN_ENTRIES:
        path = directory / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


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
    write_text(Path(directory) / SUMMARY_FILE, json.dumps(summary, indent=2) + "\n")
    return summary


def load_trained(model_dir: str | os.PathLike):
    """The `(model, tokenizer)` saved in `model_dir` by a training run.

    The model is loaded for inference: without its optimizer.

    Raises:
        FileNotFoundError: the directory, its model or its tokenizer is missing.
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
        model = keras.models.load_model(model_path, compile=False)
    except Exception as error:  # noqa: BLE001 - re-raised with the file named
        raise ValueError(
            f"Cannot load {model_path}: it looks corrupt ({error})"
        ) from None
    return model, data.Tokenizer.load(tokenizer_path)


DEFAULT_SEARCH = {"beam_size": 4, "alpha": 0.6}
"""Search settings of a model whose recipe says nothing (the paper's)."""


def search_settings(model_dir: str | os.PathLike) -> dict:
    """The beam size and length penalty the model's recipe chose.

    Read from the run's `config.yaml` (`evaluation.beam_size` and
    `evaluation.alpha`); a snapshot folder (`RUN/snapshots/minute_30`) uses
    its run's. Without a recipe: `DEFAULT_SEARCH`, beam 4 and alpha 0.6.

    Returns:
        `{"beam_size": int, "alpha": float}`.
    """
    model_dir = Path(model_dir)
    candidates = [model_dir / CONFIG_FILE]
    if model_dir.parent.name == SNAPSHOT_DIR:
        candidates.append(model_dir.parent.parent / CONFIG_FILE)
    for path in candidates:
        if path.is_file():
            try:
                recipe = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            except (OSError, yaml.YAMLError):
                break  # an unreadable recipe: the defaults, as without one
            evaluation = recipe.get("evaluation") or {}
            return {
                key: type(default)(evaluation.get(key, default))
                for key, default in DEFAULT_SEARCH.items()
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
