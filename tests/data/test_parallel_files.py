import gzip
import re

import pytest
import tensorflow as tf

from keras_transformer.data import ParallelCorpus, load_parallel_files, read_lines


def write(path, data: bytes, compress: bool = False):
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


@pytest.mark.parametrize("compress", [False, True])
def test_plain_and_gzip_files_load_the_same(tmp_path, compress):
    src = write(tmp_path / "a.src", b"Hello .\nTwo  words\n", compress)
    tgt = write(tmp_path / "a.tgt", "Hallo .\nZwei  Wörter\n".encode(), compress)
    corpus = load_parallel_files(src, tgt)
    assert list(corpus) == [("Hello .", "Hallo ."), ("Two  words", "Zwei  Wörter")]
    assert corpus.skipped_empty == 0
    pairs = [(s.numpy(), t.numpy()) for s, t in corpus.dataset()]
    assert pairs == [(b"Hello .", b"Hallo ."), (b"Two  words", "Zwei  Wörter".encode())]


def test_gzip_is_recognized_by_content_not_name(tmp_path):
    path = write(tmp_path / "plain_name.txt", b"eins\nzwei\n", compress=True)
    assert read_lines(path) == ["eins", "zwei"]


def test_line_splitting_details(tmp_path):
    data = "\ufeffone\r\ntwo\u2028still two\x0cstill\nlast without newline"
    path = write(tmp_path / "x.txt", data.encode())
    assert read_lines(path) == [
        "one",
        "two\u2028still two\x0cstill",
        "last without newline",
    ]
    assert read_lines(write(tmp_path / "y.txt", b"a\n\n")) == ["a", ""]
    assert read_lines(write(tmp_path / "z.txt", b"")) == []


def test_different_line_counts_name_both_files_and_counts(tmp_path):
    src = write(tmp_path / "train.en", b"a\nb\nc\n")
    tgt = write(tmp_path / "train.de.gz", b"a\nb\n", compress=True)
    with pytest.raises(ValueError) as error:
        load_parallel_files(src, tgt)
    message = str(error.value)
    assert f"{src} has 3 lines" in message
    assert f"{tgt} has 2 lines" in message


@pytest.mark.parametrize("compress", [False, True])
def test_invalid_utf8_names_file_and_line(tmp_path, compress):
    good = write(tmp_path / "good.txt", b"a\nb\nc\nd\n")
    bad = write(tmp_path / "bad.txt", b"fine\nfine\nbro\xffken\nfine\n", compress)
    with pytest.raises(ValueError, match=re.escape(f"{bad}: invalid UTF-8 at line 3")):
        load_parallel_files(good, bad)
    with pytest.raises(ValueError, match=re.escape(f"{bad}: invalid UTF-8 at line 3")):
        load_parallel_files(bad, good)


def test_corrupt_gzip_names_the_file(tmp_path):
    data = gzip.compress(b"a\nb\n" * 100)
    bad = write(tmp_path / "cut.gz", data[: len(data) // 2])
    with pytest.raises(ValueError, match=re.escape(f"{bad}: not a valid gzip file")):
        read_lines(bad)


def test_empty_lines_are_skipped_and_counted(tmp_path, caplog):
    src = write(tmp_path / "s.txt", b"one\n\nthree\n   \nfive\nsix\n")
    tgt = write(tmp_path / "t.txt", b"eins\nzwei\ndrei\nvier\n\t\nsechs\n")
    corpus = load_parallel_files(src, tgt)
    assert list(corpus) == [("one", "eins"), ("three", "drei"), ("six", "sechs")]
    assert corpus.skipped_empty == 3
    assert "skipped 3 of 6 line pairs" in caplog.text


def test_empty_lines_are_errors_in_strict_mode(tmp_path):
    src = write(tmp_path / "s.txt", b"one\ntwo\nthree\n")
    tgt = write(tmp_path / "t.txt", b"eins\nzwei\n \n")
    with pytest.raises(ValueError, match=re.escape(f"{tgt}: line 3 is empty")):
        load_parallel_files(src, tgt, strict=True)


def test_strip_only_touches_the_ends(tmp_path):
    src = write(tmp_path / "s.txt", b"  a\tb  \n")
    tgt = write(tmp_path / "t.txt", b"x  y \n")
    assert list(load_parallel_files(src, tgt)) == [("a\tb", "x  y")]
    assert list(load_parallel_files(src, tgt, strip=False)) == [("  a\tb  ", "x  y ")]


def test_parallel_corpus_checks_lengths_and_converts():
    with pytest.raises(ValueError, match="2 sources and 1 targets"):
        ParallelCorpus(["a", "b"], ["x"])
    corpus = ParallelCorpus(["a", "b"], ["x", "y"], name="toy")
    assert corpus.sources == ("a", "b")
    assert list(corpus.texts()) == ["a", "b", "x", "y"]
    empty = ParallelCorpus((), ())
    assert len(empty) == 0
    assert empty.dataset().element_spec == (
        tf.TensorSpec([], tf.string),
        tf.TensorSpec([], tf.string),
    )
