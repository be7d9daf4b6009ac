"""The translate job: streaming, line numbers, order, bad bytes, truncation."""

import io
import logging

import pytest

from keras_transformer.jobs import translate as job

LIMIT = 3  # the fake model's longest source, in words


def fake_translate(calls):
    """Reverses each line's words; lines of more than LIMIT words are cut."""

    def translate(sentences):
        calls.append(list(sentences))
        return {
            "translations": [" ".join(s.split()[:LIMIT][::-1]) for s in sentences],
            "truncated": [len(s.split()) > LIMIT for s in sentences],
            "source_limit": LIMIT,
        }

    return translate


def test_one_line_out_per_line_in_order_across_chunks(caplog):
    lines = ["a b", "", "c d e f g", "h", "   ", "i j k", "l m n o"]
    calls = []
    with caplog.at_level(logging.WARNING, logger="keras_transformer"):
        chunks = list(job.translate_stream(fake_translate(calls), lines, 3, "in.txt"))
    assert [len(c) for c in calls] == [3, 3, 1]  # read in chunks of 3 lines
    assert sum(chunks, []) == ["b a", "", "e d c", "h", "", "k j i", "n m l"]
    # Each over-long line is named once, by its number in the whole input.
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2
    assert warnings[0].startswith("in.txt, line 3: longer than the model's 3")
    assert warnings[1].startswith("in.txt, line 7: ")


def test_first_chunk_is_translated_before_the_input_ends():
    calls = []

    def endless():
        for i in range(10**9):
            if i == 5:
                raise AssertionError("read past the first two chunks")
            yield f"w{i}"

    chunks = job.translate_stream(fake_translate(calls), endless(), 2)
    assert next(chunks) == ["w0", "w1"]
    assert next(chunks) == ["w2", "w3"]
    assert calls == [["w0", "w1"], ["w2", "w3"]]


def test_bytes_that_are_not_utf8_are_replaced_with_a_warning(caplog):
    stream = io.BytesIO(b"gut\n\xff\xfe caf\xc3\xa9\r\nende")
    with caplog.at_level(logging.WARNING, logger="keras_transformer"):
        lines = list(job.read_lines(stream, "stdin"))
    assert lines == ["gut", "\ufffd\ufffd café", "ende"]
    assert [r.getMessage() for r in caplog.records] == [
        "stdin, line 2: bytes that are not UTF-8 were replaced"
    ]


def test_missing_input_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere.txt"):
        job.translate_files(str(tmp_path), [str(tmp_path / "nowhere.txt")])


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("terminal", [False, True])
def test_files_in_order_with_a_progress_bar_on_a_terminal(
    tmp_path, monkeypatch, terminal
):
    paths = [tmp_path / "a.txt", tmp_path / "b.txt"]
    paths[0].write_text("a b\n\nc d e f\n", encoding="utf-8")
    paths[1].write_text("g h\n", encoding="utf-8")
    monkeypatch.setattr(job, "load_translator", lambda *a, **k: fake_translate([]))
    stderr = Terminal() if terminal else io.StringIO()
    monkeypatch.setattr("sys.stderr", stderr)
    out = io.StringIO()
    count = job.translate_files(str(tmp_path), [str(p) for p in paths], output=out)
    assert count == 4
    assert out.getvalue() == "b a\n\ne d c\nh g\n"
    assert ("4/4" in stderr.getvalue()) == terminal  # the bar, on a terminal only


def test_search_settings_come_from_the_models_recipe(tmp_path):
    from keras_transformer.jobs.run_dir import search_settings

    run = tmp_path / "run"
    (run / "snapshots" / "minute_30").mkdir(parents=True)
    assert search_settings(run) == {"beam_size": 4, "alpha": 0.6}  # no recipe
    (run / "config.yaml").write_text("evaluation:\n  beam_size: 5\n  alpha: 1.0\n")
    assert search_settings(run) == {"beam_size": 5, "alpha": 1.0}
    # A snapshot folder uses its run's recipe.
    assert search_settings(run / "snapshots" / "minute_30") == {
        "beam_size": 5,
        "alpha": 1.0,
    }
    (run / "config.yaml").write_text("evaluation:\n  alpha: 1\n")
    assert search_settings(run) == {"beam_size": 4, "alpha": 1.0}
    (run / "config.yaml").write_text("")
    assert search_settings(run) == {"beam_size": 4, "alpha": 0.6}


@pytest.mark.parametrize(
    "text, fragments",
    [
        ("evaluation: [unclosed\n", ["config.yaml, line 2: expected"]),
        ("- a list\n", ["config.yaml: expected a recipe", "got a list"]),
        ("evaluation: 5\n", ["config.yaml: evaluation: 5"]),
        (
            "evaluation: {beam_size: abc}\n",
            ["config.yaml: evaluation.beam_size: 'abc'"],
        ),
        ("evaluation: {alpha: .nan}\n", ["config.yaml: evaluation.alpha: nan"]),
        (
            "evaluation: {beam_size: 2, beam_size: 3}\n",
            ["config.yaml, line 1: duplicate key evaluation.beam_size"],
        ),
    ],
)
def test_a_models_recipe_that_is_not_one_is_named(tmp_path, capsys, text, fragments):
    from keras_transformer import cli

    (tmp_path / "config.yaml").write_text(text)
    assert cli.main(["translate", "--model", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("keras-transformer translate: error: ")
    for fragment in fragments:
        assert fragment in err[0], err
    assert str(tmp_path / "config.yaml") in err[0]


def test_the_recipe_is_not_read_when_the_search_is_given(tmp_path, monkeypatch):
    from keras_transformer import cli

    (tmp_path / "config.yaml").write_text("- not a recipe\n")
    seen = {}
    monkeypatch.setattr(
        job,
        "translate_files",
        lambda model, files, beam_size, alpha: seen.update(search=(beam_size, alpha)),
    )
    argv = ["translate", "--model", str(tmp_path), "--beam", "2", "--alpha", "1"]
    assert cli.main(argv) == 0
    assert seen["search"] == (2, 1.0)


def test_ctrl_c_during_translate_is_one_line_and_status_130(
    tmp_path, monkeypatch, capsys
):
    from keras_transformer import cli

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(job, "translate_files", interrupted)
    assert cli.main(["translate", "--model", str(tmp_path)]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["keras-transformer translate: interrupted"]


@pytest.mark.parametrize(
    "options, expected",
    [([], (5, 1.2)), (["--beam", "1"], (1, 1.2)), (["--alpha", "0.6"], (5, 0.6))],
)
def test_commands_default_to_the_recipes_search(
    tmp_path, monkeypatch, options, expected
):
    from keras_transformer import cli

    (tmp_path / "config.yaml").write_text("evaluation:\n  beam_size: 5\n  alpha: 1.2\n")
    seen = {}
    monkeypatch.setattr(
        job,
        "translate_files",
        lambda model, files, beam_size, alpha: seen.update(search=(beam_size, alpha)),
    )
    assert cli.main(["translate", "--model", str(tmp_path), *options]) in (0, None)
    assert seen["search"] == expected
