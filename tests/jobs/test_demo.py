"""The main job end to end, at a size that runs in CI."""

import json

import pytest
import tensorflow as tf

from keras_transformer.jobs.demo import run_demo


@pytest.mark.slow
def test_demo_writes_everything_it_promises(tmp_path):
    out = tmp_path / "demo"
    result = run_demo(minutes=0.02, output_dir=str(out), verbose=0, test_sentences=6)
    assert result["summary"]["steps"] >= 1
    assert result["summary"]["stopped_by_budget"] is True
    # The demo spends its minutes on training steps, none on validation.
    assert "loss" in result["summary"]["history"]
    assert "val_loss" not in result["summary"]["history"]
    scores = result["scores"]
    assert scores["sentences"] == 6
    assert 0.0 <= scores["bleu"] <= 100.0
    assert "tok:13a" in scores["bleu_signature"]
    assert len(result["examples"]) == 6
    for name, path in result["files"].items():
        assert (out / path.split("/")[-1]).exists(), name
    summary = json.loads((out / "summary.json").read_text())
    assert summary["test"] == scores

    # The exported translator gives what the in-process pipeline gave.
    sources = [source for source, _, _ in result["examples"][:2]]
    translations = [translation for _, translation, _ in result["examples"][:2]]
    loaded = tf.saved_model.load(str(out / "translator"))
    got = [t.decode("utf-8") for t in loaded(tf.constant(sources)).numpy()]
    assert got == translations
