"""Signed translators: only one made here, from that model.keras, loads."""

import json

import pytest

from keras_transformer.jobs import trust


@pytest.fixture
def model_dir(tmp_path):
    (tmp_path / "model.keras").write_bytes(b"weights")
    (tmp_path / "tokenizer").mkdir()
    (tmp_path / "tokenizer" / "tokenizer.model").write_bytes(b"pieces")
    translator = tmp_path / "translator"
    (translator / "variables").mkdir(parents=True)
    (translator / "saved_model.pb").write_bytes(b"graph")
    (translator / "variables" / "variables.index").write_bytes(b"index")
    return tmp_path


def _check(model_dir):
    return trust.check_translator(
        model_dir / "translator", *trust.model_files(model_dir)
    )


def _sign(model_dir):
    trust.sign_translator(model_dir / "translator", *trust.model_files(model_dir))


def test_a_translator_signed_here_for_this_model_loads(model_dir):
    _sign(model_dir)
    assert _check(model_dir) is None


def test_an_unsigned_translator_is_foreign(model_dir):
    assert "no signature" in _check(model_dir)
    (model_dir / "translator" / trust.SIGNATURE_FILE).write_text("[1]")
    assert "malformed" in _check(model_dir)


def test_a_changed_model_makes_it_stale(model_dir):
    _sign(model_dir)
    (model_dir / "model.keras").write_bytes(b"retrained weights")
    assert "stale" in _check(model_dir)
    _sign(model_dir)
    (model_dir / "tokenizer" / "tokenizer.model").write_bytes(b"other pieces")
    assert "stale" in _check(model_dir)


def test_a_changed_or_added_translator_file_is_refused(model_dir):
    _sign(model_dir)
    graph = model_dir / "translator" / "saved_model.pb"
    graph.write_bytes(b"another graph")
    assert "files changed" in _check(model_dir)
    graph.write_bytes(b"graph")
    assert _check(model_dir) is None
    (model_dir / "translator" / "assets").mkdir()
    (model_dir / "translator" / "assets" / "extra").write_bytes(b"")
    assert "files changed" in _check(model_dir)


def test_a_forged_record_without_the_key_is_refused(model_dir, tmp_path, monkeypatch):
    # Someone else's machine: its own key signs the same files.
    _sign(model_dir)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "elsewhere"))
    assert "another key" in _check(model_dir)
    # Their record with a MAC made without our key does not pass either.
    path = model_dir / "translator" / trust.SIGNATURE_FILE
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "hmac": "0" * 64}))
    assert "another key" in _check(model_dir)


def test_the_key_is_made_once_and_private(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    first = trust._key()
    assert trust._key() == first and len(first) == 32
    path = tmp_path / "keras_transformer" / "translator.key"
    assert path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["translator.key"]


@pytest.mark.parametrize("text", ["", "zz" * 32, "ab" * 8])
def test_a_damaged_key_is_refused_not_used(model_dir, tmp_path, monkeypatch, text):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    _sign(model_dir)
    (tmp_path / "config" / "keras_transformer" / "translator.key").write_text(text)
    with pytest.raises(ValueError, match="not a translator key"):
        _check(model_dir)


def test_the_check_and_the_load_read_one_private_copy(model_dir):
    _sign(model_dir)
    copy = trust.private_copy(model_dir / "translator")
    assert copy.parent != model_dir and not copy.is_relative_to(model_dir)
    assert trust.check_translator(copy, *trust.model_files(model_dir)) is None
    # Changes to the directory after the copy do not reach what is loaded.
    (model_dir / "translator" / "saved_model.pb").write_bytes(b"swapped")
    assert (copy / "saved_model.pb").read_bytes() == b"graph"


def test_a_symbolic_link_in_a_translator_is_refused(model_dir, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "x.bin").write_bytes(b"unsigned")
    (model_dir / "translator" / "assets").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ValueError, match="symbolic link"):
        trust.private_copy(model_dir / "translator")
