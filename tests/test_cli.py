"""The command line: errors users meet, and a whole train-to-export run.

Each bad input is one line on stderr, exit status 2, and leaves the files on
disk as they were (`_snapshot` before and after).
"""

import configparser
import gc
import gzip
import json
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

import pytest
import yaml
from helpers import model_dir_with_code
from sacrebleu.metrics import BLEU

import keras_transformer_cli
from keras_transformer import __version__, cli
from keras_transformer.jobs.run_dir import load_trained
from keras_transformer.training.precision import POLICIES
from keras_transformer_cli import parser as cli_parser

SOURCES = ["one cat", "two cats", "three dogs", "a dog", "four birds", "one bird"]
TARGETS = [
    "eine Katze",
    "zwei Katzen",
    "drei Hunde",
    "ein Hund",
    "vier Vögel",
    "ein Vogel",
]
# The `keras-transformer` executable's entry point, as a module.
PYTHON = [sys.executable, "-m", "keras_transformer_cli"]
SETUP_CFG = pathlib.Path(__file__).parents[1] / "setup.cfg"


def _write(path, lines, gz=False):
    text = "\n".join(lines) + "\n"
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return str(path)


def _snapshot(directory):
    """Every file under `directory`, with its content."""
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def _recipe(tmp_path, **sections):
    src = _write(tmp_path / "train.en.gz", SOURCES * 4, gz=True)
    tgt = _write(tmp_path / "train.de.gz", TARGETS * 4, gz=True)
    recipe = {
        "data": {
            "corpus": "files",
            "train_files": [src, tgt],
            "test_files": [src, tgt],
            "max_length": 16,
        },
        "tokenizer": {"vocab_size": 300},
        "model": {
            "preset": "tiny",
            "overrides": {"num_layers": 1, "d_model": 16, "num_heads": 2, "d_ff": 32},
        },
        "training": {
            "steps": 3,
            "warmup_steps": 10,
            "average_last": 2,
            "checkpoint_minutes": 0.001,
            "snapshot_minutes": [0.0001],  # Reached after the first step.
            "token_budget": 64,
        },
        "evaluation": {"beam_size": 2, "batch_tokens": 64},
        "output_dir": str(tmp_path / "run"),
    }
    for key, value in sections.items():
        recipe[key] = {**recipe.get(key, {}), **value}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


def _error(capsys, argv, *fragments):
    """Runs the command; checks exit 2 and one error line naming `fragments`."""
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"keras-transformer {argv[0]}: error: "), err
    for fragment in fragments:
        assert fragment in err[0], err
    return err[0]


def test_no_command_prints_help_once(capsys):
    assert cli.main([]) == 2
    lines = capsys.readouterr().out.splitlines()
    listed = [line.split()[0] for line in lines if line.startswith("    ")]
    assert listed.count("translate") == 1 and "demo" in listed


def test_version(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"keras-transformer {__version__}"


def test_the_version_is_the_installed_distributions():
    # Read without importing the library: the distribution setup.cfg names.
    setup = configparser.ConfigParser()
    setup.read(SETUP_CFG)
    assert cli_parser.DISTRIBUTION == setup["metadata"]["name"]
    assert cli_parser.version() == __version__


def test_the_version_of_an_uninstalled_copy(monkeypatch):
    monkeypatch.setattr(cli_parser, "DISTRIBUTION", "no-such-distribution")
    assert cli_parser.version() == "(version unknown: not installed)"


def test_every_option_has_help():
    parser = cli_parser.build_parser()
    commands = parser._subparsers._group_actions[0].choices  # argparse has no API
    for name, command in {"": parser, **commands}.items():
        for action in command._actions:
            assert action.help, f"{name} {action.option_strings or action.dest}"


@pytest.mark.parametrize(
    ("argv", "verbose"),
    [
        ([], False),
        (["demo"], False),
        (["-v", "demo"], True),
        (["demo", "-v"], True),
        (["--verbose", "train", "--config", "C"], True),
    ],
)
def test_verbose_before_or_after_the_command(argv, verbose):
    assert cli_parser.build_parser().parse_args(argv).verbose is verbose


@pytest.mark.parametrize(
    "argv, fragments",
    [
        (["train", "--config", "C", "--steps", "0"], ["--steps", "got 0"]),
        (["train", "--config", "C", "--steps", "2.5"], ["--steps", "'2.5'"]),
        (
            ["train", "--config", "C", "--checkpoint-steps", "0"],
            ["--checkpoint-steps", "got 0"],
        ),
        (["train", "--config", "C", "--minutes", "x"], ["--minutes"]),
        (
            ["train", "--config", "C", "--mixed-precision", "bfloat16"],
            ["--mixed-precision", "'bfloat16'"],
        ),
        (["translate", "--model", "M", "--beam", "0"], ["--beam", "got 0"]),
        (["translate", "--model", "M", "--alpha", "-1"], ["--alpha"]),
        (["translate", "--model", "M", "--alpha", "inf"], ["--alpha", "finite"]),
        (["evaluate", "--model", "M", "--alpha", "nan"], ["--alpha", "finite"]),
        (["train", "--config", "C", "--minutes", "inf"], ["--minutes", "finite"]),
        (["demo", "--minutes", "nan"], ["--minutes", "finite"]),
        (
            ["export", "--model", "M", "--out", "O", "--batch-tokens", "0"],
            ["--batch-tokens"],
        ),
    ],
)
def test_bad_options_are_one_line(capsys, argv, fragments):
    with pytest.raises(SystemExit) as stop:
        cli.main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("keras-transformer ")
    for fragment in fragments:
        assert fragment in err[0]


@pytest.mark.parametrize(
    "recipe_text, fragments",
    [
        (None, ["Config file not found", "missing.yaml"]),
        ("training:\n  steps: [\n", ["recipe.yaml, line 4: expected"]),
        ("training: {stepz: 3}\n", ["unknown key training.stepz", "training.steps?"]),
        ("evaluation: {alpha: '0.6'}\n", ["evaluation.alpha: '0.6'"]),
        ("training: {steps: 2.5}\n", ["training.steps: 2.5"]),
        ("training: {jit_compile: 'yes'}\n", ["training.jit_compile: 'yes'"]),
        ("training: {lr_scale: .inf}\n", ["training.lr_scale: inf", "finite"]),
        (
            "training:\n  steps: 3\n  steps: 4\n",
            ["recipe.yaml, line 3: duplicate key training.steps"],
        ),
        (
            "evaluation: {batch_size: 64}\n",
            ["evaluation.batch_size is now evaluation.batch_tokens"],
        ),
        ("model: {overrides: {num_layers: 0}}\n", ["model.overrides.num_layers: 0"]),
        (
            "data: {corpus: multi30k, data_dir: mistyped}\n",
            ["data.data_dir: no such directory: 'mistyped'"],
        ),
    ],
)
def test_bad_recipes_are_one_line_and_write_nothing(
    tmp_path, capsys, monkeypatch, recipe_text, fragments
):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / ("missing.yaml" if recipe_text is None else "recipe.yaml")
    if recipe_text is not None:
        path.write_text(recipe_text + "output_dir: out\n")
    before = _snapshot(tmp_path)
    _error(capsys, ["train", "--config", str(path)], *fragments)
    assert _snapshot(tmp_path) == before
    assert not (tmp_path / "out").exists() and not (tmp_path / "mistyped").exists()


def test_data_dir_overrides_the_recipes(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "recipe.yaml"
    path.write_text("data: {corpus: multi30k, data_dir: null}\noutput_dir: out\n")
    before = _snapshot(tmp_path)
    argv = ["train", "--config", str(path), "--data-dir", "elsewhere"]
    _error(capsys, argv, "data.data_dir: no such directory: 'elsewhere'")
    assert _snapshot(tmp_path) == before


def test_seed_checkpoint_steps_and_precision_override_the_recipes(
    tmp_path, capsys, monkeypatch
):
    path = _recipe(tmp_path)
    _error(capsys, ["train", "--config", str(path), "--seed", "-1"], "training.seed")
    seen = {}

    def train_command(config, overrides, **kwargs):
        seen.update(overrides)
        return {"steps": 0}

    monkeypatch.setattr("keras_transformer.jobs.train.train_command", train_command)
    assert cli.main(["train", "--config", str(path), "--seed", "3"]) == 0
    assert seen == {"training.seed": 3}
    seen.clear()
    argv = ["train", "--config", str(path), "--checkpoint-steps", "184"]
    assert cli.main(argv) == 0
    assert seen == {"training.checkpoint_steps": 184}
    seen.clear()
    argv = ["train", "--config", str(path), "--mixed-precision", "float32"]
    assert cli.main(argv) == 0
    assert seen == {"training.mixed_precision": "float32"}


def test_a_run_of_another_recipe_or_a_foreign_directory_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    path = _recipe(tmp_path)
    _error(capsys, ["train", "--config", str(path)], "not a training run's")
    (out / "notes.txt").unlink()
    (out / "config.yaml").write_text(yaml.safe_dump({"tokenizer": {"vocab_size": 1}}))
    before = _snapshot(tmp_path)
    _error(
        capsys,
        ["train", "--config", str(path)],
        "holds a run of another recipe",
        "--overwrite",
    )
    assert _snapshot(tmp_path) == before


def test_overwrite_refuses_a_directory_with_files_no_run_wrote(tmp_path, capsys):
    path = _recipe(tmp_path)
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.yaml").write_text(yaml.safe_dump({"tokenizer": {"vocab_size": 1}}))
    (out / "notes.txt").write_text("mine")
    (out / "plots").mkdir()
    before = _snapshot(tmp_path)
    _error(
        capsys,
        ["train", "--config", str(path), "--overwrite"],
        "holds files that no run wrote (notes.txt, plots)",
    )
    assert _snapshot(tmp_path) == before and (out / "plots").is_dir()


def test_a_diverging_run_stops_with_its_last_good_state(tmp_path, capsys):
    import numpy as np
    import tensorflow as tf

    from keras_transformer.training.checkpoints import checkpoint_prefixes

    # A rate 1e30 times the paper's: the weights overflow at once.
    path = _recipe(
        tmp_path, training={"lr_scale": 1e30, "steps": 6, "snapshot_minutes": []}
    )
    assert cli.main(["train", "--config", str(path), "--no-evaluate"]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("keras-transformer train: error: the loss became "), err
    out = tmp_path / "run"
    summary = out / "summary.json"
    assert not summary.exists() or not json.loads(summary.read_text()).get("finished")
    assert not (out / "model.keras").exists()
    # Only finite states were written; the newest is the last good one.
    saved = checkpoint_prefixes(out / "checkpoints")
    assert saved and f"step {saved[-1].rsplit('-', 1)[1]}, is kept in" in err
    for prefix in saved:
        reader = tf.train.load_checkpoint(prefix)
        for name in reader.get_variable_to_shape_map():
            value = np.asarray(reader.get_tensor(name))
            if np.issubdtype(value.dtype, np.floating):
                assert np.isfinite(value).all(), (prefix, name)


def test_evaluate_on_empty_files_is_one_line(tmp_path, capsys):
    empty = _write(tmp_path / "empty.en", [""])
    _error(
        capsys,
        ["evaluate", "--model", str(tmp_path), "--source", empty, "--reference", empty],
        "no sentence pairs to score",
        "empty.en",
    )


@pytest.mark.parametrize("out", [".", "..", "./", "/"])
def test_export_never_replaces_the_current_directory(
    tmp_path, monkeypatch, capsys, out
):
    monkeypatch.chdir(tmp_path)
    before = _snapshot(tmp_path)
    _error(
        capsys,
        ["export", "--model", str(tmp_path), "--out", out, "--overwrite"],
        f"--out: {out!r} is the current directory or holds it",
    )
    assert _snapshot(tmp_path) == before


def test_model_directory_errors_name_what_is_wrong(tmp_path, capsys):
    before = _snapshot(tmp_path)
    _error(capsys, ["translate", "--model", str(tmp_path / "none")], "not found")
    _error(capsys, ["export", "--model", str(tmp_path), "--out", "x"], "No model.keras")
    (tmp_path / "model.keras").write_bytes(b"not a zip file")
    _error(capsys, ["export", "--model", str(tmp_path), "--out", "x"], "No tokenizer")
    (tmp_path / "tokenizer").mkdir()
    (tmp_path / "tokenizer" / "tokenizer.model").write_bytes(b"\x00truncated")
    _error(capsys, ["export", "--model", str(tmp_path), "--out", "x"], "corrupt")
    assert not (tmp_path / "x").exists()
    del before


def test_a_model_that_holds_code_is_refused_in_one_line(tmp_path, capsys):
    marker = tmp_path / "ran"
    model_dir = model_dir_with_code(tmp_path / "model", marker)
    refusal = f"Not loading {model_dir / 'model.keras'}: it holds Python code"
    # As a user runs it: one line, no traceback, the code never run.
    result = subprocess.run(
        [*PYTHON, "translate", "--model", str(model_dir)],
        input="one cat\n",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"keras-transformer translate: error: {refusal}")
    assert "safe mode" in lines[0] and "corrupt" not in lines[0]
    # `evaluate` and `export` load the model the same way.
    src = _write(tmp_path / "test.en", SOURCES)
    ref = _write(tmp_path / "test.de", TARGETS)
    before = _snapshot(tmp_path)
    argv = ["--model", str(model_dir), "--source", src, "--reference", ref]
    _error(capsys, ["evaluate", *argv], refusal)
    argv = ["--model", str(model_dir), "--out", str(tmp_path / "exported")]
    _error(capsys, ["export", *argv], refusal)
    assert _snapshot(tmp_path) == before and not marker.exists()


def test_the_executable_is_the_entry_package():
    setup = configparser.ConfigParser()
    setup.read(SETUP_CFG)
    scripts = setup["options.entry_points"]["console_scripts"].strip()
    assert scripts == "keras-transformer = keras_transformer_cli:run"


def _run_entry_point(monkeypatch, argv):
    """`keras_transformer_cli.run` in this process; its exit status."""
    monkeypatch.setattr(sys, "argv", ["keras-transformer", *argv])
    # The process's objects are frozen before it exits; not this one's.
    frozen = []
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))
    with pytest.raises(SystemExit) as stop:
        keras_transformer_cli.run()
    assert frozen
    return stop.value.code


@pytest.mark.parametrize(
    ("setting", "expected"), [(None, "true"), ("false", "false"), ("true", "true")]
)
def test_the_command_asks_for_the_pool_unless_told_otherwise(
    setting, expected, monkeypatch, capsys, tmp_path
):
    monkeypatch.delenv("TF_CPU_ALLOCATOR_USE_BFC", raising=False)
    if setting is not None:
        monkeypatch.setenv("TF_CPU_ALLOCATOR_USE_BFC", setting)
    argv = ["translate", "--model", str(tmp_path / "none")]
    assert _run_entry_point(monkeypatch, argv) == 2
    assert os.environ["TF_CPU_ALLOCATOR_USE_BFC"] == expected
    assert "Model directory not found" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "level"),
    [
        ([], "3"),
        (["-v"], None),
        (["--verb"], None),
        (["--", "-v"], "3"),  # A file named `-v`.
    ],
)
def test_the_entry_point_silences_tensorflow_unless_verbose(
    argv, level, monkeypatch, capsys, tmp_path
):
    # As the parser reads `-v`: TensorFlow's log level is set before its import.
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    model = ["translate", "--model", str(tmp_path / "none")]
    assert _run_entry_point(monkeypatch, [*model, *argv]) == 2
    assert os.environ.get("TF_CPP_MIN_LOG_LEVEL") == level
    assert "keras-transformer translate: error: " in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "status", "out"),
    [
        (["--help"], 0, "usage: keras-transformer"),
        (["translate", "--help"], 0, "usage: keras-transformer translate"),
        (["--version"], 0, f"keras-transformer {__version__}"),
        ([], 2, "usage: keras-transformer"),
        (["train"], 2, ""),
        (["-v", "translate", "--beam", "0"], 2, ""),
    ],
)
def test_help_version_and_usage_errors_import_no_tensorflow(argv, status, out):
    # Answered by the entry package's parser alone: no Keras, no TensorFlow.
    result = subprocess.run(
        [sys.executable, "-X", "importtime", *PYTHON[1:], *argv],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == status, result.stderr[-3000:]
    assert result.stdout.startswith(out)
    imported = {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in result.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "keras_transformer_cli" in imported
    assert not imported & {"tensorflow", "keras", "keras_transformer"}
    errors = [line for line in result.stderr.splitlines() if "import time" not in line]
    assert len(errors) == (1 if status == 2 and not out else 0), errors


@pytest.mark.parametrize(
    ("argv", "out", "err"),
    [
        (["--help"], "usage: keras-transformer", ""),
        (["train"], "", "keras-transformer train: error: the following arguments"),
        (["translate", "--model", "missing"], "", "Model directory not found"),
    ],
)
def test_the_command_prints_no_tensorflow_logs(argv, out, err):
    # As a user runs it: TensorFlow's log level left to the command.
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run(
        [*PYTHON, *argv], capture_output=True, text=True, timeout=300, env=env
    )
    assert result.returncode == (0 if argv == ["--help"] else 2), result.stderr
    assert result.stdout.startswith(out)
    # Nothing but the error line: no TensorFlow start-up lines.
    assert len(result.stderr.splitlines()) == (1 if err else 0), result.stderr
    assert err in result.stderr


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny run trained by `train`: its recipe, directory and stderr."""
    tmp_path = tmp_path_factory.mktemp("trained")
    path = _recipe(tmp_path)
    # As a user runs it: TensorFlow's log level left to the command.
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run(
        [*PYTHON, "train", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return path, tmp_path / "run", result


@pytest.mark.slow
def test_train_is_quiet_and_writes_the_whole_run(trained):
    path, out, result = trained
    # Progress on stderr, the scores alone on stdout; no library chatter.
    scores = json.loads(result.stdout)
    for noise in ("normalizer.cc", "Global dtype policy", "oneDNN"):
        assert noise not in result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["finished"] and summary["steps"] == 3
    assert summary["resumed_from_step"] == 0
    assert summary["test"] == scores and scores["sentences"] == len(SOURCES) * 4
    for name in ("model.keras", "tokenizer", "config.yaml", "logs", "checkpoints"):
        assert (out / name).exists(), name
    # The test score is sacrebleu's on what the exported translator says.
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    translator = tf.saved_model.load(str(out / "translator"))
    sources = SOURCES * 4
    hypotheses = [t.decode() for t in translator(tf.constant(sources)).numpy()]
    bleu = BLEU().corpus_score(hypotheses, [TARGETS * 4]).score
    assert scores["bleu"] == round(bleu, 2)  # Scores are reported to 2 decimals.
    # A snapshot is a model directory of its own, taken after step 1.
    snapshot = out / "snapshots" / "minute_0.0001"
    assert json.loads((snapshot / "snapshot.json").read_text())["step"] == 1
    model, tokenizer = load_trained(snapshot)
    assert tokenizer.vocab_size == model.vocab_size


@pytest.mark.slow
def test_the_printed_saved_model_line_prints_the_translation_alone(trained):
    _, out, _ = trained
    from keras_transformer.cli import saved_model_command

    # The 3-step model translates some sentences to nothing: one it does not.
    translations = subprocess.run(
        [*PYTHON, "translate", "--model", str(out)],
        input="".join(f"{source}\n" for source in SOURCES),
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout.splitlines()
    source, expected = next(
        (s, t) for s, t in zip(SOURCES, translations, strict=True) if t.strip()
    )
    line = saved_model_command(str(out), source)
    result = subprocess.run(line, shell=True, capture_output=True, text=True)
    assert result.returncode == 0
    assert result.stdout == expected + "\n"


def _translate_one_cat(model, config_home):
    """`translate` of "one cat" with greedy search, keys from `config_home`."""
    return subprocess.run(
        [*PYTHON, "translate", "--model", str(model), "--beam", "1"],
        input="one cat\n",
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "XDG_CONFIG_HOME": str(config_home)},
    )


@pytest.mark.slow
def test_a_translator_signed_elsewhere_is_not_loaded(trained, tmp_path):
    _, out, _ = trained
    here = _translate_one_cat(out, os.environ["XDG_CONFIG_HOME"])
    assert here.returncode == 0 and "Not loading" not in here.stderr
    elsewhere = _translate_one_cat(out, tmp_path)  # another account's key
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert "Not loading" in elsewhere.stderr and "another key" in elsewhere.stderr
    # Built from model.keras instead: the same translation.
    assert elsewhere.stdout == here.stdout and here.stdout.strip()


@pytest.mark.slow
def test_the_export_a_refused_translator_suggests_makes_one_that_loads(
    trained, tmp_path
):
    _, out, _ = trained
    copy = tmp_path / "their run"  # (a space: the printed command quotes it)
    shutil.copytree(out, copy)
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    # signed with the key of the run's own machine
    refused = _translate_one_cat(copy, tmp_path / "config")
    assert refused.returncode == 0 and "another key" in refused.stderr
    suggested = re.search(
        r"\((keras-transformer export .*) makes one this machine trusts\)",
        refused.stderr,
    )
    assert suggested, refused.stderr
    argv = shlex.split(suggested[1])
    assert argv[0] == "keras-transformer"
    exported = subprocess.run(
        [*PYTHON, *argv[1:]], capture_output=True, text=True, timeout=300, env=env
    )
    assert exported.returncode == 0, exported.stderr
    loaded = _translate_one_cat(copy, tmp_path / "config")
    assert loaded.returncode == 0, loaded.stderr
    assert "Not loading" not in loaded.stderr and "Not using" not in loaded.stderr
    assert loaded.stdout == refused.stdout and loaded.stdout.strip()


@pytest.mark.slow
def test_translate_evaluate_export_a_trained_model(trained, tmp_path):
    _, out, _ = trained
    translated = subprocess.run(
        [*PYTHON, "translate", "--model", str(out), "--beam", "1"],
        input="one cat\n\nthree dogs\n",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert translated.returncode == 0, translated.stderr
    assert len(translated.stdout.splitlines()) == 3  # The empty line stays.
    # A file: an over-long line (the model takes 63 tokens) and bytes that
    # are not UTF-8 are translated, each with one warning naming its line.
    lines = [b"one cat", b"", b"two " * 80, b"four \xff birds", b"a dog"]
    (tmp_path / "input.txt").write_bytes(b"\n".join(lines) + b"\n")
    translated = subprocess.run(
        [*PYTHON, "translate", "--model", str(out), str(tmp_path / "input.txt")],
        capture_output=True,
        timeout=300,
    )
    assert translated.returncode == 0, translated.stderr
    assert len(translated.stdout.decode().split("\n")) == len(lines) + 1
    assert translated.stdout.decode().split("\n")[1] == ""
    errors = translated.stderr.decode()
    assert errors.count("input.txt, line 3: longer than the model's 63 tokens") == 1
    assert errors.count("input.txt, line 4: bytes that are not UTF-8") == 1
    assert "line 1" not in errors and "line 5" not in errors
    assert "normalizer.cc" not in errors

    src = _write(tmp_path / "test.en", SOURCES)
    ref = _write(tmp_path / "test.de", TARGETS)
    scores = subprocess.run(
        [*PYTHON, "evaluate", "--model", str(out), "--source", src, "--reference", ref],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert scores.returncode == 0, scores.stderr
    result = json.loads(scores.stdout)
    assert "tok:13a" in result["bleu_signature"]
    assert result["sentences"] == len(SOURCES)
    short = _write(tmp_path / "short.de", TARGETS[:2])
    bad = subprocess.run(
        [
            *PYTHON,
            "evaluate",
            "--model",
            str(out),
            "--source",
            src,
            "--reference",
            short,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 2
    assert "same number of lines" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.slow
def test_export_never_writes_among_other_files(trained, tmp_path, capsys):
    _, out, _ = trained
    user = tmp_path / "mine"
    user.mkdir()
    (user / "notes.txt").write_text("mine")
    (tmp_path / "a_file").write_text("mine")
    before = _snapshot(tmp_path)
    _error(
        capsys, ["export", "--model", str(out), "--out", str(user)], "not a SavedModel"
    )
    _error(
        capsys,
        [
            "export",
            "--model",
            str(out),
            "--out",
            str(tmp_path / "a_file"),
            "--overwrite",
        ],
        "is a file",
    )
    assert _snapshot(tmp_path) == before
    exported = tmp_path / "exported"
    # A trailing slash names the same directory.
    argv = ["export", "--model", str(out), "--out", f"{exported}/", "--beam", "1"]
    assert cli.main(argv) == 0
    assert (exported / "saved_model.pb").exists()
    first = _snapshot(exported)
    _error(capsys, argv, "holds a SavedModel", "--overwrite")
    assert _snapshot(exported) == first
    assert cli.main([*argv, "--overwrite"]) == 0


@pytest.mark.slow
def test_verbose_after_the_command_shows_the_traceback(tmp_path):
    result = subprocess.run(
        [*PYTHON, "train", "--config", str(tmp_path / "missing.yaml"), "-v"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2
    assert "Traceback" in result.stderr and "Config file not found" in result.stderr


def test_mixed_precision_offers_every_policy_of_the_recipes():
    parser = cli_parser.build_parser()
    for policy in (*POLICIES, "auto"):
        argv = ["train", "--config", "C", "--mixed-precision", policy]
        assert parser.parse_args(argv).mixed_precision == policy
