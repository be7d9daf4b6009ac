"""The fault suite: ways a run can go wrong, and what the command does.

Each case runs the `keras-transformer` command as a user does (a fresh
process, `python -m keras_transformer_cli`) on a tiny recipe in a scratch
directory, and is classified by what it did:

- OK: exit status 0 and the result asked for.
- ERROR: a non-zero exit status (2; 1 for a diverging run), the last line
  on stderr `keras-transformer COMMAND: error: ...` naming what the case
  expects (the key, argument or file), no traceback, and every file as it
  was before.
- INTERRUPTED: Ctrl-C or SIGTERM: status 130 and one line.
- RESUMED: a run that was killed, interrupted, moved or extended, run
  again: it continued from its saved step and finished.
- VAGUE: an error that does not name what it should.
- CRASH: a traceback.
- LITTER: a failed command left new files behind.
- LOSS: a file the command did not write changed or vanished, or saved
  work was lost.
- SILENT: status 0 with a wrong result (a NaN run marked finished).

A case passes when its class is the one it expects; the suite prints one
line per case and the count per class (docs/training.md quotes them), and
exits with status 1 if any case differs. About 5 minutes on 2 CPU cores.

Usage (from the repository root):

    .venv/bin/python benchmarks/faults.py [--only NAME ...] [--keep DIR]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import gzip
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

COMMAND = [sys.executable, "-m", "keras_transformer_cli"]
SOURCES = ["one cat", "two cats", "three dogs", "a dog", "four birds", "one bird"]
TARGETS = ["eine Katze", "zwei Katzen", "drei Hunde", "ein Hund", "vier Vögel"]
TARGETS.append("ein Vogel")
TIMEOUT = 300


class Workspace:
    """A scratch directory with a tiny corpus, recipes and a finished run."""

    def __init__(self, root: Path) -> None:
        self.root = root
        for name, lines in (("train.en.gz", SOURCES), ("train.de.gz", TARGETS)):
            with gzip.open(root / name, "wt", encoding="utf-8") as f:
                f.write("\n".join(lines * 6) + "\n")
        (root / "test.en").write_text("\n".join(SOURCES) + "\n", encoding="utf-8")
        (root / "test.de").write_text("\n".join(TARGETS) + "\n", encoding="utf-8")

    def recipe(self, name: str, output: str = "run", **sections) -> str:
        """A recipe file: the tiny model, with `sections` merged in."""
        recipe = {
            "data": {
                "corpus": "files",
                "train_files": ["train.en.gz", "train.de.gz"],
                "max_length": 16,
            },
            "tokenizer": {"vocab_size": 300},
            "model": {
                "preset": "tiny",
                "overrides": {
                    "num_layers": 1,
                    "d_model": 16,
                    "num_heads": 2,
                    "d_ff": 32,
                },
            },
            "training": {
                "steps": 3,
                "token_budget": 64,
                "warmup_steps": 10,
                "average_last": 2,
                "checkpoint_minutes": 1e-6,
            },
            "output_dir": output,
        }
        for key, value in sections.items():
            recipe[key] = {**recipe.get(key, {}), **value}
        (self.root / name).write_text(yaml.safe_dump(recipe))
        return name

    def run(self, *argv: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*COMMAND, *argv],
            cwd=self.root,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )

    def start(self, *argv: str, **kwargs) -> subprocess.Popen:
        return subprocess.Popen(
            [*COMMAND, *argv],
            cwd=self.root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            **kwargs,
        )

    def files(self) -> dict:
        """Every path in the workspace, with a digest of each file."""
        found = {}
        for path in sorted(self.root.rglob("*")):
            name = str(path.relative_to(self.root))
            if path.is_file():
                found[name] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                found[name] = "dir"
        return found

    def summary(self, run: str) -> dict:
        path = self.root / run / "summary.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def copy_run(self, name: str) -> str:
        shutil.copytree(self.root / "finished", self.root / name)
        return name


def error_class(result, command: str, fragments, before: dict, after: dict) -> str:
    """The class of a command that should have failed with one line."""
    changed = {k for k in before if after.get(k) != before[k]}
    if changed:
        return "LOSS"
    if "Traceback" in result.stderr:
        return "CRASH"
    if result.returncode == 0:
        return "SILENT"
    if set(after) - set(before):
        return "LITTER"
    lines = result.stderr.strip().splitlines()
    last = lines[-1] if lines else ""
    if not last.startswith(f"keras-transformer {command}: error: "):
        return "VAGUE"
    if not all(fragment in last for fragment in fragments):
        return "VAGUE"
    return "ERROR"


def expect_error(command: str, *fragments: str, setup=None):
    """A case: `keras-transformer ARGV` must fail, naming `fragments`."""

    def case(ws: Workspace, argv: list[str]):
        if setup is not None:
            setup(ws)
        before = ws.files()
        result = ws.run(*argv)
        after = ws.files()
        last = (result.stderr.strip().splitlines() or [""])[-1]
        return error_class(result, command, fragments, before, after), last

    return case


def expect_unchanged_ok(ws: Workspace, argv: list[str]):
    before = ws.files()
    result = ws.run(*argv)
    if ws.files() != before:
        return "LOSS", "the finished run changed"
    if result.returncode != 0 or "Traceback" in result.stderr:
        return "CRASH", result.stderr.strip()[-300:]
    return "OK", (result.stderr.strip().splitlines() or [""])[-1]


# -- the cases ---------------------------------------------------------------


def _write(ws, name, text):
    (ws.root / name).write_text(text)


def foreign_dir(ws, argv):
    (ws.root / "mine").mkdir()
    _write(ws, "mine/notes.txt", "my notes")
    return expect_error("train", "notes.txt")(ws, argv)


def overwrite_beside_foreign(ws, argv):
    ws.copy_run("beside")
    _write(ws, "beside/notes.txt", "my notes")
    return expect_error("train", "no run wrote (notes.txt)")(ws, argv)


def overwrite_own_run(ws, argv):
    ws.copy_run("again")
    result = ws.run(*argv)
    summary = ws.summary("again")
    if result.returncode or not summary.get("finished"):
        return "CRASH", result.stderr.strip()[-300:]
    if summary.get("resumed_from_step") != 0 or (ws.root / "again/notes.txt").exists():
        return "SILENT", "not a new run"
    return "OK", f"trained anew: {summary['steps']} steps"


def moved_run(ws, argv):
    (ws.root / "moved").mkdir()
    shutil.copytree(ws.root / "finished", ws.root / "moved" / "here")
    result = ws.run(*argv)
    summary = ws.summary("moved/here")
    if result.returncode or not summary.get("finished"):
        return "CRASH", result.stderr.strip()[-300:]
    if summary.get("resumed_from_step") != 3 or summary.get("steps") != 5:
        return "LOSS", f"resumed from {summary.get('resumed_from_step')}"
    return "RESUMED", "trained on from step 3 to 5 in its new place"


def corrected_after_failed_start(ws, argv):
    """The recipe that failed (`vocab_size_below_corpus`), corrected."""
    result = ws.run(*argv)
    summary = ws.summary("v270")
    if result.returncode or not summary.get("finished"):
        return "CRASH", (result.stderr.strip().splitlines() or [""])[-1]
    return "OK", f"trained: {summary['steps']} steps"


def overwrite_run_of_earlier_version(ws, argv):
    """A run without a manifest, as earlier versions left them."""
    ws.copy_run("earlier")
    (ws.root / "earlier" / "run.json").unlink()
    result = ws.run(*argv)
    summary = ws.summary("earlier")
    if result.returncode or not summary.get("finished"):
        return "CRASH", (result.stderr.strip().splitlines() or [""])[-1]
    return "OK", "trained anew"


def output_is_a_file(ws, argv):
    _write(ws, "a_file", "mine")
    return expect_error("train", "is a file")(ws, argv)


def empty_train_files(ws, argv):
    _write(ws, "empty.en", "")
    _write(ws, "empty.de", "")
    return expect_error("train", "data.train_files")(ws, argv)


def _wait_for(condition, process, what):
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        if process.poll() is not None:
            raise RuntimeError(f"ended before {what}: {process.stderr.read()[-500:]}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"no {what} after {TIMEOUT} s")
        time.sleep(0.1)


def _newest_step(directory: Path) -> int:
    steps = [int(p.stem.split("-")[1]) for p in directory.glob("ckpt-*.index")]
    return max(steps, default=-1)


def second_process_then_ctrl_c(ws, argv):
    """A run in training; a second `train` on it; Ctrl-C; a rerun."""
    long = ws.recipe("long.yaml", "long", training={"steps": 100_000})
    first = ws.start("train", "--config", long, "--no-evaluate")
    try:
        checkpoints = ws.root / "long" / "checkpoints"
        _wait_for(lambda: _newest_step(checkpoints) >= 2, first, "checkpoint")
        before = ws.files()
        second = ws.run("train", "--config", long, "--no-evaluate")
        after = ws.files()
        # (The first run writes on: compare what the second could touch.)
        before = {k: v for k, v in before.items() if not k.startswith("long")}
        after = {k: v for k, v in after.items() if not k.startswith("long")}
        named = f"in use by another process (pid {first.pid} "
        lock_class = error_class(second, "train", [named], before, after)
        first.send_signal(signal.SIGINT)
        code = first.wait(timeout=TIMEOUT)
        lines = first.stderr.read().strip().splitlines()
    finally:
        if first.poll() is None:
            first.kill()
    stopped = _newest_step(checkpoints)
    interrupt_class = (
        "INTERRUPTED"
        if code == 130 and "run the same command again to resume" in lines[-1]
        else "CRASH"
    )
    rerun = ws.run(
        "train", "--config", long, "--no-evaluate", "--steps", str(stopped + 2)
    )
    summary = ws.summary("long")
    resumed = (
        "RESUMED"
        if rerun.returncode == 0
        and summary.get("finished")
        and summary.get("resumed_from_step") == stopped
        else "LOSS"
    )
    return [
        (
            "second_process",
            "ERROR",
            lock_class,
            (second.stderr.strip().splitlines() or [""])[-1],
        ),
        (
            "sigint_in_training",
            "INTERRUPTED",
            interrupt_class,
            lines[-1] if lines else "",
        ),
        ("rerun_after_sigint", "RESUMED", resumed, f"from step {stopped}"),
    ]


def kill_9_and_damage(ws, argv):
    victim = ws.recipe("victim.yaml", "victim", training={"steps": 80})
    process = ws.start("train", "--config", victim, "--no-evaluate")
    checkpoints = ws.root / "victim" / "checkpoints"
    try:
        _wait_for(lambda: _newest_step(checkpoints) >= 6, process, "checkpoint")
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    newest = _newest_step(checkpoints)
    index = checkpoints / f"ckpt-{newest}.index"
    index.write_bytes(index.read_bytes()[:100])  # a damaged newest state
    result = ws.run("train", "--config", victim, "--no-evaluate")
    summary = ws.summary("victim")
    if result.returncode or not summary.get("finished"):
        return "CRASH", result.stderr.strip()[-300:]
    if not 0 < summary["resumed_from_step"] < newest:
        return "LOSS", f"resumed from {summary['resumed_from_step']}"
    return (
        "RESUMED",
        f"killed past step {newest}, resumed from {summary['resumed_from_step']}",
    )


def diverging(ws, argv):
    result = ws.run(*argv)
    summary = ws.summary("nan")
    if summary.get("finished"):
        return "SILENT", "a NaN run marked finished"
    import numpy as np

    with _quiet_stderr():  # TensorFlow's start-up lines
        import tensorflow as tf

    for index in sorted((ws.root / "nan" / "checkpoints").glob("ckpt-*.index")):
        reader = tf.train.load_checkpoint(str(index.with_suffix("")))
        for name in reader.get_variable_to_shape_map():
            value = np.asarray(reader.get_tensor(name))
            if np.issubdtype(value.dtype, np.floating) and not np.isfinite(value).all():
                return "LOSS", f"{index.name} holds non-finite {name}"
    last = (result.stderr.strip().splitlines() or [""])[-1]
    if result.returncode != 1 or "the loss became" not in last:
        return "VAGUE", last
    return "ERROR", last


@contextlib.contextmanager
def _quiet_stderr():
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def model_with_recipe(name, text):
    def setup(ws):
        ws.copy_run(name)
        _write(ws, f"{name}/config.yaml", text)

    return setup


def translate_ctrl_c(ws, argv):
    """Ctrl-C while `translate` waits for its input (a pipe left open)."""
    process = ws.start(*argv, stdin=subprocess.PIPE)
    try:
        time.sleep(10)  # started, the translator loaded, reading stdin
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=60)
        lines = process.stderr.read().strip().splitlines()
    finally:
        if process.poll() is None:
            process.kill()
    if "Traceback" in "\n".join(lines):
        return "CRASH", lines[-1]
    if code == 130 and lines == ["keras-transformer translate: interrupted"]:
        return "INTERRUPTED", lines[-1]
    return "VAGUE", f"status {code}: {lines[-1:]}"


def cases(ws: Workspace) -> list:
    """`(name, expected, function, argv)`."""
    r = ws.recipe
    return [
        # Recipes: refused before anything is written.
        (
            "missing_recipe",
            "ERROR",
            expect_error("train", "nope.yaml"),
            ["train", "--config", "nope.yaml"],
        ),
        (
            "yaml_syntax",
            "ERROR",
            expect_error("train", "bad.yaml, line 3: expected"),
            ["train", "--config", "bad.yaml"],
        ),
        (
            "duplicate_key",
            "ERROR",
            expect_error("train", "duplicate key training.steps"),
            ["train", "--config", "twice.yaml"],
        ),
        (
            "unknown_key",
            "ERROR",
            expect_error("train", "did you mean training.steps"),
            ["train", "--config", "typo.yaml"],
        ),
        (
            "renamed_key",
            "ERROR",
            expect_error("train", "evaluation.batch_tokens"),
            ["train", "--config", "renamed.yaml"],
        ),
        (
            "lr_scale_inf",
            "ERROR",
            expect_error("train", "training.lr_scale: inf"),
            ["train", "--config", r("inf.yaml", training={"lr_scale": float("inf")})],
        ),
        (
            "lr_scale_nan",
            "ERROR",
            expect_error("train", "training.lr_scale: nan"),
            ["train", "--config", r("nan.yaml", training={"lr_scale": float("nan")})],
        ),
        (
            "minutes_flag_inf",
            "ERROR",
            expect_error("train", "--minutes"),
            ["train", "--config", "recipe.yaml", "--minutes", "inf"],
        ),
        (
            "vocab_size_below_schema",
            "ERROR",
            expect_error("train", "tokenizer.vocab_size: 10"),
            ["train", "--config", r("v10.yaml", "v10", tokenizer={"vocab_size": 10})],
        ),
        (
            "vocab_size_below_corpus",
            "ERROR",
            expect_error("train", "tokenizer.vocab_size: 270"),
            [
                "train",
                "--config",
                r("v270.yaml", "v270", tokenizer={"vocab_size": 270}),
            ],
        ),
        (
            "corrected_recipe_after_a_failed_start",
            "OK",
            corrected_after_failed_start,
            ["train", "--config", r("v300.yaml", "v270"), "--no-evaluate"],
        ),
        (
            "missing_data_file",
            "ERROR",
            expect_error("train", "data.train_files: no such file"),
            [
                "train",
                "--config",
                r("nofile.yaml", data={"train_files": ["nope.en", "nope.de"]}),
            ],
        ),
        (
            "empty_train_files",
            "ERROR",
            empty_train_files,
            [
                "train",
                "--config",
                r(
                    "empty.yaml",
                    "empty_run",
                    data={"train_files": ["empty.en", "empty.de"]},
                ),
            ],
        ),
        # Output directories.
        (
            "output_is_a_file",
            "ERROR",
            output_is_a_file,
            ["train", "--config", r("file.yaml", "a_file")],
        ),
        (
            "directory_of_other_files",
            "ERROR",
            foreign_dir,
            ["train", "--config", r("mine.yaml", "mine")],
        ),
        (
            "overwrite_beside_foreign_files",
            "ERROR",
            overwrite_beside_foreign,
            ["train", "--config", r("beside.yaml", "beside"), "--overwrite"],
        ),
        (
            "run_of_another_recipe",
            "ERROR",
            expect_error("train", "another recipe", "warmup_steps"),
            [
                "train",
                "--config",
                r("other.yaml", "finished", training={"warmup_steps": 11}),
            ],
        ),
        (
            "finished_run_again",
            "OK",
            expect_unchanged_ok,
            ["train", "--config", r("finished.yaml", "finished")],
        ),
        (
            "finished_run_by_absolute_path",
            "OK",
            expect_unchanged_ok,
            [
                "train",
                "--config",
                "finished.yaml",
                "--output",
                f"{ws.root / 'finished'}/",
            ],
        ),
        (
            "moved_run_trained_on",
            "RESUMED",
            moved_run,
            [
                "train",
                "--config",
                r("moved.yaml", "moved/here"),
                "--steps",
                "5",
                "--no-evaluate",
            ],
        ),
        (
            "overwrite_own_run",
            "OK",
            overwrite_own_run,
            [
                "train",
                "--config",
                r("again.yaml", "again"),
                "--overwrite",
                "--no-evaluate",
            ],
        ),
        (
            "overwrite_run_of_earlier_version",
            "OK",
            overwrite_run_of_earlier_version,
            ["train", "--config", r("earlier.yaml", "earlier"), "--overwrite"],
        ),
        # Processes.
        ("second_process+sigint+rerun", None, second_process_then_ctrl_c, []),
        ("kill_9_damaged_newest_state", "RESUMED", kill_9_and_damage, []),
        (
            "loss_becomes_nan",
            "ERROR",
            diverging,
            [
                "train",
                "--config",
                r("diverge.yaml", "nan", training={"lr_scale": 1e30, "steps": 6}),
                "--no-evaluate",
            ],
        ),
        # Using a model.
        (
            "model_recipe_is_a_list",
            "ERROR",
            expect_error(
                "translate",
                "listed/config.yaml",
                "got a list",
                setup=model_with_recipe("listed", "- a\n"),
            ),
            ["translate", "--model", "listed"],
        ),
        (
            "model_beam_size_abc",
            "ERROR",
            expect_error(
                "evaluate",
                "evaluation.beam_size: 'abc'",
                setup=model_with_recipe("abc", "evaluation: {beam_size: abc}\n"),
            ),
            [
                "evaluate",
                "--model",
                "abc",
                "--source",
                "test.en",
                "--reference",
                "test.de",
            ],
        ),
        (
            "translate_missing_model",
            "ERROR",
            expect_error("translate", "nowhere"),
            ["translate", "--model", "nowhere"],
        ),
        (
            "alpha_flag_inf",
            "ERROR",
            expect_error("translate", "--alpha"),
            ["translate", "--model", "finished", "--alpha", "inf"],
        ),
        (
            "evaluate_empty_files",
            "ERROR",
            expect_error("evaluate", "no sentence pairs"),
            [
                "evaluate",
                "--model",
                "finished",
                "--source",
                "empty.en",
                "--reference",
                "empty.de",
            ],
        ),
        (
            "evaluate_unaligned_files",
            "ERROR",
            expect_error("evaluate", "same number of lines"),
            [
                "evaluate",
                "--model",
                "finished",
                "--source",
                "test.en",
                "--reference",
                "short.de",
            ],
        ),
        (
            "export_out_dot",
            "ERROR",
            expect_error("export", "--out: '.'"),
            ["export", "--model", "finished", "--out", ".", "--overwrite"],
        ),
        (
            "export_into_other_files",
            "ERROR",
            expect_error("export", "not a SavedModel"),
            ["export", "--model", "finished", "--out", "finished"],
        ),
        (
            "export_trailing_slash",
            "OK",
            expect_unchanged_ok_export,
            ["export", "--model", "finished", "--out", "exported/"],
        ),
        (
            "translate_ctrl_c",
            "INTERRUPTED",
            translate_ctrl_c,
            ["translate", "--model", "finished"],
        ),
    ]


def expect_unchanged_ok_export(ws, argv):
    before = {k: v for k, v in ws.files().items() if not k.startswith("exported")}
    result = ws.run(*argv)
    after = {k: v for k, v in ws.files().items() if not k.startswith("exported")}
    if after != before:
        return "LOSS", "files beside the export changed"
    if result.returncode or not (ws.root / "exported" / "saved_model.pb").exists():
        return "CRASH", result.stderr.strip()[-300:]
    return "OK", result.stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", help="run only these cases")
    parser.add_argument("--keep", help="work in this (new) directory and keep it")
    args = parser.parse_args()
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="faults-"))
    root.mkdir(parents=True, exist_ok=True)
    ws = Workspace(root)
    _write(ws, "bad.yaml", "training:\n  steps: [\n")
    _write(ws, "twice.yaml", "training:\n  steps: 3\n  steps: 5\n")
    _write(ws, "typo.yaml", "training: {stepz: 3}\n")
    _write(ws, "renamed.yaml", "evaluation: {batch_size: 64}\n")
    _write(ws, "short.de", "eine Katze\n")
    _write(ws, "empty.en", "")
    _write(ws, "empty.de", "")
    ws.recipe("recipe.yaml")
    started = time.monotonic()
    trained = ws.run("train", "--config", ws.recipe("finished.yaml", "finished"))
    if trained.returncode:
        print(trained.stderr[-3000:], file=sys.stderr)
        return 1
    print(f"(a finished run to work on: {time.monotonic() - started:.0f} s)")
    results = []
    for name, expected, function, argv in cases(ws):
        if args.only and name not in args.only:
            continue
        start = time.monotonic()
        try:
            outcome = function(ws, argv)
        except Exception as error:  # noqa: BLE001 - the suite reports it
            outcome = ("CRASH", f"{type(error).__name__}: {error}")
        rows = outcome if isinstance(outcome, list) else [(name, expected, *outcome)]
        for row_name, row_expected, observed, detail in rows:
            mark = "ok  " if observed == row_expected else "FAIL"
            print(
                f"{mark} {row_name:38s} {row_expected:11s} {observed:11s} "
                f"{time.monotonic() - start:5.0f} s  {detail[:150]}",
                flush=True,
            )
            results.append((row_name, row_expected, observed))
    counts = collections.Counter(observed for _, _, observed in results)
    classes = ["OK", "ERROR", "INTERRUPTED", "RESUMED"]
    classes += ["VAGUE", "CRASH", "LITTER", "LOSS", "SILENT"]
    print(", ".join(f"{counts.get(c, 0)} {c}" for c in classes))
    failed = [name for name, expected, observed in results if observed != expected]
    print(f"{len(results) - len(failed)} of {len(results)} cases as expected")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.exit(main())
