"""Streamed pairs: what `load_parallel_files` reads, batch by batch."""

import gzip
import sys

import pytest
import tensorflow as tf

from keras_transformer.data import (
    ParallelCorpus,
    load_parallel_files,
    stream_pairs,
    stream_parallel_files,
    streams,
)

# Lines with the quirks real files have, in the two files of a pair.
SOURCE = (
    "\ufeffFirst line\r\n"  # a byte order mark opens the file; Windows line end
    "  padded \t\n"
    "\n"  # empty: the pair is left out
    "a\u2028b \x0c c\n"  # U+2028 and a form feed stay inside their line
    "\u00a0\u3000\n"  # only (Unicode) whitespace: left out
    "\ufeffinner mark\n"  # a mark inside the file is kept
    "@@\n"
    "last, no newline"
)
TARGET = (
    "Erste Zeile\r\n"
    "gepolstert\n"
    "leer\n"
    "a b\n"
    "nur Leerraum\n"
    "innere Marke\n"
    "\t\n"  # TAB only: left out
    "letzte"
)


def write(path, text, compress=False):
    data = text.encode("utf-8") if isinstance(text, str) else text
    if compress:
        data = gzip.compress(data)
    path.write_bytes(data)
    return path


def streamed(stream, batch_size):
    pairs, skipped = [], 0
    for (sources, targets), empty in stream.iterate(batch_size):
        skipped += empty
        pairs += [
            (s.decode("utf-8"), t.decode("utf-8"))
            for s, t in zip(sources, targets, strict=True)
        ]
    return pairs, skipped


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("batch_size", [2, 3, 4096])
def test_the_stream_reads_what_load_parallel_files_reads(
    tmp_path, compress, batch_size
):
    source = write(tmp_path / "s", SOURCE, compress)
    target = write(tmp_path / "t", TARGET, compress)
    corpus = load_parallel_files(source, target)
    stream = stream_parallel_files(source, target)
    assert streamed(stream, batch_size) == (list(corpus), corpus.skipped_empty)
    assert corpus.skipped_empty == 3
    assert stream.name == "s+t" and stream.files == (str(source), str(target))


def test_the_whitespace_stripped_is_python_s():
    spaces = "".join(chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace())
    stripped = tf.strings.regex_replace(
        [f"{spaces}x{spaces}", *spaces, "\u200bx"], streams._STRIP, ""
    )
    assert stripped.numpy().tolist() == [b"x"] + [b""] * len(spaces) + [
        "\u200bx".encode()
    ]


def test_the_identity_follows_the_content(tmp_path):
    source = write(tmp_path / "s", "a\nb\n")
    target = write(tmp_path / "t", "x\ny\n")
    first = stream_parallel_files(source, target).identity
    assert stream_parallel_files(source, target).identity == first
    write(target, "x\nz\n")  # same size, other content
    assert stream_parallel_files(source, target).identity != first
    a = stream_pairs(ParallelCorpus(("a",), ("b",))).identity
    assert a == stream_pairs(ParallelCorpus(("a",), ("b",)), name="other").identity
    assert a != stream_pairs(ParallelCorpus(("ab",), ("",))).identity
    with pytest.raises(ValueError, match="needs an identity"):
        stream_pairs(ParallelCorpus(("a",), ("b",)).dataset())


@pytest.mark.parametrize("batch_size", [2, 4096])
def test_files_of_different_lengths_are_refused(tmp_path, batch_size):
    source = write(tmp_path / "s.gz", "a\nb\nc\n", compress=True)
    for text, count in (("x\ny\n", 2), ("x\ny\nz\nw\n", 4), ("", 0)):
        target = write(tmp_path / "t", text)
        with pytest.raises(ValueError) as error:
            list(stream_parallel_files(source, target).iterate(batch_size))
        assert str(error.value) == (
            "Source and target files must have the same number of lines. "
            f"Received: {source} has 3 lines, {target} has {count} lines"
        )


def test_invalid_utf8_names_the_file_and_line_as_read_lines_does(tmp_path):
    source = write(tmp_path / "s", "ok\nok\nok\n")
    target = write(tmp_path / "t.gz", b"ok\nok\nbad \xff here\n", compress=True)
    with pytest.raises(ValueError) as expected:
        load_parallel_files(source, target)
    with pytest.raises(ValueError) as error:
        list(stream_parallel_files(source, target).iterate(batch_size=2))
    assert str(error.value) == str(expected.value)
    assert "line 3, byte 5" in str(error.value)


def test_a_corrupt_gzip_file_is_named(tmp_path):
    data = gzip.compress(b"line\n" * 20000)
    source = write(tmp_path / "s.gz", data[: len(data) // 2])
    target = write(tmp_path / "t", "x\n" * 20000)
    with pytest.raises(ValueError, match=rf"{source}: not a valid gzip file"):
        list(stream_parallel_files(source, target).iterate())


def test_a_missing_file_is_named(tmp_path):
    target = write(tmp_path / "t", "x\n")
    with pytest.raises(FileNotFoundError, match="No such file: .*/nothing"):
        stream_parallel_files(tmp_path / "nothing", target)


def test_a_sample_of_sentences_in_tokenizer_order(tmp_path):
    source = write(tmp_path / "s", "".join(f"s{i}\n" for i in range(100)))
    target = write(tmp_path / "t", "".join(f"t{i}\n" for i in range(100)))
    stream = stream_parallel_files(source, target)
    everything, total = stream.sample_sentences(1000, batch_size=7)
    assert total == 200
    assert everything[:4] == ["s0", "t0", "s1", "t1"] and len(everything) == 200
    sample, total = stream.sample_sentences(30, batch_size=7)
    assert total == 200 and len(sample) == 30 and set(sample) < set(everything)
    assert stream.sample_sentences(30, batch_size=64) == (sample, total)
