"""benchmarks/ema.py: the averages it keeps during `fit`, and the model
folders it writes of them."""

import keras
import numpy as np
from helpers import benchmark_script


class _Weights(keras.callbacks.Callback):
    """The kernel and bias after each training batch."""

    def on_train_begin(self, logs=None):
        self.seen = [[w.numpy() for w in self.model.trainable_variables]]

    def on_train_batch_end(self, batch, logs=None):
        self.seen.append([w.numpy() for w in self.model.trainable_variables])


def test_averages_follow_the_recurrence_and_become_model_folders(tmp_path):
    ema = benchmark_script("ema").ema_callback([0.5, 0.9])
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(8, 2)), rng.normal(size=(8, 1))
    weights = _Weights()
    model.fit(
        x, y, batch_size=2, epochs=2, shuffle=False, verbose=0, callbacks=[weights, ema]
    )
    assert len(weights.seen) == 9  # the start, then 8 batches
    for m in (0.5, 0.9):
        expected = weights.seen[0]
        for seen in weights.seen[1:]:
            expected = [
                m * a + (1 - m) * w for a, w in zip(expected, seen, strict=True)
            ]
        got = [a.numpy() for a in ema.averages[m]]
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert not np.allclose(ema.averages[0.9][0].numpy(), weights.seen[-1][0])

    run = tmp_path / "run"
    (run / "tokenizer").mkdir(parents=True)
    (run / "tokenizer" / "vocab.txt").write_text("a\n", encoding="utf-8")
    folders = ema.write(run)
    assert sorted(folders) == [0.5, 0.9]
    for m, folder in folders.items():
        assert folder == run / "ema" / f"m_{m}"
        assert (folder / "tokenizer" / "vocab.txt").read_text() == "a\n"
        saved = keras.models.load_model(folder / "model.keras", compile=False)
        for a, b in zip(saved.trainable_variables, ema.averages[m], strict=True):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    # The model keeps its own (last) weights.
    for w, last in zip(model.trainable_variables, weights.seen[-1], strict=True):
        np.testing.assert_array_equal(w.numpy(), last)
