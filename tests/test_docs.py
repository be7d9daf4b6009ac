"""The documentation site builds in strict mode: no broken link, no page left
out of the navigation, no docstring the API reference cannot render."""

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
