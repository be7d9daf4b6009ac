"""Parallel text files: one sentence per line, plain or gzip-compressed."""

from __future__ import annotations

import gzip
import logging
import os
import zlib

from keras_transformer.data.corpus import ParallelCorpus

logger = logging.getLogger(__name__)

_GZIP_MAGIC = b"\x1f\x8b"


def read_lines(path: str | os.PathLike) -> list[str]:
    """Reads a UTF-8 text file (plain or gzip) into a list of lines.

    Lines are split at `"\\n"` only, so characters such as U+2028 or form
    feeds stay inside their line and line numbers match `wc -l` and editors.
    A final newline does not start an extra line; a `"\\r"` before the newline
    (Windows line ends) and a UTF-8 byte order mark are removed. The line
    content is otherwise returned unchanged.

    Args:
        path: the file. Gzip is recognized by its magic bytes, whatever the
            file name.

    Returns:
        The lines, without line terminators.

    Raises:
        ValueError: the file is not valid UTF-8 (the message names the file
            and the line number) or is a corrupt gzip file.

    Example:
        >>> import pathlib, tempfile
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "a.txt"
        >>> _ = path.write_bytes(b"first\\r\\nsecond\\n")
        >>> read_lines(path)
        ['first', 'second']
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        raw = f.read()
    if raw.startswith(_GZIP_MAGIC):
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as error:
            raise ValueError(f"{path}: not a valid gzip file ({error})") from error
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        column = error.start - (raw.rfind(b"\n", 0, error.start) + 1) + 1
        raise ValueError(
            f"{path}: invalid UTF-8 at line {line}, byte {column} of the line "
            f"({error.reason}: {raw[error.start : error.end]!r})"
        ) from None
    text = text.removeprefix("\ufeff")
    lines = text.split("\n")
    if lines[-1] == "":
        # The newline that ends the last line does not open a new one.
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def load_parallel_files(
    source_path: str | os.PathLike,
    target_path: str | os.PathLike,
    *,
    strict: bool = False,
    strip: bool = True,
    name: str | None = None,
) -> ParallelCorpus:
    """Loads aligned source and target files, one sentence per line.

    Line `i` of the target file translates line `i` of the source file.
    Files may be plain or gzip-compressed UTF-8 (see `read_lines`).

    A pair where either side is empty or only whitespace is skipped and
    counted in `ParallelCorpus.skipped_empty` (and logged), or, with
    `strict=True`, is an error. Anything else is kept, including odd lines
    such as Multi30k's `@@` or a TAB inside a sentence.

    Args:
        source_path: file of source sentences.
        target_path: file of target sentences.
        strict: raise on an empty line instead of skipping the pair.
        strip: remove leading and trailing whitespace from every sentence
            (`str.strip()`); inner whitespace is kept.
        name: label stored in the corpus; defaults to the two file names.

    Returns:
        A `ParallelCorpus`.

    Raises:
        ValueError: the files have different numbers of lines (the message
            names both files and both counts), a file is not valid UTF-8
            (names the file and line), or `strict` and a line is empty (names
            the file and line).

    Example:
        >>> import pathlib, tempfile
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (d / "src.txt").write_text("Hello .\\n\\nTwo words\\n", "utf-8")
        >>> _ = (d / "tgt.txt").write_text("Hallo .\\nLeer\\nZwei Wörter\\n", "utf-8")
        >>> corpus = load_parallel_files(d / "src.txt", d / "tgt.txt")
        >>> list(corpus), corpus.skipped_empty
        ([('Hello .', 'Hallo .'), ('Two words', 'Zwei Wörter')], 1)
    """
    source_path, target_path = os.fspath(source_path), os.fspath(target_path)
    source_lines = read_lines(source_path)
    target_lines = read_lines(target_path)
    if len(source_lines) != len(target_lines):
        raise ValueError(
            "Source and target files must have the same number of lines. "
            f"Received: {source_path} has {len(source_lines)} lines, "
            f"{target_path} has {len(target_lines)} lines"
        )
    sources, targets = [], []
    skipped = 0
    for number, (source, target) in enumerate(
        zip(source_lines, target_lines, strict=True), start=1
    ):
        if not source.strip() or not target.strip():
            if strict:
                empty_path = source_path if not source.strip() else target_path
                raise ValueError(
                    f"{empty_path}: line {number} is empty (strict mode). "
                    "Use strict=False to skip such pairs."
                )
            skipped += 1
            continue
        if strip:
            source, target = source.strip(), target.strip()
        sources.append(source)
        targets.append(target)
    if name is None:
        name = f"{os.path.basename(source_path)}+{os.path.basename(target_path)}"
    if skipped:
        logger.warning(
            "%s: skipped %d of %d line pairs with an empty side",
            name,
            skipped,
            len(source_lines),
        )
    return ParallelCorpus(
        tuple(sources), tuple(targets), name=name, skipped_empty=skipped
    )
