import hashlib
import io
import shutil
import urllib.request

import pytest

from keras_transformer.data import load_multi30k, read_lines
from keras_transformer.data import multi30k as multi30k_module


@pytest.mark.parametrize(
    "split, size", [("train", 29000), ("val", 1014), ("test_2016_flickr", 1000)]
)
def test_local_copy_loads_with_its_quirks(multi30k_dir, split, size):
    corpus = load_multi30k(split, data_dir=multi30k_dir)
    assert len(corpus) == size
    assert corpus.skipped_empty == 0
    assert corpus.name == f"multi30k/{split}.en-de"
    assert all(s and t for s, t in corpus)
    # Ends are stripped (40 raw train.de lines end with a space).
    assert not any(t != t.strip() for t in corpus.targets)
    if split == "train":
        assert corpus.targets[16510 - 1] == corpus.targets[16664 - 1] == "@@"
        assert "\t" in corpus.targets[7366 - 1]
        assert corpus.sources[0] == read_lines(multi30k_dir / "train.en.gz")[0]


def test_direction_can_be_reversed(multi30k_dir):
    en_de = load_multi30k("val", data_dir=multi30k_dir)
    de_en = load_multi30k("val", data_dir=multi30k_dir, source="de", target="en")
    assert de_en.sources == en_de.targets and de_en.targets == en_de.sources


def test_unknown_split_or_language():
    with pytest.raises(ValueError, match="split"):
        load_multi30k("dev")
    with pytest.raises(ValueError, match="'xx'"):
        load_multi30k("val", target="xx")


def test_missing_files_without_download(tmp_path):
    with pytest.raises(FileNotFoundError, match="val.en.gz"):
        load_multi30k("val", data_dir=tmp_path, download=False)


def test_uncompressed_files_are_found(multi30k_dir, tmp_path):
    for language in ("en", "de"):
        lines = read_lines(multi30k_dir / f"val.{language}.gz")
        (tmp_path / f"val.{language}").write_text(
            "\n".join(lines) + "\n", encoding="utf-8"
        )
    corpus = load_multi30k("val", data_dir=tmp_path, download=False)
    assert corpus == load_multi30k("val", data_dir=multi30k_dir)


class FakeServer:
    """Stands in for `urllib.request.urlopen`, serving the local copy."""

    def __init__(self, directory, corrupt=False):
        self.directory = directory
        self.corrupt = corrupt
        self.urls = []

    def __call__(self, url, timeout=None):
        self.urls.append(url)
        content = (self.directory / url.rsplit("/", 1)[1]).read_bytes()
        if self.corrupt:
            content = content[:-10]
        return io.BytesIO(content)


def test_download_into_data_dir(multi30k_dir, tmp_path, monkeypatch):
    server = FakeServer(multi30k_dir)
    monkeypatch.setattr(urllib.request, "urlopen", server)
    corpus = load_multi30k("val", data_dir=tmp_path / "cache")
    commit = multi30k_module.MULTI30K_COMMIT
    assert server.urls == [
        "https://raw.githubusercontent.com/multi30k/dataset/"
        f"{commit}/data/task1/raw/val.{language}.gz"
        for language in ("en", "de")
    ]
    for language in ("en", "de"):
        downloaded = (tmp_path / "cache" / f"val.{language}.gz").read_bytes()
        assert downloaded == (multi30k_dir / f"val.{language}.gz").read_bytes()
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [
        "val.de.gz",
        "val.en.gz",
    ]
    assert corpus == load_multi30k("val", data_dir=multi30k_dir)
    # Present now: no second download.
    load_multi30k("val", data_dir=tmp_path / "cache")
    assert len(server.urls) == 2


def test_download_goes_to_the_cache_dir_by_default(multi30k_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(urllib.request, "urlopen", FakeServer(multi30k_dir))
    monkeypatch.setenv("KERAS_TRANSFORMER_CACHE_DIR", str(tmp_path))
    load_multi30k("test_2016_flickr")
    assert (tmp_path / "multi30k" / "test_2016_flickr.de.gz").exists()


def test_known_checksums_match_the_local_copy(multi30k_dir):
    for filename, expected in multi30k_module._SHA256.items():
        actual = hashlib.sha256((multi30k_dir / filename).read_bytes()).hexdigest()
        assert actual == expected, filename


def test_corrupt_download_is_rejected_and_not_kept(multi30k_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(urllib.request, "urlopen", FakeServer(multi30k_dir, True))
    with pytest.raises(ValueError, match="Checksum mismatch"):
        load_multi30k("val", data_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_failed_download_names_the_url(tmp_path, monkeypatch):
    def offline(url, timeout=None):
        raise OSError("network unreachable")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    with pytest.raises(OSError, match="Could not download https://.*val.en.gz"):
        load_multi30k("val", data_dir=tmp_path)


def test_existing_files_are_used_as_they_are(multi30k_dir, tmp_path, monkeypatch):
    shutil.copy(multi30k_dir / "val.en.gz", tmp_path)
    server = FakeServer(multi30k_dir)
    monkeypatch.setattr(urllib.request, "urlopen", server)
    load_multi30k("val", data_dir=tmp_path)
    assert [url.rsplit("/", 1)[1] for url in server.urls] == ["val.de.gz"]
