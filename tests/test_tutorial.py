"""`notebooks/tutorial.py`: what notebooks 5, 6 and 7 share."""

import importlib.util
import json
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parents[1] / "notebooks" / "tutorial.py"
spec = importlib.util.spec_from_file_location("tutorial", PATH)
tutorial = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tutorial)


@pytest.fixture
def model_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(tutorial, "MODEL_DIR", tmp_path)
    return tmp_path


def test_saved_info_is_the_description_save_model_wrote(model_dir):
    info = {"corpus": "multi30k", "steps": 3, "notebook_05": tutorial.fingerprint()}
    (model_dir / "info.json").write_text(json.dumps(info, indent=1))
    assert tutorial.saved_info() == info


@pytest.mark.parametrize("text", [None, "", '{"corpus": "multi', "[1, 2]"])
def test_a_missing_or_cut_off_description_is_none(model_dir, text):
    if text is not None:
        (model_dir / "info.json").write_text(text)
    assert tutorial.saved_info() == {}


def test_load_model_trains_again_when_the_description_is_cut_off(
    model_dir, monkeypatch
):
    # A save cut off while writing info.json: notebook 5 runs again, as
    # when there is no model, instead of a JSON error.
    (model_dir / "info.json").write_text('{"corpus": "multi30k", "notebook_05": "')
    ran = []

    def training_notebook():
        ran.append(True)
        raise RuntimeError("notebook 5 would run here")

    monkeypatch.setattr(tutorial, "run_training_notebook", training_notebook)
    with pytest.raises(RuntimeError, match="notebook 5 would run here"):
        tutorial.load_model()
    assert ran == [True]
