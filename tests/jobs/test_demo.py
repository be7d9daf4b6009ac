"""The main job end to end, at a size that runs in CI."""

import json
import os
import sys

import pytest
import tensorflow as tf
from sacrebleu.metrics import BLEU

from keras_transformer import cli
from keras_transformer.jobs.demo import run_demo
from keras_transformer.jobs.run_dir import RunError


@pytest.mark.slow
def test_demo_writes_everything_it_promises(tmp_path, capsys):
    out = tmp_path / "demo"
    result = run_demo(minutes=0.02, output_dir=str(out), verbose=0, test_sentences=6)
    assert result["summary"]["steps"] >= 1
    assert result["summary"]["stopped_by_budget"] is True
    # The demo spends its minutes on training steps, none on validation.
    assert "loss" in result["summary"]["history"]
    assert "val_loss" not in result["summary"]["history"]
    scores = result["scores"]
    assert scores["sentences"] == 6 and len(result["examples"]) == 6
    # The score is sacrebleu's on the translations the demo shows.
    hypotheses = [translation for _, translation, _ in result["examples"]]
    references = [reference for _, _, reference in result["examples"]]
    assert scores["bleu"] == pytest.approx(
        BLEU().corpus_score(hypotheses, [references]).score, abs=1e-9
    )
    assert "tok:13a" in scores["bleu_signature"]
    for name, path in result["files"].items():
        assert (out / path.split("/")[-1]).exists(), name
    summary = json.loads((out / "summary.json").read_text())
    assert summary["test"] == scores and summary["finished"]
    # The test split, for the `evaluate` command the demo prints.
    sources = (out / "test.en").read_text(encoding="utf-8").splitlines()
    assert sources == [source for source, _, _ in result["examples"]]

    # The exported translator gives what the in-process translator gave.
    loaded = tf.saved_model.load(str(out / "translator"))
    got = [t.decode("utf-8") for t in loaded(tf.constant(sources[:2])).numpy()]
    assert got == hypotheses[:2]

    # The commands it prints name the virtual environment's programs, so
    # they work without activating it.
    cli._print_demo(result, str(out))
    printed = capsys.readouterr().out
    bin_dir = os.path.dirname(sys.executable)
    assert f"{os.path.join(bin_dir, 'keras-transformer')} translate" in printed
    assert f"--source {out / 'test.en'} --reference {out / 'test.de'}" in printed

    # Run again: the finished demo is shown, nothing is written.
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    again = run_demo(minutes=0.02, output_dir=str(out), verbose=0, test_sentences=6)
    assert again["scores"] == scores
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == before

    # --overwrite starts the demo over, its own files included.
    again = run_demo(
        minutes=0.01, output_dir=str(out), verbose=0, test_sentences=2, overwrite=True
    )
    assert again["scores"]["sentences"] == 2
    assert len((out / "test.en").read_text().splitlines()) == 2
    # ... and touches nothing it did not write.
    (out / "notes.txt").write_text("mine")
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    with pytest.raises(RunError, match=r"no run wrote \(notes.txt\)"):
        run_demo(minutes=0.01, output_dir=str(out), verbose=0, overwrite=True)
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == before
