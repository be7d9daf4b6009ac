"""Multi30k (WMT16 multimodal task 1), fetched on first use like TFDS does."""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import urllib.error
import urllib.request

from keras_transformer.data.corpus import ParallelCorpus
from keras_transformer.data.files import load_parallel_files

logger = logging.getLogger(__name__)

# Files are fetched from a fixed commit of the public repository so that every
# download yields the same bytes.
MULTI30K_COMMIT = "a3d2e0d26b56f3846f66a952536ffed4e401d05a"
MULTI30K_URL = (
    "https://raw.githubusercontent.com/multi30k/dataset/"
    f"{MULTI30K_COMMIT}/data/task1/raw/{{filename}}"
)
MULTI30K_SPLITS = (
    "train",
    "val",
    "test_2016_flickr",
    "test_2017_flickr",
    "test_2017_mscoco",
    "test_2018_flickr",
)
MULTI30K_LANGUAGES = ("en", "de", "fr", "cs")

# SHA-256 of the files at MULTI30K_COMMIT; downloads of other files are not
# verified.
_SHA256 = {
    "train.en.gz": "e1d89f49b9f003db6bb35c24382eb56531fec4e3840cb704cf36f0c0e192b62d",
    "train.de.gz": "d71259ddb13479e1c9cac315c123493b7e97d2c996465b76d885a80a9e8daccd",
    "val.en.gz": "0a9a01b4fd231cafeebea18983300016112dc919d3b26c5c74f6d6f388936aeb",
    "val.de.gz": "c7c5fd8dde71846406de776f1c342f0c1e95e1c375e3bea7d52a77faec72e965",
    "test_2016_flickr.en.gz": (
        "4f32cb8118b90cd5189d141e34791f70c245315e17065ecf9b2af6ab57e747cf"
    ),
    "test_2016_flickr.de.gz": (
        "d9747e9ef1c1bf36bf4a0e43c0d0fba58cc55d6b2b8e388cc863cba02b043fea"
    ),
}


def default_cache_dir() -> str:
    """Where downloaded corpora are kept.

    Returns:
        `$KERAS_TRANSFORMER_CACHE_DIR` if set, else
        `~/.cache/keras_transformer`.

    Example:
        >>> import os
        >>> os.path.isabs(default_cache_dir())
        True
    """
    return os.environ.get(
        "KERAS_TRANSFORMER_CACHE_DIR",
        os.path.join(os.path.expanduser("~"), ".cache", "keras_transformer"),
    )


def load_multi30k(
    split: str = "train",
    data_dir: str | os.PathLike | None = None,
    source: str = "en",
    target: str = "de",
    *,
    download: bool = True,
    strict: bool = False,
) -> ParallelCorpus:
    """Loads a split of Multi30k (Elliott et al., 2016), cased and untokenized.

    Looks for `{split}.{language}.gz` (or the uncompressed `{split}.{language}`)
    in `data_dir`. Missing files are downloaded there from the public GitHub
    repository `multi30k/dataset` (`data/task1/raw/`, a fixed commit), and
    checked against known SHA-256 sums for the en/de train, val and
    test_2016_flickr files. Lines are read with `load_parallel_files`, so the
    real quirks of the data (a TAB inside a sentence, lines that are just
    `@@`, trailing spaces) load; trailing spaces are stripped.

    The data is derived from Flickr30K and provided for non-commercial
    research and educational use.

    Args:
        split: one of `MULTI30K_SPLITS`: `"train"` (29000 pairs), `"val"`
            (1014), `"test_2016_flickr"` (1000), ...
        data_dir: directory holding (or receiving) the files; defaults to
            `default_cache_dir()/multi30k`.
        source: source language code (`"en"`, `"de"`, `"fr"` or `"cs"`).
        target: target language code.
        download: fetch missing files; if False they must exist.
        strict: passed to `load_parallel_files` (empty lines are errors).

    Returns:
        A `ParallelCorpus` named `"multi30k/{split}.{source}-{target}"`.

    Raises:
        ValueError: unknown split or language, or a download whose checksum
            does not match.
        FileNotFoundError: a file is missing and `download` is False.
        OSError: a download failed (the message has the URL).

    Example:
        >>> import tempfile
        >>> try:
        ...     load_multi30k("val", data_dir=tempfile.mkdtemp(), download=False)
        ... except FileNotFoundError as error:
        ...     print("not found")
        not found
    """
    paths = multi30k_files(split, data_dir, source, target, download=download)
    return load_parallel_files(
        *paths, strict=strict, name=f"multi30k/{split}.{source}-{target}"
    )


def multi30k_files(
    split: str = "train",
    data_dir: str | os.PathLike | None = None,
    source: str = "en",
    target: str = "de",
    *,
    download: bool = True,
) -> tuple[str, str]:
    """The source and target files of a Multi30k split, downloaded if missing.

    What `load_multi30k` reads, e.g. to stream them
    (`stream_parallel_files`).

    Args:
        split: one of `MULTI30K_SPLITS`.
        data_dir: directory holding (or receiving) the files; defaults to
            `default_cache_dir()/multi30k`.
        source: source language code.
        target: target language code.
        download: fetch missing files; if False they must exist.

    Returns:
        `(source_path, target_path)`.

    Raises:
        ValueError: unknown split or language, or a bad download.
        FileNotFoundError: a file is missing and `download` is False.

    Example:
        >>> import tempfile
        >>> try:
        ...     multi30k_files("val", data_dir=tempfile.mkdtemp(), download=False)
        ... except FileNotFoundError as error:
        ...     print("not found")
        not found
    """
    if split not in MULTI30K_SPLITS:
        raise ValueError(
            f"Unknown Multi30k split. Received: split={split!r}; "
            f"expected one of {MULTI30K_SPLITS}"
        )
    for language in (source, target):
        if language not in MULTI30K_LANGUAGES:
            raise ValueError(
                f"Unknown Multi30k language. Received: {language!r}; "
                f"expected one of {MULTI30K_LANGUAGES}"
            )
    if data_dir is None:
        data_dir = os.path.join(default_cache_dir(), "multi30k")
    data_dir = os.fspath(data_dir)
    source_path, target_path = (
        _find_or_download(data_dir, f"{split}.{language}", download)
        for language in (source, target)
    )
    return source_path, target_path


def _find_or_download(data_dir: str, stem: str, download: bool) -> str:
    for filename in (f"{stem}.gz", stem):
        path = os.path.join(data_dir, filename)
        if os.path.exists(path):
            return path
    path = os.path.join(data_dir, f"{stem}.gz")
    if not download:
        raise FileNotFoundError(
            f"Multi30k file {stem}.gz (or {stem}) not found in {data_dir} and "
            "download=False"
        )
    _download(MULTI30K_URL.format(filename=f"{stem}.gz"), path)
    return path


def _download(url: str, path: str) -> None:
    """Fetches `url` into `path` atomically, verifying a known checksum."""
    filename = os.path.basename(path)
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    logger.info("Downloading %s to %s", url, path)
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            content = response.read()
    except (urllib.error.URLError, OSError) as error:
        raise OSError(f"Could not download {url}: {error}") from error
    expected = _SHA256.get(filename)
    if expected is not None:
        actual = hashlib.sha256(content).hexdigest()
        if actual != expected:
            raise ValueError(
                f"Checksum mismatch for {url}: expected sha256 {expected}, "
                f"got {actual}; nothing was written to {path}"
            )
    # Write next to the destination, then rename: a crash never leaves a
    # truncated file that would be taken for the real one.
    fd, tmp_path = tempfile.mkstemp(dir=directory, prefix=f".{filename}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(content)
        os.replace(tmp_path, path)
    except BaseException:
        if os.path.exists(tmp_path):
            os.remove(tmp_path)
        raise
