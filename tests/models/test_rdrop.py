"""Tests for keras_transformer.models.RDropTransformer: R-Drop's objective.

The objective against NumPy on the model's own two passes; the second pass
carries gradients and draws other dropout masks inside a compiled step;
evaluation, inference and saving are the `Transformer`'s.
"""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers import mirrored_strategy

from keras_transformer.losses import MaskedCrossEntropy
from keras_transformer.models import RDropTransformer, Transformer

SIZES = dict(vocab_size=30, num_layers=2, d_model=16, num_heads=2, d_ff=32)
SOURCE = np.array([[5, 6, 7, 8, 3, 0], [9, 10, 3, 0, 0, 0]], "int32")
TARGET = np.array([[2, 11, 12, 13, 3], [2, 14, 3, 0, 0]], "int32")
X, Y = (SOURCE, TARGET[:, :-1]), TARGET[:, 1:]


def log_softmax(logits):
    logits = np.asarray(logits, np.float64)
    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def cross_entropy(y_true, logits):  # label smoothing 0: -log p(y), real tokens
    nll = -np.take_along_axis(log_softmax(logits), y_true[..., None], -1)[..., 0]
    return nll[y_true != 0].mean()


def symmetric_kl(y_true, a, b):
    log_a, log_b = log_softmax(a), log_softmax(b)
    both = ((np.exp(log_a) - np.exp(log_b)) * (log_a - log_b)).sum(-1)
    return both[y_true != 0].mean() / 2


def pair(alpha, dropout, seed=0):
    """An R-Drop model and a `Transformer` with the same weights."""
    keras.utils.set_random_seed(seed)
    rdrop = RDropTransformer(rdrop_alpha=alpha, dropout=dropout, **SIZES)
    plain = Transformer(dropout=dropout, **SIZES)
    rdrop(X), plain(X)
    plain.set_weights(rdrop.get_weights())
    return rdrop, plain


def seed_states(model):
    return [v for v in model.variables if "seed_generator" in v.path]


def test_the_objective_is_the_mean_cross_entropy_plus_half_alpha_consistency():
    model, _ = pair(alpha=3.0, dropout=0.3)
    model.compile(loss=MaskedCrossEntropy(label_smoothing=0.0))
    states = seed_states(model)
    assert states  # dropout draws its masks from these
    saved = [v.numpy() for v in states]
    first, second = (model(X, training=True).numpy() for _ in range(2))
    assert np.abs(first - second).max() > 0.1  # other masks, other logits
    for variable, value in zip(states, saved, strict=True):
        variable.assign(value)  # the same two passes again
    y_pred = model(X, training=True)
    objective = model.compute_loss(x=X, y=Y, y_pred=y_pred, training=True)
    expected = (cross_entropy(Y, first) + cross_entropy(Y, second)) / 2
    expected += 3.0 / 2 * symmetric_kl(Y, first, second)
    assert symmetric_kl(Y, first, second) > 0.01
    np.testing.assert_allclose(float(objective), expected, rtol=1e-5)


def test_evaluation_is_one_pass_and_the_transformer_s_loss():
    model, plain = pair(alpha=3.0, dropout=0.3)
    for m in (model, plain):
        m.compile(loss=MaskedCrossEntropy(label_smoothing=0.1))
    y_pred = model(X, training=False)
    np.testing.assert_allclose(
        float(model.compute_loss(x=X, y=Y, y_pred=y_pred, training=False)),
        float(plain.compute_loss(x=X, y=Y, y_pred=y_pred, training=False)),
    )
    np.testing.assert_allclose(
        model.evaluate(X, Y, verbose=0), plain.evaluate(X, Y, verbose=0), rtol=1e-6
    )


@pytest.mark.parametrize("jit_compile", [False, True])
def test_without_dropout_a_step_is_the_transformer_s_step(jit_compile):
    # Both passes are equal and both carry gradients: the mean of the two
    # cross-entropies has the gradient of one. Were the second pass held
    # constant, plain SGD would take half the step.
    model, plain = pair(alpha=3.0, dropout=0.0)
    for m in (model, plain):
        m.compile(
            optimizer=keras.optimizers.SGD(0.5),
            loss=MaskedCrossEntropy(),
            jit_compile=jit_compile,
        )
    before = [w.numpy() for w in plain.trainable_weights]
    losses = [m.train_on_batch(X, Y) for m in (model, plain)]
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-6)
    moved = 0
    for a, b, start in zip(
        model.trainable_weights, plain.trainable_weights, before, strict=True
    ):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-6, err_msg=a.path)
        moved += np.abs(a.numpy() - start).max() > 1e-4
    assert moved > len(before) // 2


def test_a_compiled_step_draws_other_masks_for_the_second_pass():
    # The logged loss is the objective: the same weights and masks give a
    # larger one with a larger alpha only if the two passes differ.
    losses = {}
    for alpha in (0.0, 50.0):
        model, _ = pair(alpha=alpha, dropout=0.3)
        model.compile(optimizer=keras.optimizers.SGD(0.0), loss=MaskedCrossEntropy())
        losses[alpha] = model.train_on_batch(X, Y)
    assert losses[50.0] > losses[0.0] + 0.2, losses


def test_training_pulls_the_two_passes_together():
    consistency = {}
    for alpha in (0.0, 5.0):
        model, _ = pair(alpha=alpha, dropout=0.3)
        model.compile(optimizer=keras.optimizers.Adam(3e-3), loss=MaskedCrossEntropy())
        model.fit(X, Y, epochs=60, batch_size=2, verbose=0)
        keras.utils.set_random_seed(1)
        passes = [model(X, training=True).numpy() for _ in range(8)]
        consistency[alpha] = np.mean(
            [
                symmetric_kl(Y, a, b)
                for a, b in zip(passes[::2], passes[1::2], strict=True)
            ]
        )
    assert consistency[5.0] < 0.7 * consistency[0.0], consistency


def test_save_and_load_keep_the_class_the_weights_and_alpha(tmp_path):
    model, _ = pair(alpha=2.5, dropout=0.3)
    config = model.get_config()
    assert config["rdrop_alpha"] == 2.5
    assert {k: config[k] for k in SIZES} == SIZES
    json.dumps(config)
    clone = RDropTransformer.from_config(config)
    assert clone.get_config() == config
    model.save(tmp_path / "model.keras")
    loaded = keras.models.load_model(tmp_path / "model.keras")  # no custom_objects
    assert type(loaded) is RDropTransformer and loaded.rdrop_alpha == 2.5
    np.testing.assert_array_equal(loaded(X).numpy(), model(X).numpy())


@pytest.mark.parametrize("alpha", [-1.0, float("nan")])
def test_invalid_alpha_is_named(alpha):
    with pytest.raises(ValueError, match=r"rdrop_alpha must be >= 0\. Received"):
        RDropTransformer(rdrop_alpha=alpha, **SIZES)


def test_mirrored_strategy_trains_as_one_replica():
    # Without dropout, two replicas take the step one replica takes on the
    # whole batch: the objective is normalized over the global batch (the
    # two sentences hold 4 and 2 real tokens).
    devices = tf.config.list_logical_devices("CPU")
    if len(devices) < 2:
        pytest.skip("TensorFlow was initialised before two CPUs could be set up")
    strategy = mirrored_strategy(devices[:2])
    with strategy.scope():
        model, plain = pair(alpha=3.0, dropout=0.0)
        model.compile(optimizer=keras.optimizers.SGD(0.5), loss=MaskedCrossEntropy())
    plain.compile(optimizer=keras.optimizers.SGD(0.5), loss=MaskedCrossEntropy())
    data = tf.data.Dataset.from_tensors((X, Y))
    model.fit(data, verbose=0)
    plain.fit(data, verbose=0)
    for a, b in zip(model.trainable_weights, plain.trainable_weights, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-6, err_msg=a.path)
