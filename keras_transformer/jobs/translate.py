"""`keras-transformer translate`: lines in, translations out, streamed.

The input is read in chunks, so a file of any size is translated in
constant memory and the first translations are written before the input
ends. Each input line gives exactly one output line, in input order: an
empty line gives an empty line, a line of more tokens than the model takes
is translated truncated (with a warning naming it), and bytes that are not
UTF-8 are replaced (with a warning naming the line).

The translator is the SavedModel that `train`, `demo` and `export` leave
in the model directory (`translator/`), when this version of the library
exported it on this machine from that very `model.keras` and tokenizer
(`keras_transformer.jobs.trust`): loading it traces nothing, so a
one-line call starts in seconds, and it takes any beam size and length
penalty. Otherwise it is
built from `model.keras` and the tokenizer.
"""

from __future__ import annotations

import logging
import shlex
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO

import tensorflow as tf

from keras_transformer import __version__
from keras_transformer.jobs.run_dir import TRANSLATOR_DIR
from keras_transformer.jobs.trust import check_translator, model_files, private_copy

logger = logging.getLogger(__name__)

CHUNK_LINES = 1000
"""Lines per translator call when reading a file or pipe."""


def load_translator(
    model_dir: str | Path, beam_size: int = 4, alpha: float = 0.6
) -> Callable[[list[str]], dict]:
    """The translator of the model in `model_dir`, fastest to start first.

    Args:
        model_dir: a directory written by `keras-transformer train`.
        beam_size: beam size (1 = greedy).
        alpha: length penalty.

    Returns:
        A function `sentences -> {"translations": [str], "truncated":
        [bool], "source_limit": int}`.
    """
    translator = _saved_translator(Path(model_dir))
    if translator is None:
        from keras_transformer.decoding import Translator
        from keras_transformer.jobs.run_dir import load_trained

        model, tokenizer = load_trained(model_dir)
        translator = Translator(tokenizer, model)
    limit = int(translator.settings()["source_limit"])
    settings = (tf.constant(beam_size, tf.int32), tf.constant(alpha, tf.float32))

    def translate(sentences: list[str]) -> dict:
        out = translator.translate(tf.constant(sentences, tf.string), *settings)
        return {
            "translations": [t.decode("utf-8") for t in out["translations"].numpy()],
            "truncated": out["truncated"].numpy().tolist(),
            "source_limit": limit,
        }

    return translate


def _saved_translator(model_dir: Path):
    """The translator this library exported into `model_dir`, or None.

    Only one signed here for this very `model.keras` and tokenizer is
    loaded (`keras_transformer.jobs.trust`): a SavedModel runs its own
    graph, past Keras's `safe_mode`.
    """
    path = model_dir / TRANSLATOR_DIR
    if not (path / "saved_model.pb").is_file():
        return None
    try:  # checked and loaded from one private copy
        copy = private_copy(path)
        refused = check_translator(copy, *model_files(model_dir))
    except (ValueError, OSError) as error:  # a link; the key cannot be read
        refused = str(error)
    if refused:
        logger.warning(
            "Not loading %s: %s; translating with model.keras instead "
            "(keras-transformer export --model %s --out %s --overwrite "
            "makes one this machine trusts)",
            path,
            refused,
            shlex.quote(str(model_dir)),
            shlex.quote(str(path)),
        )
        return None
    import tensorflow_text  # noqa: F401 (registers the SentencePiece ops)

    try:
        translator = tf.saved_model.load(str(copy))
        settings = translator.settings()
    except (AttributeError, OSError, ValueError, tf.errors.OpError) as error:
        logger.info("Not using %s: %s", path, error)
        return None
    version = settings["version"].numpy().decode()
    if version != __version__ or int(settings["max_length"]) != 0:
        logger.info(
            "Not using %s: exported by keras_transformer %s with max_length %d "
            "(rerun `keras-transformer export` to refresh it)",
            path,
            version,
            int(settings["max_length"]),
        )
        return None
    return translator


def translate_sentences(
    translator, sentences: list[str], batch_size: int = CHUNK_LINES, progress=False
) -> list[str]:
    """Translates `sentences` with a `Translator` (or its SavedModel).

    Args:
        translator: callable mapping a `(B,)` `tf.string` tensor to `(B,)`.
        sentences: the sentences.
        batch_size: sentences per call (the translator sorts and batches
            each call's sentences by length itself).
        progress: show a progress bar (on stderr, so stdout stays clean).

    Returns:
        One translation per sentence, in order.
    """
    from tqdm.auto import tqdm

    out: list[str] = []
    with tqdm(
        total=len(sentences), unit="sentence", disable=not progress, file=sys.stderr
    ) as bar:
        for i in range(0, len(sentences), batch_size):
            batch = tf.constant(sentences[i : i + batch_size], dtype=tf.string)
            out.extend(t.decode("utf-8") for t in translator(batch).numpy())
            bar.update(len(out) - bar.n)
    return out


def read_lines(stream: IO[bytes], name: str) -> Iterator[str]:
    """Lines of a binary stream without their line ends, as `str`.

    Bytes that are not UTF-8 are replaced by U+FFFD, with a warning that
    names the line.
    """
    for number, raw in enumerate(stream, start=1):
        raw = raw.rstrip(b"\n").rstrip(b"\r")
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError:
            logger.warning(
                "%s, line %d: bytes that are not UTF-8 were replaced", name, number
            )
            yield raw.decode("utf-8", errors="replace")


def translate_stream(
    translate: Callable[[list[str]], dict],
    lines: Iterable[str],
    chunk_lines: int = CHUNK_LINES,
    name: str = "input",
) -> Iterator[list[str]]:
    """Translations of `lines`, one per line, in order, a chunk at a time."""
    chunk: list[str] = []
    first = 1  # number of the chunk's first line
    for line in lines:
        chunk.append(line)
        if len(chunk) == chunk_lines:
            yield _translate_chunk(translate, chunk, first, name)
            first += len(chunk)
            chunk = []
    if chunk:
        yield _translate_chunk(translate, chunk, first, name)


def _translate_chunk(translate, chunk, first, name):
    out = translate(chunk)
    limit = out["source_limit"]
    for offset, truncated in enumerate(out["truncated"]):
        if truncated:
            logger.warning(
                "%s, line %d: longer than the model's %d tokens; translated "
                "its first %d",
                name,
                first + offset,
                limit,
                limit,
            )
    return out["translations"]


def translate_files(
    model_dir: str,
    files: list[str],
    beam_size: int = 4,
    alpha: float = 0.6,
    chunk_lines: int = CHUNK_LINES,
    output: IO[str] | None = None,
) -> int:
    """`keras-transformer translate`: files (or stdin) to `output` (stdout).

    A progress bar goes to stderr when the input is files and stderr is a
    terminal. From an interactive terminal, each line is translated as soon
    as it is typed.

    Returns:
        The number of lines translated.
    """
    output = output or sys.stdout
    for path in files:
        if not Path(path).is_file():
            raise FileNotFoundError(f"Input file not found: {path}")
    translate = load_translator(model_dir, beam_size=beam_size, alpha=alpha)
    if not files:
        interactive = sys.stdin.isatty()
        chunks = translate_stream(
            translate,
            read_lines(sys.stdin.buffer, "stdin"),
            1 if interactive else chunk_lines,
            "stdin",
        )
        return _write(chunks, output, lambda n: None)
    from tqdm.auto import tqdm

    show = sys.stderr.isatty()
    total = sum(_count_lines(path) for path in files) if show else None
    count = 0
    with tqdm(total=total, unit="line", file=sys.stderr, disable=not show) as bar:
        for path in files:
            with open(path, "rb") as stream:
                chunks = translate_stream(
                    translate, read_lines(stream, path), chunk_lines, path
                )
                count += _write(chunks, output, bar.update)
    return count


def _write(chunks: Iterable[list[str]], output: IO[str], progress) -> int:
    count = 0
    for translations in chunks:
        output.write("".join(t + "\n" for t in translations))
        output.flush()  # Readers of a pipe get each chunk as it is done.
        count += len(translations)
        progress(len(translations))
    return count


def _count_lines(path: str) -> int:
    with open(path, "rb") as f:
        return sum(1 for _ in f)
