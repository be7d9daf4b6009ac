"""Git ignores every folder our commands, scripts and notebooks write by default.

The folders are read from the code and the docs, not copied here: a new
script option `--out`, `--output`, `--logdir` or `--work` with a default
inside the repository, a recipe's `output_dir`, the tutorial's model folder
or an output folder in a documented command fails this test until
`.gitignore` names it.
"""

import ast
import pathlib
import re
import subprocess

import pytest
import yaml

from keras_transformer.config import Config

REPO = pathlib.Path(__file__).resolve().parents[1]
OUTPUT_OPTIONS = {"--out", "--output", "--logdir", "--work"}
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _written_here(path: str) -> bool:
    """A path inside the checkout that git should ignore.

    Left out: none, placeholders (`$M/translator`), absolute paths, and
    `benchmarks/results/`, which holds the results the docs cite: committed,
    not ignored.
    """
    return (
        bool(path)
        and "$" not in path
        and not path.startswith(("/", "benchmarks/results/"))
    )


def _default(node, constants):
    """The path an argparse `default=` gives, relative to the repository root.

    A string is relative to where the command runs (the docs run them from
    the root); `os.path.join(REPO, ...)` is the script's own checkout; a
    name is one of the module's own constants (`constants`, name -> node).
    """
    if isinstance(node, ast.Name) and node.id in constants:
        return _default(constants[node.id], constants)
    if isinstance(node, ast.Constant):
        return node.value
    if (
        isinstance(node, ast.Call)
        and ast.unparse(node.func) == "os.path.join"
        and ast.unparse(node.args[0]) == "REPO"
    ):
        return "/".join(ast.literal_eval(arg) for arg in node.args[1:])
    raise AssertionError(f"a default this test cannot read: {ast.unparse(node)}")


def _argparse_outputs():
    """The output options' defaults in the scripts and the command line."""
    paths = set()
    for path in [
        *sorted((REPO / "benchmarks").glob("*.py")),
        REPO / "keras_transformer_cli" / "parser.py",
    ]:
        tree = ast.parse(path.read_text())
        constants = {
            node.targets[0].id: node.value
            for node in tree.body
            if isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        }
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"
                and node.args
                and ast.literal_eval(node.args[0]) in OUTPUT_OPTIONS
            ):
                continue
            for keyword in node.keywords:
                if keyword.arg == "default":
                    paths.add(_default(keyword.value, constants))
    return {path for path in paths if _written_here(path)}


def _recipe_outputs():
    """`output_dir` of every recipe in configs/ and of the built-in default."""
    recipes = [yaml.safe_load(path.read_text()) for path in REPO.glob("configs/*.yaml")]
    return {recipe["output_dir"] for recipe in recipes} | {
        Config.model_fields["output_dir"].default
    }


def _tutorial_outputs():
    """The folders `MODEL_DIR` of notebooks/tutorial.py can name."""
    tree = ast.parse((REPO / "notebooks" / "tutorial.py").read_text())
    (assignment,) = [
        node
        for node in tree.body
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "MODEL_DIR"
    ]
    return {
        f"notebooks/{node.value}"
        for node in ast.walk(assignment.value)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }


def _documented_outputs():
    """Output folders of the commands in the README and docs (not the archive).

    Only the paths `_written_here` keeps.
    """
    paths = set()
    for doc in DOCS:
        if doc.name == "benchmarks_archive.md":  # A dated history.
            continue
        for block in re.findall(r"```bash\n(.*?)```", doc.read_text(), re.S):
            for path in re.findall(r"--(?:out|output|logdir)[ =](\S+)", block):
                if _written_here(path):
                    paths.add(path.rstrip("/"))
    return paths


def test_every_default_output_folder_is_ignored():
    inside = subprocess.run(
        ["git", "rev-parse", "--is-inside-work-tree"], cwd=REPO, capture_output=True
    )
    if inside.returncode != 0:
        pytest.skip("not a git checkout")
    found = {
        "scripts": _argparse_outputs(),
        "recipes": _recipe_outputs(),
        "tutorial": _tutorial_outputs(),
        "docs": _documented_outputs(),
    }
    # Each source gave something, so a reading that went wrong cannot pass.
    assert all(found.values()), found
    assert {"demo_output", "profile_decoding", "profile_step"} <= found["scripts"]
    folders = sorted(set().union(*found.values()))
    # A file inside each: the folders need not exist for git to answer.
    files = [f"{folder}/file" for folder in folders]
    result = subprocess.run(
        ["git", "check-ignore", "--no-index", *files],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    ignored = set(result.stdout.split())
    assert [f for f in files if f not in ignored] == []
