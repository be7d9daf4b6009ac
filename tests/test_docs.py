"""The documentation site builds in strict mode: no broken link, no page left
out of the navigation, no docstring the API reference cannot render; the
commands of the docs work from a fresh clone."""

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_docs_build_strict(tmp_path):
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        # Not --quiet: it hides the warnings that --strict counts.
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    problems = [
        line
        for line in result.stderr.splitlines()
        if line.startswith(("WARNING", "ERROR")) or "Aborted" in line
    ]
    assert result.returncode == 0, "\n".join(problems) or result.stderr[-3000:]
    assert (site / "index.html").exists()
    assert (site / "api" / "layers" / "index.html").exists()
    guides = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
    for name in guides:
        assert (site / "guides" / name / "index.html").exists(), name


@pytest.mark.slow
def test_language_model_page_runs_and_learns(capsys):
    page = (ROOT / "docs" / "language_model.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", page, flags=re.DOTALL)
    assert len(blocks) == 1
    exec(compile(blocks[0], "docs/language_model.md", "exec"), {})
    accuracy, *completions = capsys.readouterr().out.strip().splitlines()
    assert float(accuracy.split()[-1]) > 0.5, accuracy
    assert completions[0].startswith("Freitag,") and len(completions[0]) > 9
    assert completions[1].startswith("vor") and len(completions[1]) > 4


def _notebook_links(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    text = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return re.findall(r"\]\((\.\./docs/[^)\s]+)\)", text)


def test_notebook_links_into_docs_exist():
    """A notebook's `](../docs/...)` link finds its file from `notebooks/`."""
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    links = {(p.name, link) for p in notebooks for link in _notebook_links(p)}
    assert links, "no notebook links an image of docs/"
    missing = [
        (name, link)
        for name, link in links
        if not (ROOT / "notebooks" / link).is_file()
    ]
    assert not missing


def test_guides_point_docs_links_at_the_site():
    """docs/hooks.py points them at the site's copy of docs/ from the guide page."""
    spec = importlib.util.spec_from_file_location("hooks", ROOT / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    notebook = {
        "cells": [
            {"cell_type": "markdown", "source": ["![a](../docs/img/x.svg)\n", "b"]},
            {"cell_type": "markdown", "source": "[c](../docs/design.md)"},
            {"cell_type": "code", "source": ["'](../docs/'"]},
        ]
    }
    cells = hooks._site_links(notebook, "../../")["cells"]
    assert cells[0]["source"] == ["![a](../../img/x.svg)\n", "b"]
    assert cells[1]["source"] == "[c](../../design.md)"
    assert cells[2]["source"] == ["'](../docs/'"]


def _commands():
    """`(file, command)` for each line of the bash blocks of the README and
    docs (continued lines joined), the dated history left out."""
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        if doc.name == "benchmarks_archive.md":
            continue
        for block in re.findall(r"```bash\n(.*?)```", doc.read_text(), re.S):
            for command in block.replace("\\\n", " ").splitlines():
                yield doc.name, command


def test_commands_read_no_folder_of_our_machines():
    """`../shared/` is beside our checkouts only: no command names it, nor
    does anything the command line prints."""
    commands = [(name, c) for name, c in _commands() if "../shared" in c]
    assert commands == []
    sources = [*(ROOT / "keras_transformer_cli").glob("*.py")]
    sources += (ROOT / "keras_transformer").rglob("*.py")
    assert [p.name for p in sources if "shared/data" in p.read_text()] == []


def test_benchmark_options_in_the_docs_exist():
    """Each option a documented command gives a script of benchmarks/ is one
    the script, or a sibling script it imports, defines (a section on
    removed code names a script that is gone, and is left alone)."""
    unknown, checked = [], set()
    for name, command in _commands():
        match = re.search(r"benchmarks/(\w+)\.py(.*)", command)
        if not match or not (ROOT / "benchmarks" / f"{match[1]}.py").exists():
            continue
        source = (ROOT / "benchmarks" / f"{match[1]}.py").read_text()
        # with the options it takes from a sibling script it imports
        for sibling in re.findall(r"^from (\w+) import", source, re.MULTILINE):
            if (ROOT / "benchmarks" / f"{sibling}.py").exists():
                source += (ROOT / "benchmarks" / f"{sibling}.py").read_text()
        for option in re.findall(r"(?<!\S)--[\w-]+", match[2].split("  #")[0]):
            checked.add((match[1], option))
            if f'"{option}"' not in source:
                unknown.append((name, match[1], option))
    assert ("ctranslate2_compare", "--data") in checked
    assert ("checkpoint_averages", "--run") in checked
    assert unknown == []


def test_the_fault_suites_table_is_the_suites_own(tmp_path):
    """docs/training.md lists every case of benchmarks/faults.py, as its
    `--markdown` prints them, every one as expected, and the counts of
    its classes."""
    spec = importlib.util.spec_from_file_location(
        "faults", ROOT / "benchmarks" / "faults.py"
    )
    faults = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(faults)
    rows = [row for case in faults.cases(faults.Workspace(tmp_path)) for row in case[0]]
    text = (ROOT / "docs" / "training.md").read_text(encoding="utf-8")
    section = text.split("### The fault suite", 1)[1].split("\n### ", 1)[0]
    row = r"^\| `(\w+)` \| (.*) \| (\w+) \| (\w+) \|$"
    documented = re.findall(row, section, re.MULTILINE)
    assert [(n, e, w) for n, w, e, _ in documented] == rows
    assert all(observed == expected for _, _, expected, observed in documented)
    counts = re.search(
        r"^\| OK \| ERROR \|.*\n\|[-|]+\n\| ([\d |]+) \|$", section, re.M
    )
    assert counts, "no table of counts"
    classes = [observed for *_, observed in documented]
    expected = [str(classes.count(name)) for name in faults.CLASSES]
    assert counts[1].split(" | ") == expected
    assert f"{len(rows)} of {len(rows)} cases as expected" in section
