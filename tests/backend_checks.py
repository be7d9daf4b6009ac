"""The layers' and model's properties on a Keras backend other than TensorFlow.

Run by `tests/test_backends.py` in a fresh process, with `KERAS_BACKEND` set
and TensorFlow made unimportable, as in an environment where it is not
installed:

    KERAS_BACKEND=jax python tests/backend_checks.py DIR

`DIR` holds `model.weights.h5` and `expected.npz`, written by the TensorFlow
backend: the weights must give the same logits here. Prints one line per
check and exits non-zero at the first failure.
"""

import importlib.abc
import importlib.machinery
import sys


class _NoTensorFlow(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Makes `import tensorflow` (and tensorflow_text, ...) fail.

    `find_spec` answers with a spec that has no origin (PyTorch's import
    asks `importlib.util.find_spec("tensorflow")` and skips modules without
    one); loading it raises `ModuleNotFoundError`, as for a module that is
    not installed.
    """

    def find_spec(self, name, path, target=None):
        if name.split(".")[0].startswith("tensorflow"):
            return importlib.machinery.ModuleSpec(name, self)
        return None

    def create_module(self, spec):
        raise ModuleNotFoundError(
            f"{spec.name} is blocked: these checks run without it", name=spec.name
        )

    def exec_module(self, module):  # Never reached: create_module raises.
        raise ModuleNotFoundError(module.__name__)


if __name__ == "__main__":  # Not when the TensorFlow side imports the shapes.
    sys.meta_path.insert(0, _NoTensorFlow())

import pathlib  # noqa: E402

import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

import keras_transformer  # noqa: E402, F401  (registers the classes)
from keras_transformer.layers import MultiHeadAttention  # noqa: E402
from keras_transformer.losses import MaskedCrossEntropy  # noqa: E402
from keras_transformer.metrics import MaskedAccuracy, Perplexity  # noqa: E402
from keras_transformer.models import RDropTransformer, Transformer  # noqa: E402
from keras_transformer.schedules import TransformerSchedule  # noqa: E402

SOURCE = np.array([[5, 6, 7, 8, 3, 0], [9, 10, 3, 0, 0, 0]], "int32")
TARGET = np.array([[2, 11, 12, 13, 3], [2, 14, 3, 0, 0]], "int32")
# A second target length, so each length-dependent check runs at two.
LONGER_TARGET = np.array(
    [[2, 11, 12, 13, 15, 16, 17, 3], [2, 14, 18, 3, 0, 0, 0, 0]], "int32"
)
VOCAB = 40


def tiny_transformer(**overrides):
    """The model the TensorFlow side saved weights of (same shapes)."""
    kwargs = dict(num_layers=2, d_model=16, num_heads=2, d_ff=32, max_length=16)
    return Transformer(VOCAB, **{**kwargs, **overrides})


def logits_of(model, source, target):
    return ops.convert_to_numpy(model((source, target)))


def check_weights_from_tensorflow(directory):
    model = tiny_transformer()
    model((SOURCE, TARGET))
    model.load_weights(directory / "model.weights.h5")
    expected = np.load(directory / "expected.npz")["logits"]
    difference = np.abs(logits_of(model, SOURCE, TARGET) - expected).max()
    assert difference <= 1e-4, f"logits differ from TensorFlow's by {difference}"
    return model


def check_padding_invariance(model):
    # Extra padding after the source changes no logit.
    padded = np.pad(SOURCE, ((0, 0), (0, 4)))
    np.testing.assert_allclose(
        logits_of(model, padded, TARGET), logits_of(model, SOURCE, TARGET), atol=1e-5
    )


def check_causality(model):
    # Changing later target tokens changes no earlier position's logits.
    changed = TARGET.copy()
    changed[:, 2:] = 21
    before, after = logits_of(model, SOURCE, TARGET), logits_of(model, SOURCE, changed)
    np.testing.assert_allclose(after[:, :2], before[:, :2], atol=1e-5)
    assert np.abs(after[:, 2:] - before[:, 2:]).max() > 1e-3


def check_cache_equals_full(model, target):
    memory, source_mask = model.encode(SOURCE)
    full = ops.convert_to_numpy(model.decode(target, memory, source_mask))
    cache = model.init_cache(memory, target.shape[1])
    steps = []
    for i in range(target.shape[1]):
        logits, cache = model.decode(
            target[:, i : i + 1], memory, source_mask, cache=cache, cache_index=i
        )
        steps.append(ops.convert_to_numpy(logits))
    real = target != 0  # Padded target positions are never decoded.
    np.testing.assert_allclose(
        np.concatenate(steps, axis=1)[real], full[real], atol=1e-5
    )


def check_lengths(model):
    """Cached decoding equals the full pass at both target lengths, and a
    target cut short gives the first positions' logits of the whole one."""
    short = LONGER_TARGET[:, :5]
    real = short != 0  # Outputs at padded positions mean nothing.
    np.testing.assert_allclose(
        logits_of(model, SOURCE, short)[real],
        logits_of(model, SOURCE, LONGER_TARGET)[:, :5][real],
        atol=1e-5,
    )
    for target in (TARGET, LONGER_TARGET):
        check_cache_equals_full(model, target)


def check_sliding_window():
    # The layer: attention with the band |i - j| < 2 given as a mask, at two
    # lengths; a key outside the band changes nothing.
    window = MultiHeadAttention(num_heads=2, key_dim=4, sliding_window=2)
    plain = MultiHeadAttention(num_heads=2, key_dim=4)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 4, 8)).astype("float32")
    window(x, x)
    plain(x, x)
    plain.set_weights(window.get_weights())
    for length in (4, 7):
        x = rng.normal(size=(2, length, 8)).astype("float32")
        positions = np.arange(length)
        band = np.abs(positions[:, None] - positions[None, :]) < 2  # (T, S)
        restricted = ops.convert_to_numpy(window(x, x))
        masked = ops.convert_to_numpy(plain(x, x, attention_mask=band))
        np.testing.assert_allclose(restricted, masked, atol=1e-5)
        far = x.copy()
        far[:, -1] += 1.0  # The last key is outside the first query's band.
        np.testing.assert_allclose(
            ops.convert_to_numpy(window(x, far))[:, 0], restricted[:, 0], atol=1e-5
        )
    # The model: cached decoding reads the band from the cache's positions.
    check_lengths(tiny_transformer(sliding_window=2))


def check_attention_masks_as_in_keras():
    # Every mask rank means what it means to Keras's own layer.
    ours = MultiHeadAttention(num_heads=3, key_dim=4)
    theirs = keras.layers.MultiHeadAttention(num_heads=3, key_dim=4)
    rng = np.random.default_rng(0)
    query, value = rng.normal(size=(2, 3, 8)), rng.normal(size=(2, 5, 8))
    query, value = query.astype("float32"), value.astype("float32")
    ours(query, value)
    theirs(query, value)
    theirs.set_weights(ours.get_weights())
    for shape in ((3, 5), (2, 3, 5), (2, 3, 3, 5)):
        mask = rng.random(shape) < 0.5
        mask[..., 0] = True
        for layer_output in zip(
            ours(query, value, attention_mask=mask, return_attention_scores=True),
            theirs(query, value, attention_mask=mask, return_attention_scores=True),
            strict=True,
        ):
            a, b = (ops.convert_to_numpy(t) for t in layer_output)
            np.testing.assert_allclose(a, b, atol=1e-5)


def check_fit_and_save(directory):
    # Seeded: from some random starts the first epoch's accuracy is already
    # the last's on these six pairs while the loss still falls.
    keras.utils.set_random_seed(0)
    model = tiny_transformer(dropout=0.0)
    model.compile(
        optimizer=keras.optimizers.Adam(TransformerSchedule(16, warmup_steps=4)),
        loss=MaskedCrossEntropy(label_smoothing=0.1),
        metrics=[MaskedAccuracy(), Perplexity()],
    )
    x, y = (SOURCE, TARGET[:, :-1]), TARGET[:, 1:]
    history = model.fit(x, y, epochs=30, batch_size=2, verbose=0).history
    assert history["loss"][-1] < history["loss"][0] - 0.5, history["loss"]
    assert history["masked_accuracy"][-1] > history["masked_accuracy"][0]
    path = directory / "model.keras"
    model.save(path)
    loaded = keras.models.load_model(path)  # No custom_objects.
    assert isinstance(loaded, Transformer)
    np.testing.assert_allclose(logits_of(loaded, *x), logits_of(model, *x), atol=1e-6)
    evaluated = loaded.evaluate(x, y, verbose=0, return_dict=True)
    original = model.evaluate(x, y, verbose=0, return_dict=True)
    for name, value in original.items():
        np.testing.assert_allclose(evaluated[name], value, rtol=1e-5)


def check_rdrop():
    # Without dropout both passes are equal and both carry gradients: an
    # R-Drop step is the Transformer's (held constant, the second pass
    # would halve plain SGD's step).
    x, y = (SOURCE, TARGET[:, :-1]), TARGET[:, 1:]
    kwargs = dict(num_layers=2, d_model=16, num_heads=2, d_ff=32, max_length=16)
    steps = {}
    for name, alpha, dropout in (
        ("plain", None, 0.0),
        ("equal", 3.0, 0.0),
        ("off", 0.0, 0.3),
        ("on", 50.0, 0.3),
    ):
        keras.utils.set_random_seed(0)  # the same weights and masks in each
        if alpha is None:
            model = Transformer(VOCAB, dropout=dropout, **kwargs)
        else:
            model = RDropTransformer(
                VOCAB, rdrop_alpha=alpha, dropout=dropout, **kwargs
            )
        logits_of(model, *x)
        start = [ops.convert_to_numpy(w) for w in model.trainable_weights]
        model.compile(optimizer=keras.optimizers.SGD(0.5), loss=MaskedCrossEntropy())
        steps[name] = model, start, float(model.train_on_batch(x, y))
    (plain, plain_start, plain_loss), (equal, equal_start, equal_loss) = (
        steps["plain"],
        steps["equal"],
    )
    assert abs(plain_loss - equal_loss) < 1e-5, (plain_loss, equal_loss)
    for a, b, a0, b0 in zip(
        plain.trainable_weights,
        equal.trainable_weights,
        plain_start,
        equal_start,
        strict=True,
    ):
        np.testing.assert_array_equal(a0, b0)
        np.testing.assert_allclose(a, b, atol=1e-5, err_msg=a.path)
    # With dropout the second pass draws other masks: the same weights and
    # first pass give a larger objective with a larger alpha.
    off, on = steps["off"][2], steps["on"][2]
    assert on > off + 0.2, (on, off)


def main(directory):
    backend = keras.backend.backend()
    assert backend != "tensorflow", "set KERAS_BACKEND to jax or torch"
    model = check_weights_from_tensorflow(directory)
    print(f"{backend}: TensorFlow's weights give TensorFlow's logits")
    check_padding_invariance(model)
    print(f"{backend}: padding invariance")
    check_causality(model)
    print(f"{backend}: no future leakage")
    check_lengths(model)
    print(f"{backend}: cached decoding equals the full pass, target lengths 5 and 8")
    check_sliding_window()
    print(f"{backend}: restricted self-attention (sliding_window), lengths 4 and 7")
    check_lengths(tiny_transformer(learned_positions=True))
    print(f"{backend}: learned positions, cached and full, target lengths 5 and 8")
    check_attention_masks_as_in_keras()
    print(f"{backend}: attention masks of every rank as in Keras")
    check_fit_and_save(directory)
    print(f"{backend}: fit, metrics, schedule, .keras save and load")
    check_rdrop()
    print(f"{backend}: R-Drop's second pass carries gradients and other masks")
    leaked = sorted(m for m in sys.modules if m.startswith("tensorflow"))
    assert not leaked, leaked


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))
