"""Runs a tiny Transformer under a tf.distribute strategy; used by the tests.

Logical devices and `TF_CONFIG` must be set before TensorFlow starts, so the
tests run this file in a fresh process:

    python distributed_worker.py mirrored OUT.json
        Splits the CPU into two logical devices and trains the tiny model
        with `model.fit` under `MirroredStrategy` over /cpu:0 and /cpu:1.
        Writes {"losses": [...], "replicas": 2}.

    python distributed_worker.py multi_worker OUT.json [CHECKPOINT.weights.h5]
        One worker of the `TF_CONFIG` cluster: trains with `fit_distributed`
        under `MultiWorkerMirroredStrategy`. Writes {"losses": [...],
        "replicas": n, "chief": bool}.

The tests import this file to compute the single-process references
(`train_fit` and `train_custom` on the default strategy) in their own
process.
"""

import json
import os
import sys

SEED = 1234
VOCAB_SIZE = 24
GLOBAL_BATCH = 8
STEPS = 4


def toy_dataset(global_batch=GLOBAL_BATCH):
    """A fixed dataset of `((source, target_in), target_out)` int32 batches.

    The first half of every global batch holds short sentences, the second
    half long ones, so two replicas hold different numbers of real tokens: a
    loss averaged per replica would differ from the per-token mean over the
    global batch.
    """
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    n, length = global_batch * STEPS, 7
    source = np.zeros((n, length), "int32")
    target = np.zeros((n, length + 1), "int32")
    for i in range(n):
        short = i % global_batch < global_batch // 2
        k = int(rng.integers(1, 3) if short else rng.integers(4, length))
        source[i, :k] = rng.integers(4, VOCAB_SIZE, size=k)
        target[i, 0] = 2  # start
        target[i, 1 : k + 1] = source[i, :k][::-1]  # reverse the source
        target[i, k + 1] = 3  # end
    dataset = tf.data.Dataset.from_tensor_slices(
        ((source, target[:, :-1]), target[:, 1:])
    ).batch(global_batch, drop_remainder=True)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = (
        tf.data.experimental.AutoShardPolicy.DATA
    )
    return dataset.with_options(options)


def tiny_model():
    """A one-layer Transformer without dropout, initialised from `SEED`."""
    import keras

    from keras_transformer.models import Transformer

    keras.utils.set_random_seed(SEED)
    model = Transformer(
        vocab_size=VOCAB_SIZE,
        num_layers=1,
        d_model=16,
        num_heads=2,
        d_ff=32,
        dropout=0.0,
        max_length=16,
    )
    model.build()
    return model


def loss_and_optimizer():
    """Our loss and optimizer, or Keras stand-ins while they are missing."""
    import keras

    try:
        from keras_transformer.losses import MaskedCrossEntropy

        loss = MaskedCrossEntropy(label_smoothing=0.1)
    except ImportError:
        loss = keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, ignore_class=0
        )
    try:
        from keras_transformer.training.optimizers import transformer_optimizer

        optimizer = transformer_optimizer(d_model=16, warmup_steps=10)
    except ImportError:
        optimizer = keras.optimizers.Adam(1e-2, beta_2=0.98, epsilon=1e-9)
    return loss, optimizer


def train_fit(strategy):
    """Per-step losses of `model.fit` under `strategy`, one step per epoch."""
    from keras_transformer.training.distributed import build_for_fit

    with strategy.scope():
        model = tiny_model()
        loss, optimizer = loss_and_optimizer()
        model.compile(optimizer=optimizer, loss=loss)
    # Without this, fit under MirroredStrategy feeds the model float ids.
    build_for_fit(model, toy_dataset())
    history = model.fit(
        toy_dataset().repeat(), epochs=STEPS, steps_per_epoch=1, verbose=0
    )
    return [float(value) for value in history.history["loss"]]


def train_custom(strategy, checkpoint_dir=None):
    """Per-step losses of `fit_distributed` under `strategy`, and the model.

    With `checkpoint_dir`, the chief writes the training state there when
    training ends (`Checkpoints`); the other workers write nothing.
    """
    from keras_transformer.training.checkpoints import Checkpoints
    from keras_transformer.training.distributed import fit_distributed, is_chief

    with strategy.scope():
        model = tiny_model()
        loss, optimizer = loss_and_optimizer()
        model.compile(optimizer=optimizer, loss=loss)
    callbacks = []
    if checkpoint_dir:
        callbacks.append(Checkpoints(checkpoint_dir, 1e9, write=is_chief(strategy)))
    losses = fit_distributed(
        model,
        toy_dataset(),
        loss,
        optimizer,
        steps=STEPS,
        strategy=strategy,
        callbacks=callbacks,
    )
    return losses, model


def main(mode, out_path, checkpoint_dir=None):
    import tensorflow as tf

    from keras_transformer.training.distributed import is_chief, make_strategy

    if mode == "mirrored":
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2
        )
        strategy = make_strategy("mirrored", devices=["/cpu:0", "/cpu:1"])
        result = {
            "losses": train_fit(strategy),
            "replicas": strategy.num_replicas_in_sync,
        }
    elif mode == "multi_worker":
        strategy = make_strategy("multi_worker")
        result = {
            "losses": train_custom(strategy, checkpoint_dir)[0],
            "replicas": strategy.num_replicas_in_sync,
            "chief": is_chief(strategy),
        }
    else:
        raise ValueError(f"Unknown mode. Received: mode={mode!r}")
    with open(out_path, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    main(*sys.argv[1:])
