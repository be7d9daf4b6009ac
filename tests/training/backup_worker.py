"""Trains a tiny Transformer with `BackupAndRestore`; run by the fault tests.

    python backup_worker.py BACKUP_DIR LOG_PATH [HANG_AFTER_STEP]

`EPOCHS` epochs of `STEPS_PER_EPOCH` steps over the same fixed batches, with
a backup at the end of every epoch. Appends one JSON object per line to
LOG_PATH: {"event": "begin", "step": s} when training begins (after any
restore; `s` is `optimizer.iterations`), {"event": "step", "step": s} after
every step, and {"event": "end", "step": s, "loss": last epoch's loss,
"weights": sum of the squared weights}. With HANG_AFTER_STEP the process
stops after that step and sleeps, waiting to be killed.
"""

import json
import os
import sys
import time

SEED = 4321
EPOCHS = 4
STEPS_PER_EPOCH = 3
BATCH_SIZE = 4


def main(backup_dir, log_path, hang_after_step=None):
    import keras
    import numpy as np

    from keras_transformer.losses import MaskedCrossEntropy
    from keras_transformer.models import Transformer
    from keras_transformer.training.optimizers import transformer_optimizer

    hang_after_step = None if hang_after_step is None else int(hang_after_step)

    class StepLog(keras.callbacks.Callback):
        def _write(self, event, **fields):
            step = int(self.model.optimizer.iterations.numpy())
            with open(log_path, "a") as f:
                f.write(json.dumps({"event": event, "step": step, **fields}) + "\n")
            return step

        def on_train_begin(self, logs=None):
            self._write("begin")

        def on_train_batch_end(self, batch, logs=None):
            if self._write("step") == hang_after_step:
                time.sleep(600)  # the test kills us here

        def on_train_end(self, logs=None):
            weights = sum(float(np.sum(np.square(w))) for w in self.model.get_weights())
            self._write("end", loss=self._last_loss, weights=weights)

        def on_epoch_end(self, epoch, logs=None):
            self._last_loss = float(logs["loss"])

    keras.utils.set_random_seed(SEED)
    rng = np.random.default_rng(0)
    n = STEPS_PER_EPOCH * BATCH_SIZE
    source = rng.integers(4, 20, size=(n, 6)).astype("int32")
    target = np.concatenate([np.full((n, 1), 2), source[:, ::-1]], 1).astype("int32")
    model = Transformer(
        vocab_size=20, num_layers=1, d_model=16, num_heads=2, d_ff=32, dropout=0.0
    )
    model.compile(
        optimizer=transformer_optimizer(16, warmup_steps=10),
        loss=MaskedCrossEntropy(label_smoothing=0.1),
    )
    # BackupAndRestore restores into a built model and optimizer.
    model.build()
    model.optimizer.build(model.trainable_variables)
    model.fit(
        (source, target[:, :-1]),
        target[:, 1:],
        batch_size=BATCH_SIZE,
        epochs=EPOCHS,
        shuffle=False,
        verbose=0,
        callbacks=[
            keras.callbacks.BackupAndRestore(backup_dir, save_freq="epoch"),
            StepLog(),
        ],
    )


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    main(*sys.argv[1:])
