"""The train job in process: policy restored, overrides used, runs extended."""

import json
import logging

import keras
import numpy as np
import pytest
import tensorflow as tf
import yaml

from keras_transformer.config import config_from_dict
from keras_transformer.decoding import Translator
from keras_transformer.jobs import train
from keras_transformer.jobs.run_dir import load_trained
from keras_transformer.jobs.train import _warn_if_the_cooldown_moves, train_from_config
from keras_transformer.models import RDropTransformer
from keras_transformer.training.checkpoints import checkpoint_prefixes

SOURCES = ["one cat", "two cats", "three dogs", "a dog", "four birds", "one bird"]
TARGETS = ["eine Katze", "zwei Katzen", "drei Hunde", "ein Hund", "vier Vögel"]
TARGETS.append("ein Vogel")


def _config(tmp_path, **training):
    for suffix, lines in (("en", SOURCES), ("de", TARGETS)):
        (tmp_path / f"train.{suffix}").write_text("\n".join(lines * 4) + "\n")
    return config_from_dict(
        {
            "data": {
                "corpus": "files",
                "train_files": [str(tmp_path / "train.en"), str(tmp_path / "train.de")],
                "max_length": 16,
            },
            "tokenizer": {"vocab_size": 300},
            "model": {
                "preset": "tiny",
                "overrides": {
                    "num_layers": 1,
                    "d_model": 16,
                    "num_heads": 2,
                    "d_ff": 32,
                    "max_length": 24,
                },
            },
            "training": {
                "steps": 2,
                "token_budget": 64,
                "warmup_steps": 10,
                "average_last": 0,
                **training,
            },
            "output_dir": str(tmp_path / "run"),
        }
    )


@pytest.mark.slow
def test_mixed_precision_run_restores_the_policy_and_uses_the_overrides(
    tmp_path, monkeypatch, caplog
):
    assert keras.config.dtype_policy().name == "float32"
    # A CPU without bfloat16 instructions: the run says it may be slower.
    monkeypatch.setattr(train, "cpu_flags", lambda: frozenset({"avx2", "fma"}))
    with caplog.at_level(logging.WARNING, logger="keras_transformer"):
        summary = train_from_config(
            _config(tmp_path, mixed_precision="mixed_bfloat16"), verbose=0
        )
    slow = [r.getMessage() for r in caplog.records if "converts in software" in r.msg]
    assert slow == [
        "training.mixed_precision: mixed_bfloat16 on a CPU without avx512_bf16 or "
        "amx_bf16 instructions converts in software and may train slower than "
        'float32 (docs/training.md, "Mixed precision")'
    ]
    assert keras.config.dtype_policy().name == "float32"  # as before the run
    assert summary["finished"] and summary["steps"] == 2
    model, _ = load_trained(tmp_path / "run")
    assert model.max_length == 24  # model.overrides.max_length
    assert model.dtype_policy.name == "mixed_bfloat16"
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert saved["resumed_from_step"] == 0
    # Every file was written under a temporary name and renamed.
    assert not [p for p in (tmp_path / "run").rglob("*") if ".tmp" in p.name]


@pytest.mark.slow
def test_auto_precision_trains_in_bfloat16_where_the_cpu_computes_it(
    tmp_path, monkeypatch, caplog
):
    # No GPU; a CPU that lists bfloat16 dot products (the Zen 4 of the rows).
    monkeypatch.setattr(train, "_gpu_capabilities", lambda: [])
    monkeypatch.setattr(train, "cpu_flags", lambda: frozenset({"avx512_bf16"}))
    with caplog.at_level(logging.INFO, logger="keras_transformer"):
        summary = train_from_config(_config(tmp_path, mixed_precision="auto"))
    said = [m for r in caplog.records if "mixed_precision" in (m := r.getMessage())]
    assert said == [
        "training.mixed_precision: auto trains in mixed_bfloat16: "
        "the CPU lists avx512_bf16"
    ]
    assert not [r for r in caplog.records if "converts in software" in r.msg]
    assert summary["mixed_precision"] == "mixed_bfloat16"
    assert json.loads((tmp_path / "run" / "summary.json").read_text())[
        "mixed_precision"
    ] == ("mixed_bfloat16")
    model, _ = load_trained(tmp_path / "run")
    assert model.dtype_policy.name == "mixed_bfloat16"
    assert keras.config.dtype_policy().name == "float32"  # as before the run
    # The run's recipe keeps "auto": resumed elsewhere, it chooses again.
    recipe = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert recipe["training"]["mixed_precision"] == "auto"


def _weights(path):
    return keras.models.load_model(path, compile=False).get_weights()


@pytest.mark.slow
def test_a_finished_run_trains_on_to_a_larger_budget_as_one_longer_run(tmp_path):
    recipe = dict(average_last=2, checkpoint_minutes=1e-6, snapshot_minutes=[1e-6])
    (tmp_path / "longer").mkdir()
    longer = train_from_config(
        _config(tmp_path / "longer", steps=12, **recipe), verbose=0
    )
    first = train_from_config(_config(tmp_path, steps=6, **recipe), verbose=0)
    out = tmp_path / "run"
    finished_model = _weights(out / "model.keras")

    # A smaller budget, or the same: left as it is.
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    assert train_from_config(_config(tmp_path, steps=5, **recipe))["steps"] == 6
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == before

    summary = train_from_config(_config(tmp_path, steps=12, **recipe), verbose=0)
    assert summary["finished"] and summary["resumed_from_step"] == 6
    assert summary["steps"] == longer["steps"] == 12
    # One history entry per epoch, as in the longer run, though the first
    # run stopped inside an epoch and logged it.
    state = checkpoint_prefixes(out / "checkpoints")[-1]
    record = tf.train.load_checkpoint(state).get_tensor(
        "record/.ATTRIBUTES/VARIABLE_VALUE"
    )
    per_epoch = json.loads(record)["batches_per_epoch"]
    assert 6 % per_epoch and len(first["history"]["loss"]) == -(-6 // per_epoch)
    assert len(summary["history"]["loss"]) == len(longer["history"]["loss"])
    # Each entry's step and minutes, counted on across the resume.
    assert summary["history"]["step"] == longer["history"]["step"]
    assert summary["history"]["step"][-1] == 12 and 6 in first["history"]["step"]
    minutes = summary["history"]["minutes"]
    assert minutes == sorted(minutes) and minutes[-1] > minutes[0] > 0
    assert minutes[0] == first["history"]["minutes"][0]
    # The same weights as one run of 12 steps.
    for a, b in zip(
        _weights(tmp_path / "longer" / "run" / "model.keras"),
        _weights(out / "model.keras"),
        strict=True,
    ):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    # The finished model is kept, with what the run ended with.
    kept = out / "snapshots" / "step_6"
    for a, b in zip(finished_model, _weights(kept / "model.keras"), strict=True):
        np.testing.assert_array_equal(a, b)
    assert (kept / "tokenizer").is_dir()
    assert json.loads((kept / "snapshot.json").read_text())["step"] == 6
    assert summary["extended"][0]["steps"] == first["steps"] == 6
    assert summary["extended"][0]["kept_in"] == "snapshots/step_6"
    assert "steps: 12" in (out / "config.yaml").read_text()


def test_a_run_of_another_recipe_is_refused_also_beside_a_new_budget(tmp_path):
    from keras_transformer.jobs.run_dir import RunError, run_status

    recipe = _config(tmp_path).to_dict()
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.yaml").write_text(yaml.safe_dump(recipe))
    (out / "summary.json").write_text(json.dumps({"finished": True, "steps": 2}))
    longer = {**recipe, "training": {**recipe["training"], "steps": 5}}
    assert run_status(out, longer) == "extend"
    assert run_status(out, recipe) == "finished"
    other = {**longer, "training": {**longer["training"], "warmup_steps": 11}}
    with pytest.raises(RunError, match="another recipe"):
        run_status(out, other)
    (out / "summary.json").write_text(json.dumps({"steps": 1}))  # unfinished
    assert run_status(out, longer) == "resume"


def test_an_unfinished_run_of_the_npz_state_is_refused_not_restarted(tmp_path):
    from keras_transformer.jobs.run_dir import RunError, run_status

    recipe = _config(tmp_path).to_dict()
    out = tmp_path / "run"
    (out / "state").mkdir(parents=True)
    (out / "config.yaml").write_text(yaml.safe_dump(recipe))
    (out / "state" / "state-000000004.npz").write_bytes(b"")
    with pytest.raises(RunError, match=r"earlier version.*--overwrite"):
        run_status(out, recipe)


@pytest.mark.slow
def test_the_final_model_is_the_best_candidate_on_validation(tmp_path):
    from keras_transformer.models import Transformer
    from keras_transformer.training import average_checkpoints

    for suffix, lines in (("en", SOURCES), ("de", TARGETS)):
        (tmp_path / f"valid.{suffix}").write_text("\n".join(lines) + "\n")
    config = _config(
        tmp_path, steps=9, average_last=2, keep_best=2, checkpoint_minutes=1e-6
    )
    config.data.valid_files = [str(tmp_path / "valid.en"), str(tmp_path / "valid.de")]
    summary = train_from_config(config, verbose=0)
    final = summary["final_model"]
    out = tmp_path / "run" / "checkpoints"
    # Each candidate was scored on validation; the lowest one was chosen.
    assert set(final["scores"]) == {"last", "best_average", "best"}
    assert final["scores"][final["choice"]] == min(final["scores"].values())
    kept = json.loads((out / "best" / "scores.json").read_text())
    assert len(kept) == 2 and summary["averaged_checkpoints"] == len(
        final["checkpoints"]
    )
    if final["choice"] != "last":
        assert final["checkpoint_scores"] == {n: kept[n] for n in final["checkpoints"]}
    # model.keras holds the average of the chosen checkpoints.
    folder = out / "best" if final["choice"] != "last" else out
    model = keras.models.load_model(tmp_path / "run" / "model.keras")
    twin = Transformer.from_config(model.get_config())
    twin.build()
    average_checkpoints(twin, [str(folder / n) for n in final["checkpoints"]])
    for a, b in zip(model.get_weights(), twin.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


@pytest.mark.slow
def test_minutes_count_training_not_choosing_the_final_model(tmp_path, monkeypatch):
    import time

    import keras_transformer.jobs.train as train

    def slow_choice(*args, **kwargs):
        time.sleep(1.5)
        return choose_final(*args, **kwargs)

    choose_final = train.choose_final
    monkeypatch.setattr(train, "choose_final", slow_choice)
    for suffix, lines in (("en", SOURCES), ("de", TARGETS)):
        (tmp_path / f"valid.{suffix}").write_text("\n".join(lines) + "\n")
    config = _config(tmp_path, steps=3, average_last=1, keep_best=1)
    config.data.valid_files = [str(tmp_path / "valid.en"), str(tmp_path / "valid.de")]
    summary = train_from_config(config, verbose=0, evaluate=False)
    assert summary["final_model"]["choice"] in ("last", "best_average", "best")
    # The budget's clock starts with `fit`, inside this run's minutes.
    assert summary["minutes"] <= summary["minutes_this_run"]


def _files(directory):
    return {
        str(p.relative_to(directory)): p.read_bytes() if p.is_file() else None
        for p in sorted(directory.rglob("*"))
    }


def test_a_failed_start_leaves_the_directory_as_it_found_it(tmp_path):
    from keras_transformer.config import ConfigError

    out = tmp_path / "run"
    # The schema allows 270; this corpus needs 284 ids at least.
    small = _config(tmp_path).model_copy(
        update={
            "tokenizer": config_from_dict({"tokenizer": {"vocab_size": 270}}).tokenizer
        }
    )
    with pytest.raises(ConfigError, match=r"tokenizer.vocab_size: 270 \(too small"):
        train_from_config(small, verbose=0)
    assert not out.exists()
    out.mkdir()
    with pytest.raises(ConfigError, match="tokenizer.vocab_size: 270"):
        train_from_config(small, verbose=0)
    assert list(out.iterdir()) == []
    # An empty test split is found before training, not after.
    (tmp_path / "test.en").write_text("")
    empty = _config(tmp_path)
    empty.data.test_files = [str(tmp_path / "test.en"), str(tmp_path / "test.en")]
    with pytest.raises(ConfigError, match="data.test_files: .* hold no sentence"):
        train_from_config(empty, verbose=0)
    assert list(out.iterdir()) == []

    # The corrected recipe is not blocked by anything the failures left.
    assert train_from_config(_config(tmp_path), verbose=0)["finished"]
    before = _files(out)
    # --overwrite checks first too: the finished run stays as it was.
    with pytest.raises(ConfigError, match="tokenizer.vocab_size: 270"):
        train_from_config(small, verbose=0, overwrite=True)
    assert _files(out) == before
    manifest = json.loads((out / "run.json").read_text())["entries"]
    assert set(manifest) == {p.name for p in out.iterdir()} - {"run.json"}


@pytest.mark.slow
def test_a_moved_run_trains_on_where_it_is_now(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    recipe = dict(average_last=2, checkpoint_minutes=1e-6)
    config = _config(tmp_path, **recipe)
    config.output_dir = "run"  # relative
    assert train_from_config(config, verbose=0)["steps"] == 2
    (tmp_path / "moved").mkdir()
    (tmp_path / "run").rename(tmp_path / "moved" / "here")
    moved = tmp_path / "moved" / "here"

    config = _config(tmp_path, **recipe)
    config.output_dir = str(moved) + "/"  # absolute, with a slash
    before = _files(moved)
    assert train_from_config(config, verbose=0)["steps"] == 2  # finished
    assert _files(moved) == before
    longer = _config(tmp_path, steps=4, **recipe)
    longer.output_dir = str(moved)
    summary = train_from_config(longer, verbose=0)
    assert summary["finished"] and summary["resumed_from_step"] == 2
    assert summary["steps"] == 4 and summary["averaged_checkpoints"] == 2
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_snapshots_by_steps_are_model_directories_of_their_step(tmp_path):
    # Snapshots at steps 2 and 3, beside one by minutes (after step 1).
    recipe = dict(
        steps=3, average_last=2, snapshot_steps=[3, 2], snapshot_minutes=[1e-6]
    )
    train_from_config(_config(tmp_path, **recipe), verbose=0)
    snapshots = tmp_path / "run" / "snapshots"
    names = sorted(p.name for p in snapshots.iterdir())
    assert names == ["minute_1e-06", "step_2", "step_3"]
    for name, step in (("step_2", 2), ("step_3", 3)):
        info = json.loads((snapshots / name / "snapshot.json").read_text())
        assert info["step"] == step
        model, tokenizer = load_trained(snapshots / name)  # what `evaluate` reads
        assert tokenizer.vocab_size == model.vocab_size
    # The last one is the finished model: the same average of the same steps.
    for a, b in zip(
        _weights(tmp_path / "run" / "model.keras"),
        _weights(snapshots / "step_3" / "model.keras"),
        strict=True,
    ):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_weight_decay_shrinks_every_kernel_and_the_embeddings(tmp_path):
    # warm-up 10 on d_model 16: rates 0.0079 and 0.0158 in the two steps, so
    # a decay of 20 takes 16% and then 32% off each weight; Adam's own
    # updates are the same in both runs, about the rate in size.
    models = {}
    for decay in (0.0, 20.0):
        folder = tmp_path / f"decay_{decay}"
        folder.mkdir()
        train_from_config(_config(folder, weight_decay=decay), verbose=0)
        models[decay] = keras.models.load_model(folder / "run" / "model.keras")
    plain, decayed = models[0.0], models[20.0]
    assert plain.optimizer.weight_decay is None  # no decay op in the step
    assert float(decayed.optimizer.weight_decay) == 20.0
    matrices = [
        (p.path, np.linalg.norm(p.numpy()), np.linalg.norm(d.numpy()))
        for p, d in zip(plain.trainable_weights, decayed.trainable_weights, strict=True)
        if p.path.endswith(("kernel", "embeddings"))  # biases start at 0
    ]
    assert len(matrices) >= 10
    for path, norm_plain, norm_decayed in matrices:
        assert norm_decayed < 0.8 * norm_plain, (path, norm_plain, norm_decayed)


def test_cooldown_steps_take_the_last_updates_down_a_line(tmp_path, caplog):
    train_from_config(_config(tmp_path, steps=4, cooldown_steps=2), verbose=0)
    model = keras.models.load_model(tmp_path / "run" / "model.keras")
    config = model.optimizer.get_config()["learning_rate"]
    assert config["class_name"] == "LinearCooldown"
    assert config["config"]["schedule"]["config"]["warmup_steps"] == 10
    schedule = keras.optimizers.schedules.deserialize(config)
    # Updates 3 and 4 (iterations 2 and 3) take 1 and 1/2 of the paper's
    # rate at step 2: 16**-0.5 * 2 * 10**-1.5 = 0.0158114.
    assert int(model.optimizer.iterations) == 4
    np.testing.assert_allclose(
        [float(schedule(2)), float(schedule(3))], [0.0158114, 0.0079057], rtol=1e-5
    )
    assert not [r for r in caplog.records if "cool-down" in r.getMessage()]

    def moved():
        return [r.getMessage() for r in caplog.records if "cool down" in r.getMessage()]

    with caplog.at_level(logging.WARNING):
        # The recipe's own steps: the line stays where it was.
        same = _config(tmp_path, steps=4, cooldown_steps=2).training
        _warn_if_the_cooldown_moves(tmp_path / "run", same)
        assert not moved()
        # A run killed before it wrote its summary resumes; with more steps
        # its line moves, and the run says so.
        (tmp_path / "run" / "summary.json").unlink()
        train_from_config(_config(tmp_path, steps=6, cooldown_steps=2), verbose=0)
        assert len(moved()) == 1
        assert "over steps 2-4 (training.steps 4)" in moved()[0]
        assert "with training.steps 6 it cools down over steps 4-6" in moved()[0]
        # A finished run trained on: the same warning.
        train_from_config(_config(tmp_path, steps=8, cooldown_steps=2), verbose=0)
        assert len(moved()) == 2 and "over steps 4-6 (training.steps 6)" in moved()[1]
    model = keras.models.load_model(tmp_path / "run" / "model.keras")
    assert int(model.optimizer.iterations) == 8
    schedule = keras.optimizers.schedules.deserialize(
        model.optimizer.get_config()["learning_rate"]
    )
    assert (schedule.start, schedule.steps) == (6, 2)
    # A budget that stops the run first: it says the line was cut short.
    (tmp_path / "cut").mkdir()
    config = _config(tmp_path / "cut", steps=100, cooldown_steps=2, epochs=1)
    with caplog.at_level(logging.WARNING):
        summary = train_from_config(config, verbose=0)
    assert summary["steps"] < 100
    assert any("did not reach zero" in r.getMessage() for r in caplog.records)


@pytest.mark.slow
def test_rdrop_trains_an_rdrop_model_that_translates_as_a_transformer(tmp_path):
    config = _config(tmp_path, rdrop_alpha=5.0)
    summary = train_from_config(config, verbose=0)
    model = keras.models.load_model(tmp_path / "run" / "model.keras")
    assert type(model) is RDropTransformer and model.rdrop_alpha == 5.0
    assert model.dropout > 0 and int(model.optimizer.iterations) == 2
    assert np.isfinite(summary["history"]["loss"]).all()
    # The two passes differ: the logged objective exceeds the cross-entropy
    # that the same weights give with one pass (both at step 2, on the same
    # batches, from the same start).
    (tmp_path / "plain").mkdir()
    plain = train_from_config(_config(tmp_path / "plain"), verbose=0)
    assert summary["history"]["loss"][-1] > plain["history"]["loss"][-1]
    loaded, tokenizer = load_trained(tmp_path / "run")  # for inference
    translation = Translator(tokenizer, loaded, beam_size=2)(["one cat"])
    assert translation.shape == (1,) and translation.dtype == tf.string


@pytest.mark.slow
def test_bidirectional_epochs_reach_the_training_stream(tmp_path, monkeypatch):
    asked = []

    def prepared_batches(*args, **kwargs):
        asked.append(kwargs["bidirectional_epochs"])
        return real(*args, **kwargs)

    real = train.data.prepared_batches
    monkeypatch.setattr(train.data, "prepared_batches", prepared_batches)
    turned = train_from_config(_config(tmp_path, bidirectional_epochs=1), verbose=0)
    (tmp_path / "plain").mkdir()
    plain = train_from_config(_config(tmp_path / "plain"), verbose=0)
    assert asked == [1, 0]
    # The same seed and batches' shapes, other pairs' directions: other losses.
    assert turned["history"]["loss"] != plain["history"]["loss"]


@pytest.mark.slow
def test_weight_decay_exclude_spares_the_weights_it_names(tmp_path):
    # As above, a decay of 20 takes over 40% off every decayed weight in two
    # steps; the LayerNorm scales and the embeddings are spared.
    models = {}
    for decay, exclude in ((0.0, []), (20.0, ["gamma", "embeddings"])):
        folder = tmp_path / f"decay_{decay}"
        folder.mkdir()
        config = _config(folder, weight_decay=decay, weight_decay_exclude=exclude)
        train_from_config(config, verbose=0, evaluate=False)
        models[decay] = keras.models.load_model(folder / "run" / "model.keras")
    pairs = list(
        zip(models[0.0].trainable_weights, models[20.0].trainable_weights, strict=True)
    )
    spared = decayed = 0
    for plain, other in pairs:
        norm_plain, norm_other = np.linalg.norm(plain), np.linalg.norm(other)
        if plain.name in ("gamma", "embeddings"):
            spared += 1  # Adam's two steps alone: well under 5% of the norm
            assert abs(norm_other / norm_plain - 1) < 0.05, (plain.path, norm_other)
        elif plain.name == "kernel":
            decayed += 1
            assert norm_other < 0.8 * norm_plain, (plain.path, norm_other)
    assert spared >= 4 and decayed >= 10


@pytest.mark.slow
def test_checkpoint_steps_writes_the_state_at_multiples_of_its_steps(tmp_path):
    # The recipe's checkpoint_minutes (10) would write only at the end.
    config = _config(tmp_path, steps=7, average_last=3, checkpoint_steps=3)
    summary = train_from_config(config, verbose=0, evaluate=False)
    written = checkpoint_prefixes(tmp_path / "run" / "checkpoints")
    assert [p.rsplit("/", 1)[1] for p in written] == ["ckpt-3", "ckpt-6", "ckpt-7"]
    assert summary["averaged_checkpoints"] == 3
