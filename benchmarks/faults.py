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
- SILENT: status 0 with a wrong result (a NaN run marked finished, the
  code of a model or of a translator that was refused run).

A case passes when its class is the one it expects; the suite prints one
line per case and the count per class, and exits with status 1 if any case
differs. With `--markdown` it prints them as the tables of docs/training.md
(each case, what it does, its expected and its observed class; the count
per class), the lines per case going to stderr; `--list` prints the cases
and their expected classes without running them. About 5 minutes on 2 CPU
cores.

Usage (from the repository root):

    .venv/bin/python benchmarks/faults.py [--only NAME ...] [--keep DIR]
        [--markdown | --list]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import gzip
import hashlib
import json
import os
import re
import shlex
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
CLASSES = ["OK", "ERROR", "INTERRUPTED", "RESUMED"]
CLASSES += ["VAGUE", "CRASH", "LITTER", "LOSS", "SILENT"]
DEMO = ["demo", "--minutes", "0.02"]  # a step or two, then 1000 test sentences


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

    def finished_demo(self, name: str) -> str:
        """A finished demo in `name`: the one demo run, copied."""
        if not (self.root / "demo" / "summary.json").exists():
            result = self.run(*DEMO, "--output", "demo")
            if result.returncode:
                raise RuntimeError(f"the demo failed: {result.stderr[-500:]}")
        shutil.copytree(self.root / "demo", self.root / name)
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
        stopped = _stop_and_rerun(ws, long, "long", first, signal.SIGINT)
    finally:
        if first.poll() is None:
            first.kill()
    return [(lock_class, (second.stderr.strip().splitlines() or [""])[-1]), *stopped]


def signal_then_rerun(number):
    def case(ws, argv):
        """A run in training stopped by signal `number`; a rerun."""
        name = signal.Signals(number).name.lower()
        recipe = ws.recipe(f"{name}.yaml", name, training={"steps": 100_000})
        process = ws.start("train", "--config", recipe, "--no-evaluate")
        try:
            checkpoints = ws.root / name / "checkpoints"
            _wait_for(lambda: _newest_step(checkpoints) >= 2, process, "checkpoint")
            return _stop_and_rerun(ws, recipe, name, process, number)
        finally:
            if process.poll() is None:
                process.kill()

    return case


def _stop_and_rerun(ws, recipe, run, process, number):
    """Signal `number` to the `process` training `run`, then the same
    command, 2 steps further: the two rows' `(class, detail)`."""
    process.send_signal(number)
    code = process.wait(timeout=TIMEOUT)
    err = process.stderr.read()
    last = (err.strip().splitlines() or [""])[-1]
    stopped = _newest_step(ws.root / run / "checkpoints")
    said = f"keras-transformer train: {signal.Signals(number).name} at step {stopped}:"
    if "Traceback" in err:
        stop_class = "CRASH"
    elif code == 130 and last.startswith(said) and "the same command again" in last:
        stop_class = "INTERRUPTED"
    else:
        stop_class = "VAGUE"
    rerun = ws.run(
        "train", "--config", recipe, "--no-evaluate", "--steps", str(stopped + 2)
    )
    summary = ws.summary(run)
    resumed = (
        "RESUMED"
        if rerun.returncode == 0
        and summary.get("finished")
        and summary.get("resumed_from_step") == stopped
        else "LOSS"
    )
    return [(stop_class, last), (resumed, f"from step {stopped}")]


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


# Translators and models from elsewhere.

INPUT = "".join(f"{source}\n" for source in SOURCES)


def _keras():
    """Keras, with the model's classes registered (TensorFlow's start-up
    lines kept off the suite's stderr)."""
    with _quiet_stderr():
        import keras

        import keras_transformer.models  # noqa: F401

    return keras


def _retrain(model_file: Path) -> None:
    """`model_file` saved again with other weights, as more training does."""
    import numpy as np

    keras = _keras()
    model = keras.models.load_model(model_file, compile=False)
    noise = np.random.default_rng(0)
    model.set_weights(
        [w + 0.5 * noise.standard_normal(w.shape) for w in model.get_weights()]
    )
    model.save(model_file)


def _foreign_translator(directory: Path, marker: Path) -> None:
    """A SavedModel with the exported translator's interface and version,
    made by someone else: each translation writes `marker` and says FOREIGN.
    """
    with _quiet_stderr():
        import tensorflow as tf

        from keras_transformer import __version__

    class Foreign(tf.Module):
        @tf.function(input_signature=[])
        def settings(self):
            return {
                "version": tf.constant(__version__),
                "max_length": tf.constant(0),
                "source_limit": tf.constant(63),
            }

        @tf.function(
            input_signature=[
                tf.TensorSpec([None], tf.string),
                tf.TensorSpec([], tf.int32),
                tf.TensorSpec([], tf.float32),
            ]
        )
        def translate(self, sentences, beam_size, alpha):
            with tf.control_dependencies([tf.io.write_file(str(marker), "ran")]):
                count = tf.shape(sentences)[0]
            return {
                "translations": tf.fill([count], "FOREIGN"),
                "truncated": tf.zeros([count], tf.bool),
            }

    tf.saved_model.save(Foreign(), str(directory))


def _sign_elsewhere(model_dir: Path) -> None:
    """Signs `model_dir`'s translator with another account's key."""
    from keras_transformer.jobs import trust

    elsewhere = tempfile.mkdtemp(prefix="faults-elsewhere-")
    saved = os.environ.get("XDG_CONFIG_HOME")
    os.environ["XDG_CONFIG_HOME"] = elsewhere
    try:
        trust.sign_translator(model_dir / "translator", *trust.model_files(model_dir))
    finally:
        if saved is None:
            del os.environ["XDG_CONFIG_HOME"]
        else:
            os.environ["XDG_CONFIG_HOME"] = saved
        shutil.rmtree(elsewhere, ignore_errors=True)


def _translated_without(result, reason: str, before: dict, after: dict, marker=None):
    """The class of a `translate` that must pass over its translator/
    (saying `reason`) and translate with model.keras."""
    out = result.stdout.splitlines()
    if (marker is not None and marker.exists()) or "FOREIGN" in result.stdout:
        return "SILENT", "the refused translator ran"
    if {k for k in before if after.get(k) != before[k]}:
        return "LOSS", "files changed"
    if "Traceback" in result.stderr:
        return "CRASH", result.stderr.strip()[-300:]
    if result.returncode or len(out) != len(SOURCES):
        return "CRASH", (result.stderr.strip().splitlines() or [""])[-1]
    said = [line for line in result.stderr.splitlines() if "Not loading" in line]
    if len(said) != 1 or reason not in said[0]:
        return "VAGUE", (result.stderr.strip().splitlines() or [""])[-1]
    return "OK", said[0]


def stale_translator(ws, argv):
    """model.keras changed after the export; then the export it suggests."""
    run = ws.copy_run("stale")
    _retrain(ws.root / run / "model.keras")
    before = ws.files()
    first = ws.run(*argv, stdin=INPUT)
    stale = _translated_without(first, "it is stale", before, ws.files())
    suggested = re.search(r"\((keras-transformer export .*) makes one", first.stderr)
    if suggested is None:
        return [stale, ("VAGUE", "no command suggested")]
    exported = ws.run(*shlex.split(suggested[1])[1:])  # as printed
    second = ws.run(*argv, stdin=INPUT)
    if exported.returncode or second.returncode:
        again = ("CRASH", ((exported.stderr + second.stderr).strip()[-300:]))
    elif "Not loading" in second.stderr or "Not using" in second.stderr:
        again = ("VAGUE", "the new translator was passed over too")
    elif second.stdout != first.stdout:
        again = ("SILENT", "the new translator translates otherwise")
    else:
        again = ("OK", f"{suggested[1]}: the same translations")
    return [stale, again]


def foreign_translator(signed_elsewhere: bool):
    def case(ws, argv):
        """translator/ made elsewhere: it must not run."""
        run = argv[argv.index("--model") + 1]
        ws.copy_run(run)
        shutil.rmtree(ws.root / run / "translator")
        marker = ws.root / f"{run}_ran"
        _foreign_translator(ws.root / run / "translator", marker)
        if signed_elsewhere:
            _sign_elsewhere(ws.root / run)
        reason = "another key" if signed_elsewhere else "no signature"
        before = ws.files()
        result = ws.run(*argv, stdin=INPUT)
        return _translated_without(result, reason, before, ws.files(), marker)

    return case


def _model_with_code(model_file: Path, marker: Path) -> None:
    """A model.keras whose `Lambda` layer writes `marker` when it runs."""
    keras = _keras()
    inputs = keras.Input((None,), dtype="int32")
    path = str(marker)
    code = keras.layers.Lambda(lambda x: (open(path, "w").write("ran"), x)[1])
    model = keras.Model(inputs, code(inputs))
    marker.unlink()  # (written when the model was built)
    model.save(model_file)


def model_holding_code(ws):
    """A run whose model.keras was replaced by one that holds code."""
    ws.copy_run("coded")
    shutil.rmtree(ws.root / "coded" / "translator")
    (ws.root / "coded" / "model.keras").unlink()
    _model_with_code(ws.root / "coded" / "model.keras", ws.root / "coded_ran")


# The demo.


def demo_overwrite_beside_foreign_files(ws, argv):
    ws.finished_demo("demo_beside")
    _write(ws, "demo_beside/notes.txt", "my notes")
    return expect_error("demo", "no run wrote (notes.txt)")(ws, argv)


def demo_overwrite_finished(ws, argv):
    """`demo --overwrite` on a finished demo: it starts over."""
    run = ws.finished_demo("demo_again")
    before = {k: v for k, v in ws.files().items() if not k.startswith(run)}
    files = ws.files().items()
    logs = {k for k, v in files if k.startswith(f"{run}/logs/") and v != "dir"}
    result = ws.run(*argv)
    after = {k: v for k, v in ws.files().items() if not k.startswith(run)}
    summary = ws.summary(run)
    if after != before:
        return "LOSS", "files beside the demo changed"
    if result.returncode or "Traceback" in result.stderr:
        return "CRASH", result.stderr.strip()[-300:]
    written = ["test.en", "test.de", "cross_attention.png", "model.keras"]
    if not all((ws.root / run / name).exists() for name in written):
        return "LOSS", "a file of the demo is missing"
    if not summary.get("finished") or summary.get("resumed_from_step") != 0:
        return "SILENT", "not a new demo"
    if summary.get("demo") is None or "extended" in summary:
        return "SILENT", "not a new demo"
    if logs & set(ws.files()):
        return "SILENT", "the first demo's logs are there: not started over"
    return "OK", f"a new demo: {summary['steps']} steps, test scored again"


def one(name, expected, what, function, argv):
    """A case of one row."""
    return [(name, expected, what)], function, argv


def cases(ws: Workspace) -> list:
    """`(rows, function, argv)`: each row `(name, expected class, what the
    case does)`; `function(ws, argv)` returns the `(class, detail)` of its
    one row, or a list of them, one per row."""
    r = ws.recipe
    return [
        # Recipes: refused before anything is written.
        one(
            "missing_recipe",
            "ERROR",
            "`train --config` names no file",
            expect_error("train", "nope.yaml"),
            ["train", "--config", "nope.yaml"],
        ),
        one(
            "yaml_syntax",
            "ERROR",
            "a recipe that is not YAML",
            expect_error("train", "bad.yaml, line 3: expected"),
            ["train", "--config", "bad.yaml"],
        ),
        one(
            "duplicate_key",
            "ERROR",
            "a recipe that sets `training.steps` twice",
            expect_error("train", "duplicate key training.steps"),
            ["train", "--config", "twice.yaml"],
        ),
        one(
            "unknown_key",
            "ERROR",
            "a misspelt key, `training.stepz`",
            expect_error("train", "did you mean training.steps"),
            ["train", "--config", "typo.yaml"],
        ),
        one(
            "renamed_key",
            "ERROR",
            "a key renamed since, `evaluation.batch_size`",
            expect_error("train", "evaluation.batch_tokens"),
            ["train", "--config", "renamed.yaml"],
        ),
        one(
            "lr_scale_inf",
            "ERROR",
            "`training.lr_scale: .inf`",
            expect_error("train", "training.lr_scale: inf"),
            ["train", "--config", r("inf.yaml", training={"lr_scale": float("inf")})],
        ),
        one(
            "lr_scale_nan",
            "ERROR",
            "`training.lr_scale: .nan`",
            expect_error("train", "training.lr_scale: nan"),
            ["train", "--config", r("nan.yaml", training={"lr_scale": float("nan")})],
        ),
        one(
            "minutes_flag_inf",
            "ERROR",
            "`train --minutes inf`",
            expect_error("train", "--minutes"),
            ["train", "--config", "recipe.yaml", "--minutes", "inf"],
        ),
        one(
            "vocab_size_below_schema",
            "ERROR",
            "`tokenizer.vocab_size: 10`, below the smallest allowed",
            expect_error("train", "tokenizer.vocab_size: 10"),
            ["train", "--config", r("v10.yaml", "v10", tokenizer={"vocab_size": 10})],
        ),
        one(
            "vocab_size_below_corpus",
            "ERROR",
            "`tokenizer.vocab_size: 270`, too few for the corpus",
            expect_error("train", "tokenizer.vocab_size: 270"),
            [
                "train",
                "--config",
                r("v270.yaml", "v270", tokenizer={"vocab_size": 270}),
            ],
        ),
        one(
            "corrected_recipe_after_a_failed_start",
            "OK",
            "the same output directory, the vocabulary size corrected",
            corrected_after_failed_start,
            ["train", "--config", r("v300.yaml", "v270"), "--no-evaluate"],
        ),
        one(
            "missing_data_file",
            "ERROR",
            "`data.train_files` names no file",
            expect_error("train", "data.train_files: no such file"),
            [
                "train",
                "--config",
                r("nofile.yaml", data={"train_files": ["nope.en", "nope.de"]}),
            ],
        ),
        one(
            "empty_train_files",
            "ERROR",
            "empty training files",
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
        one(
            "output_is_a_file",
            "ERROR",
            "`output_dir` is a file",
            output_is_a_file,
            ["train", "--config", r("file.yaml", "a_file")],
        ),
        one(
            "directory_of_other_files",
            "ERROR",
            "`output_dir` holds the user's files",
            foreign_dir,
            ["train", "--config", r("mine.yaml", "mine")],
        ),
        one(
            "overwrite_beside_foreign_files",
            "ERROR",
            "`--overwrite` on a run beside a file of the user's",
            overwrite_beside_foreign,
            ["train", "--config", r("beside.yaml", "beside"), "--overwrite"],
        ),
        one(
            "run_of_another_recipe",
            "ERROR",
            "a finished run, and a recipe with another `warmup_steps`",
            expect_error("train", "another recipe", "warmup_steps"),
            [
                "train",
                "--config",
                r("other.yaml", "finished", training={"warmup_steps": 11}),
            ],
        ),
        one(
            "finished_run_again",
            "OK",
            "the same command on a finished run: nothing written",
            expect_unchanged_ok,
            ["train", "--config", r("finished.yaml", "finished")],
        ),
        one(
            "finished_run_by_absolute_path",
            "OK",
            "the same, `--output` an absolute path with a trailing `/`",
            expect_unchanged_ok,
            [
                "train",
                "--config",
                "finished.yaml",
                "--output",
                f"{ws.root / 'finished'}/",
            ],
        ),
        one(
            "moved_run_trained_on",
            "RESUMED",
            "a finished run, moved, trained 2 steps further",
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
        one(
            "overwrite_own_run",
            "OK",
            "`--overwrite` on a finished run: trained anew",
            overwrite_own_run,
            [
                "train",
                "--config",
                r("again.yaml", "again"),
                "--overwrite",
                "--no-evaluate",
            ],
        ),
        one(
            "overwrite_run_of_earlier_version",
            "OK",
            "`--overwrite` on a run without `run.json` (earlier versions)",
            overwrite_run_of_earlier_version,
            ["train", "--config", r("earlier.yaml", "earlier"), "--overwrite"],
        ),
        # Processes.
        (
            [
                ("second_process", "ERROR", "`train` on a run another is training"),
                ("sigint_in_training", "INTERRUPTED", "Ctrl-C (SIGINT) in training"),
                ("rerun_after_sigint", "RESUMED", "the same command again"),
            ],
            second_process_then_ctrl_c,
            [],
        ),
        (
            [
                ("sigterm_in_training", "INTERRUPTED", "SIGTERM in training"),
                ("rerun_after_sigterm", "RESUMED", "the same command again"),
            ],
            signal_then_rerun(signal.SIGTERM),
            [],
        ),
        one(
            "kill_9_damaged_newest_state",
            "RESUMED",
            "`kill -9` in training, the newest state truncated, a rerun",
            kill_9_and_damage,
            [],
        ),
        one(
            "loss_becomes_nan",
            "ERROR",
            "`lr_scale: 1e30`: the loss becomes NaN",
            diverging,
            [
                "train",
                "--config",
                r("diverge.yaml", "nan", training={"lr_scale": 1e30, "steps": 6}),
                "--no-evaluate",
            ],
        ),
        # Using a model.
        one(
            "model_recipe_is_a_list",
            "ERROR",
            "`translate` a model whose `config.yaml` is a list",
            expect_error(
                "translate",
                "listed/config.yaml",
                "got a list",
                setup=model_with_recipe("listed", "- a\n"),
            ),
            ["translate", "--model", "listed"],
        ),
        one(
            "model_beam_size_abc",
            "ERROR",
            "`evaluate` a model whose recipe says `beam_size: abc`",
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
        one(
            "translate_missing_model",
            "ERROR",
            "`translate --model` names no directory",
            expect_error("translate", "nowhere"),
            ["translate", "--model", "nowhere"],
        ),
        one(
            "alpha_flag_inf",
            "ERROR",
            "`translate --alpha inf`",
            expect_error("translate", "--alpha"),
            ["translate", "--model", "finished", "--alpha", "inf"],
        ),
        one(
            "model_holds_code",
            "ERROR",
            "`translate` a model.keras holding a `Lambda`: its code never runs",
            expect_error(
                "translate",
                "coded/model.keras",
                "Keras's safe mode does not run",
                setup=model_holding_code,
            ),
            ["translate", "--model", "coded"],
        ),
        (
            [
                (
                    "stale_translator",
                    "OK",
                    "model.keras changed after the export: passed over",
                ),
                (
                    "stale_translator_exported_again",
                    "OK",
                    "the `export` that message prints, then `translate`",
                ),
            ],
            stale_translator,
            ["translate", "--model", "stale", "--beam", "1"],
        ),
        one(
            "foreign_translator_unsigned",
            "OK",
            "a translator/ made elsewhere, unsigned: never run",
            foreign_translator(signed_elsewhere=False),
            ["translate", "--model", "unsigned", "--beam", "1"],
        ),
        one(
            "foreign_translator_signed_elsewhere",
            "OK",
            "the same, signed with another account's key: never run",
            foreign_translator(signed_elsewhere=True),
            ["translate", "--model", "elsewhere", "--beam", "1"],
        ),
        one(
            "evaluate_empty_files",
            "ERROR",
            "`evaluate` on empty files",
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
        one(
            "evaluate_unaligned_files",
            "ERROR",
            "`evaluate` on files of 6 and 1 lines",
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
        one(
            "export_out_dot",
            "ERROR",
            "`export --out . --overwrite`",
            expect_error("export", "--out: '.'"),
            ["export", "--model", "finished", "--out", ".", "--overwrite"],
        ),
        one(
            "export_into_other_files",
            "ERROR",
            "`export --out` a run directory",
            expect_error("export", "not a SavedModel"),
            ["export", "--model", "finished", "--out", "finished"],
        ),
        one(
            "export_trailing_slash",
            "OK",
            "`export --out exported/`",
            expect_unchanged_ok_export,
            ["export", "--model", "finished", "--out", "exported/"],
        ),
        one(
            "translate_ctrl_c",
            "INTERRUPTED",
            "Ctrl-C while `translate` reads its input",
            translate_ctrl_c,
            ["translate", "--model", "finished"],
        ),
        # The demo.
        one(
            "demo_overwrite_beside_foreign_files",
            "ERROR",
            "`demo --overwrite` on a demo beside a file of the user's",
            demo_overwrite_beside_foreign_files,
            [*DEMO, "--output", "demo_beside", "--overwrite"],
        ),
        one(
            "demo_overwrite_finished_demo",
            "OK",
            "`demo --overwrite` on a finished demo: started over",
            demo_overwrite_finished,
            [*DEMO, "--output", "demo_again", "--overwrite"],
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
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument(
        "--markdown", action="store_true", help="print the results as tables"
    )
    shown.add_argument("--list", action="store_true", help="print the cases, run none")
    args = parser.parse_args()
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="faults-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        return run_suite(root, args)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


def run_suite(root: Path, args) -> int:
    ws = Workspace(root)
    chosen = [
        case
        for case in cases(ws)
        if not args.only or {row[0] for row in case[0]} & set(args.only)
    ]
    if args.list:
        print(markdown([(*row, None) for case in chosen for row in case[0]]))
        return 0
    progress = sys.stderr if args.markdown else sys.stdout
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
    print(
        f"(a finished run to work on: {time.monotonic() - started:.0f} s)",
        file=progress,
    )
    results = []
    for rows, function, argv in chosen:
        start = time.monotonic()
        try:
            outcome = function(ws, argv)
        except Exception as error:  # noqa: BLE001 - the suite reports it
            outcome = [("CRASH", f"{type(error).__name__}: {error}")] * len(rows)
        if not isinstance(outcome, list):
            outcome = [outcome]
        for (name, expected, what), (observed, detail) in zip(
            rows, outcome, strict=True
        ):
            mark = "ok  " if observed == expected else "FAIL"
            print(
                f"{mark} {name:38s} {expected:11s} {observed:11s} "
                f"{time.monotonic() - start:5.0f} s  {detail[:150]}",
                file=progress,
                flush=True,
            )
            results.append((name, expected, what, observed))
    counts = collections.Counter(observed for *_, observed in results)
    failed = [row for row in results if row[3] != row[1]]
    summary = f"{len(results) - len(failed)} of {len(results)} cases as expected"
    minutes = (time.monotonic() - started) / 60
    if args.markdown:
        print(markdown(results))
        print()
        print("| " + " | ".join(CLASSES) + " |")
        print("|" + "---|" * len(CLASSES))
        print("| " + " | ".join(str(counts.get(c, 0)) for c in CLASSES) + " |")
        print(f"\n{summary} ({minutes:.0f} minutes).")
    else:
        print(", ".join(f"{counts.get(c, 0)} {c}" for c in CLASSES))
        print(f"{summary} ({minutes:.0f} minutes)")
    return 1 if failed else 0


def markdown(rows) -> str:
    """The table of `(name, expected, what, observed)` rows (observed
    `None`: not run, no column)."""
    ran = any(row[3] is not None for row in rows)
    head = "| case | what it does | expected |" + (" observed |" if ran else "")
    lines = [head, "|---|---|---|" + ("---|" if ran else "")]
    for name, expected, what, observed in rows:
        line = f"| `{name}` | {what} | {expected} |"
        lines.append(line + (f" {observed} |" if ran else ""))
    return "\n".join(lines)


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.exit(main())
