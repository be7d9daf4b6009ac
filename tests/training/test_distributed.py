"""Tests for keras_transformer.training.distributed.

The two-device and two-worker runs need TensorFlow configured before it
starts (logical devices, `TF_CONFIG`), so they run `distributed_worker.py`
in fresh processes; their single-process references run here.

Tolerance: the replicas sum their halves of the batch and all-reduce the
sums, the single process sums the whole batch at once. In float32 that
reorders additions, which moved the losses by at most 1.1e-7 relative over
four steps here. `RTOL = 1e-5` leaves room for other CPUs and is still far
below the effect of a wrong loss scaling (averaging the replicas' own means
instead of the global per-token mean moves the first loss by 3e-2, checked
in `test_toy_batches_tell_global_from_per_replica_means`).
"""

import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.training.checkpoints import checkpoint_prefixes, restore_latest
from keras_transformer.training.distributed import (
    fit_distributed,
    is_chief,
    make_strategy,
)

RTOL = 1e-5
TIMEOUT = 180  # seconds per subprocess; a hung collective fails the test
WORKER = Path(__file__).with_name("distributed_worker.py")


def _load_worker():
    spec = importlib.util.spec_from_file_location("distributed_worker", WORKER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


worker = _load_worker()


@pytest.fixture(scope="module")
def custom_run(tmp_path_factory):
    """`fit_distributed` on one device: (losses, model, checkpoint folder)."""
    folder = str(tmp_path_factory.mktemp("custom") / "checkpoints")
    losses, model = worker.train_custom(tf.distribute.get_strategy(), folder)
    return losses, model, folder


@pytest.fixture(scope="module")
def custom_losses(custom_run):
    """Per-step losses of `fit_distributed` on one device, global batch."""
    return custom_run[0]


@pytest.fixture(scope="module")
def fit_losses():
    """Per-step losses of `model.fit` on one device, global batch."""
    return worker.train_fit(tf.distribute.get_strategy())


def _env(tf_config=None):
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    if tf_config is not None:
        env["TF_CONFIG"] = json.dumps(tf_config)
    return env


def _free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _kill(processes):
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_make_strategy_by_name():
    assert make_strategy().num_replicas_in_sync == 1
    assert make_strategy("default") is tf.distribute.get_strategy()
    mirrored = make_strategy("mirrored", devices=["/cpu:0"])
    assert isinstance(mirrored, tf.distribute.MirroredStrategy)
    assert mirrored.num_replicas_in_sync == 1


def test_make_strategy_errors_name_the_value():
    with pytest.raises(ValueError, match="name='tpu'"):
        make_strategy("tpu")
    with pytest.raises(ValueError, match="devices"):
        make_strategy("default", devices=["/cpu:0"])


@pytest.mark.parametrize(
    "cluster, task_type, task_id, expected",
    [
        ({"worker": ["a:1", "b:1"]}, "worker", 0, True),
        ({"worker": ["a:1", "b:1"]}, "worker", 1, False),
        ({"chief": ["c:1"], "worker": ["a:1"]}, "chief", 0, True),
        ({"chief": ["c:1"], "worker": ["a:1"]}, "worker", 0, False),
    ],
)
def test_is_chief(cluster, task_type, task_id, expected):
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(cluster), task_type=task_type, task_id=task_id
    )

    class Strategy:
        cluster_resolver = resolver

    assert is_chief(Strategy()) is expected


def test_without_a_cluster_every_process_is_chief():
    assert is_chief(tf.distribute.get_strategy()) is True


def test_toy_batches_tell_global_from_per_replica_means():
    # The comparisons below could not catch a wrong loss scaling if the two
    # replicas held as many real tokens as each other.
    model = worker.tiny_model()
    loss, _ = worker.loss_and_optimizer()
    (inputs, target_out) = next(iter(worker.toy_dataset()))
    logits = model(inputs)
    half = worker.GLOBAL_BATCH // 2
    global_mean = float(loss(target_out, logits))
    replica_means = [
        float(loss(target_out[i : i + half], logits[i : i + half])) for i in (0, half)
    ]
    assert abs(np.mean(replica_means) - global_mean) > 100 * RTOL * global_mean


@pytest.mark.slow
def test_fit_distributed_matches_model_fit(custom_losses, fit_losses):
    assert len(custom_losses) == worker.STEPS
    assert np.all(np.isfinite(custom_losses))
    assert custom_losses[-1] < custom_losses[0]
    np.testing.assert_allclose(custom_losses, fit_losses, rtol=RTOL)


@pytest.mark.slow
def test_fit_distributed_writes_the_training_state_through_callbacks(custom_run):
    _, model, folder = custom_run
    restored = worker.tiny_model()
    inputs, _ = next(iter(worker.toy_dataset()))
    assert not np.allclose(model(inputs), restored(inputs))
    restored.compile(optimizer=worker.loss_and_optimizer()[1], loss="mse")
    restored.optimizer.build(restored.trainable_variables)
    restore_latest(folder, restored)
    np.testing.assert_array_equal(model(inputs), restored(inputs))
    assert int(restored.optimizer.iterations.numpy()) == worker.STEPS


def test_fit_distributed_argument_errors():
    model = worker.tiny_model()
    loss, optimizer = worker.loss_and_optimizer()
    dataset = worker.toy_dataset()
    with pytest.raises(ValueError, match="steps=0"):
        fit_distributed(model, dataset, loss, optimizer, steps=0)
    strategy = make_strategy("mirrored", devices=["/cpu:0"])
    with pytest.raises(ValueError, match="inside `strategy.scope\\(\\)`"):
        fit_distributed(model, dataset, loss, optimizer, steps=1, strategy=strategy)
    # And the other way round: created under the strategy, run without it.
    with strategy.scope():
        _, mirrored_optimizer = worker.loss_and_optimizer()
    with pytest.raises(ValueError, match="inside `strategy.scope\\(\\)`"):
        fit_distributed(model, dataset, loss, mirrored_optimizer, steps=1)


@pytest.mark.slow
def test_mirrored_fit_on_two_cpus_matches_one_device(tmp_path, fit_losses):
    out = tmp_path / "mirrored.json"
    subprocess.run(
        [sys.executable, str(WORKER), "mirrored", str(out)],
        env=_env(),
        timeout=TIMEOUT,
        check=True,
        capture_output=True,
    )
    result = json.loads(out.read_text())
    assert result["replicas"] == 2
    np.testing.assert_allclose(result["losses"], fit_losses, rtol=RTOL)


@pytest.mark.slow
def test_multi_worker_custom_loop_matches_one_process(tmp_path, custom_losses):
    ports = _free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    processes = []
    try:
        for index in range(2):
            tf_config = {"cluster": cluster, "task": {"type": "worker", "index": index}}
            command = [
                sys.executable,
                str(WORKER),
                "multi_worker",
                str(tmp_path / f"worker{index}.json"),
                str(tmp_path / f"worker{index}"),
            ]
            processes.append(
                subprocess.Popen(
                    command,
                    env=_env(tf_config),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                )
            )
        for index, process in enumerate(processes):
            _, stderr = process.communicate(timeout=TIMEOUT)
            assert process.returncode == 0, (
                f"worker {index} failed:\n{stderr.decode()[-3000:]}"
            )
    finally:
        _kill(processes)
    results = [json.loads((tmp_path / f"worker{i}.json").read_text()) for i in range(2)]
    assert [r["replicas"] for r in results] == [2, 2]
    assert [r["chief"] for r in results] == [True, False]
    # Only the chief writes its checkpoint.
    chief = [os.path.basename(p) for p in checkpoint_prefixes(tmp_path / "worker0")]
    assert chief == [f"ckpt-{worker.STEPS}"]
    assert not (tmp_path / "worker1").exists()
    losses = [r["losses"] for r in results]
    assert np.all(np.isfinite(losses))
    assert losses[0] == losses[1]  # both hold the same all-reduced value
    np.testing.assert_allclose(losses[0], custom_losses, rtol=RTOL)


def test_fit_on_two_replicas_works_with_and_without_build_for_fit():
    # Without `build_for_fit`, Keras 3.15 builds the compiled loss on the
    # replicas' first batches averaged into floats; the Transformer casts
    # float ids as Keras's Embedding does, so both ways train.
    from keras_transformer.losses import MaskedCrossEntropy
    from keras_transformer.models import Transformer
    from keras_transformer.training import build_for_fit

    devices = [d.name for d in tf.config.list_logical_devices("CPU")[:2]]
    assert len(devices) == 2  # tests/conftest.py splits the CPU in two
    ids = np.array([[5, 6, 7, 3], [8, 9, 3, 0]], "int32")
    data = tf.data.Dataset.from_tensors(((ids, ids), ids)).repeat(2)

    def compiled():
        with tf.distribute.MirroredStrategy(devices).scope():
            model = Transformer(
                vocab_size=10, num_layers=1, d_model=8, num_heads=2, d_ff=16
            )
            model.compile(optimizer="adam", loss=MaskedCrossEntropy())
        return model

    for build_first in (False, True):
        model = compiled()
        if build_first:
            build_for_fit(model, data)
        model.fit(data, epochs=1, verbose=0)
        assert int(model.optimizer.iterations.numpy()) == 2


def test_fit_and_evaluate_on_two_replicas_with_batches_of_odd_sizes():
    # Keras averages the replicas' parts of the first batch of every `fit`
    # and `evaluate`, which fails when a batch of 5 splits into 3 and 2 rows
    # (as a run resumed mid-epoch met). `replicas=2` pads batches to even
    # sizes with empty rows, which change neither the loss nor the weights.
    from keras_transformer.data import ParallelCorpus, Tokenizer, make_batches
    from keras_transformer.losses import MaskedCrossEntropy
    from keras_transformer.models import Transformer

    corpus = ParallelCorpus(
        ["one cat", "two cats", "three dogs", "a dog", "four birds"] * 3,
        ["eine Katze", "zwei Katzen", "drei Hunde", "ein Hund", "vier Vögel"] * 3,
    )
    tokenizer = Tokenizer.train(corpus, vocab_size=300)
    batching = dict(max_length=12, boundaries=[12], token_budget=60, shuffle=False)
    odd = make_batches(corpus, tokenizer, **batching)
    even = make_batches(corpus, tokenizer, replicas=2, **batching)
    assert [len(y) for _, y in odd] == [5, 5, 5]  # 3 and 2 rows per replica
    assert [len(y) for _, y in even] == [4, 4, 4, 4]
    devices = [d.name for d in tf.config.list_logical_devices("CPU")[:2]]

    def trained(strategy, batches):
        import keras

        keras.utils.set_random_seed(0)
        with strategy.scope():
            model = Transformer(
                vocab_size=tokenizer.vocab_size,
                num_layers=1,
                d_model=8,
                num_heads=2,
                d_ff=16,
                dropout=0.0,
            )
            model.compile(optimizer="sgd", loss=MaskedCrossEntropy())
        model.fit(batches, epochs=1, verbose=0)
        return model, model.evaluate(batches, verbose=0)

    # (`trained(mirrored, odd)` raises "Inputs to operation AddN ... must
    # have the same size and shape", and leaves the process's collectives
    # aborted, so it is not run here; tests/training/test_fault_tolerance.py
    # resumes a mirrored run inside an epoch, which met it.)
    # Reduced on one device, not by collectives: a second strategy's
    # collectives in one process can collide with an earlier one's
    # ("Shape mismatch in the collective instance 101").
    mirrored = tf.distribute.MirroredStrategy(
        devices, cross_device_ops=tf.distribute.ReductionToOneDevice()
    )
    model, loss = trained(mirrored, even)
    reference, reference_loss = trained(tf.distribute.get_strategy(), even)
    np.testing.assert_allclose(loss, reference_loss, rtol=RTOL)
    for got, want in zip(model.get_weights(), reference.get_weights(), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    # The empty rows change neither the real rows' logits nor the loss.
    (source_ids, target_in), target_out = list(even)[-1]
    real = np.any(source_ids.numpy(), axis=1)
    assert real.tolist() == [True, True, True, False]
    loss_fn = MaskedCrossEntropy()
    padded = reference((source_ids, target_in))
    stripped = reference((source_ids[:3], target_in[:3]))
    assert np.all(np.isfinite(padded))
    np.testing.assert_allclose(padded[:3], stripped, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        loss_fn(target_out, padded), loss_fn(target_out[:3], stripped), rtol=1e-6
    )
