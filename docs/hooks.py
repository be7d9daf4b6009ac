"""MkDocs hooks: the tutorial notebooks as guides, and a generated navigation.

The notebooks stay in `notebooks/`, where they run and are tested. The build
copies them into a scratch folder as `guides/<name>.ipynb` (mkdocs-jupyter
reads a page from its source folder) and renders them from their stored
outputs, never executing them. A notebook links an image of the docs the way
that works in a checkout, `![...](../docs/img/x.svg)`; mkdocs-jupyter writes
the HTML without rewriting links, so the copy's markdown cells point the
same links at the site's copy of `docs/`, relative to the guide's page.

The navigation is built from the files present, so a page or notebook that
someone adds appears without editing `mkdocs.yml`: the home page, the notes
(`docs/*.md`), the guides (`notebooks/*.ipynb`, by file name) and the API
reference (`docs/api/*.md`). Titles are the first `# ` heading of each file.
"""

import json
import shutil
import tempfile
from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
# Known pages first, in reading order; any others follow by name.
NOTES_ORDER = [
    # For learners.
    "design",
    "training",
    "decoding",
    "config",
    "backends",
    "language_model",
    # Engineering logs.
    "results",
    "benchmarks",
    "benchmarks_archive",
]
API_ORDER = [
    "layers",
    "models",
    "data",
    "schedules",
    "losses",
    "metrics",
    "training",
    "decoding",
    "visualization",
]


def on_config(config):
    docs = Path(config.docs_dir)
    notes = _ordered(
        [p for p in docs.glob("*.md") if p.name != "index.md"], NOTES_ORDER
    )
    api = _ordered(list((docs / "api").glob("*.md")), API_ORDER)
    sections = [
        ("Notes", [(p, p.name) for p in notes]),
        ("Guides", [(p, f"guides/{p.name}") for p in _notebooks()]),
        ("API reference", [(p, f"api/{p.name}") for p in api]),
    ]
    config.nav = [{"Home": "index.md"}] + [
        {section: [{_title(path): uri} for path, uri in pages]}
        for section, pages in sections
        if pages
    ]
    return config


_scratch = []


@event_priority(100)  # Before mkdocs-jupyter's on_files, which converts them.
def on_files(files, config):
    scratch = Path(tempfile.mkdtemp(prefix="keras-transformer-docs-"))
    _scratch.append(scratch)
    (scratch / "guides").mkdir()
    # From the page of guides/<name>.ipynb up to the site root, where docs/ is.
    root = "../../" if config.use_directory_urls else "../"
    for path in _notebooks():
        notebook = json.loads(path.read_text(encoding="utf-8"))
        text = json.dumps(_site_links(notebook, root), ensure_ascii=False, indent=1)
        (scratch / "guides" / path.name).write_text(text, encoding="utf-8")
        files.append(
            File(
                f"guides/{path.name}",
                src_dir=str(scratch),
                dest_dir=config.site_dir,
                use_directory_urls=config.use_directory_urls,
            )
        )
    return files


def on_shutdown():
    while _scratch:
        shutil.rmtree(_scratch.pop(), ignore_errors=True)


def _site_links(notebook, root):
    """`../docs/` in markdown links becomes `root`: the notebook as a page."""
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown":
            source = cell["source"]
            lines = [source] if isinstance(source, str) else source
            lines = [line.replace("](../docs/", f"]({root}") for line in lines]
            cell["source"] = lines[0] if isinstance(source, str) else lines
    return notebook


def _notebooks():
    return sorted(NOTEBOOKS.glob("*.ipynb"))


def _ordered(paths, order):
    def key(path):
        rank = order.index(path.stem) if path.stem in order else len(order)
        return rank, path.name

    return sorted(paths, key=key)


def _title(path):
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        lines = [
            line
            for cell in cells
            if cell["cell_type"] == "markdown"
            for line in "".join(cell["source"]).splitlines()
        ]
    else:
        lines = path.read_text(encoding="utf-8").splitlines()
    for line in lines:
        if line.startswith("# "):
            return line[2:].strip().strip("`")
    return path.stem.replace("_", " ")
