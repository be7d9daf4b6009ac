"""Tests for keras_transformer.losses: MaskedCrossEntropy, dropout_consistency."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers import mirrored_strategy

from keras_transformer.losses import MaskedCrossEntropy, dropout_consistency
from keras_transformer.metrics import MaskedAccuracy, Perplexity


def smoothed_targets(y_true, vocab_size, eps):
    # q: 1 - eps on the true id, eps / (V - 1) on each of the other V - 1 ids.
    q = np.full(y_true.shape + (vocab_size,), eps / (vocab_size - 1))
    np.put_along_axis(q, y_true[..., None], 1.0 - eps, axis=-1)
    return q


def log_softmax(logits):
    logits = np.asarray(logits, np.float64)
    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def reference_token_losses(y_true, logits, eps, pad_id=0):
    q = smoothed_targets(y_true, logits.shape[-1], eps)
    losses = -(q * log_softmax(logits)).sum(-1)
    return np.where(y_true == pad_id, 0.0, losses)


def reference_loss(y_true, logits, eps, pad_id=0):
    return reference_token_losses(y_true, logits, eps, pad_id).sum() / np.sum(
        y_true != pad_id
    )


def make_batch(rng, batch=3, length=5, vocab=7):
    y_true = rng.integers(1, vocab, size=(batch, length))
    y_true[0, 3:] = 0
    y_true[2, 1:] = 0
    logits = rng.normal(scale=3.0, size=(batch, length, vocab)).astype("float32")
    return y_true.astype("int32"), logits


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_matches_numpy_reference(eps):
    y_true, logits = make_batch(np.random.default_rng(0))
    value = MaskedCrossEntropy(label_smoothing=eps)(y_true, logits)
    assert keras.backend.standardize_dtype(value.dtype) == "float32"
    np.testing.assert_allclose(
        float(value), reference_loss(y_true, logits, eps), rtol=1e-5
    )


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_gradient_is_softmax_minus_smoothed_target_over_real_tokens(eps):
    y_true, logits = make_batch(np.random.default_rng(7))
    logits_var = tf.Variable(logits)
    with tf.GradientTape() as tape:
        value = MaskedCrossEntropy(label_smoothing=eps)(y_true, logits_var)
    grad = tape.gradient(value, logits_var).numpy()
    vocab = logits.shape[-1]
    target = np.full(logits.shape, eps / (vocab - 1))
    np.put_along_axis(target, y_true[..., None], 1.0 - eps, axis=-1)
    softmax = np.exp(logits - logits.max(-1, keepdims=True))
    softmax /= softmax.sum(-1, keepdims=True)
    real = (y_true != 0)[..., None]
    expected = np.where(real, softmax - target, 0.0) / real.sum()
    np.testing.assert_allclose(grad, expected, atol=1e-6)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_loss_and_gradient_compile(jit_compile):
    # The smoothed loss has a custom gradient; it must also run under XLA.
    y_true, logits = make_batch(np.random.default_rng(8))
    loss = MaskedCrossEntropy(label_smoothing=0.1)

    @tf.function(jit_compile=jit_compile)
    def value_and_gradient(logits):
        with tf.GradientTape() as tape:
            tape.watch(logits)
            value = loss(y_true, logits)
        return value, tape.gradient(value, logits)

    value, grad = value_and_gradient(tf.constant(logits))
    logits_var = tf.Variable(logits)
    with tf.GradientTape() as tape:
        eager = loss(y_true, logits_var)
    np.testing.assert_allclose(float(value), float(eager), rtol=1e-6)
    np.testing.assert_allclose(grad, tape.gradient(eager, logits_var), atol=1e-7)
    np.testing.assert_allclose(
        float(value), reference_loss(y_true, logits, 0.1), rtol=1e-5
    )


def test_reductions_none_and_sum():
    y_true, logits = make_batch(np.random.default_rng(1))
    expected = reference_token_losses(y_true, logits, 0.1)
    token_losses = MaskedCrossEntropy(reduction=None)(y_true, logits)
    np.testing.assert_allclose(token_losses, expected, rtol=1e-5, atol=1e-6)
    assert np.all(keras.ops.convert_to_numpy(token_losses)[y_true == 0] == 0.0)
    total = MaskedCrossEntropy(reduction="sum")(y_true, logits)
    np.testing.assert_allclose(float(total), expected.sum(), rtol=1e-5)


def test_padding_invariance():
    rng = np.random.default_rng(2)
    y_true, logits = make_batch(rng)
    loss = MaskedCrossEntropy()
    base = float(loss(y_true, logits))
    # Three more padded positions per sentence, with arbitrary logits.
    longer_true = np.pad(y_true, ((0, 0), (0, 3)))
    extra = rng.normal(scale=100.0, size=(3, 3, 7)).astype("float32")
    extra[:, -1, :2] = [np.inf, np.nan]
    longer_logits = np.concatenate([logits, extra], axis=1)
    np.testing.assert_allclose(float(loss(longer_true, longer_logits)), base, rtol=1e-6)
    # An extra sentence made only of padding.
    more_true = np.concatenate([y_true, np.zeros((1, 5), "int32")])
    more_logits = np.concatenate([logits, rng.normal(size=(1, 5, 7)) * 50.0])
    np.testing.assert_allclose(float(loss(more_true, more_logits)), base, rtol=1e-6)


def test_no_smoothing_equals_sparse_cross_entropy_over_real_tokens():
    y_true, logits = make_batch(np.random.default_rng(3))
    keras_ce = keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction=None
    )(y_true, logits)
    mask = y_true != 0
    expected = np.sum(keras.ops.convert_to_numpy(keras_ce) * mask) / mask.sum()
    value = MaskedCrossEntropy(label_smoothing=0.0)(y_true, logits)
    np.testing.assert_allclose(float(value), expected, rtol=1e-6)


def test_probabilities_give_the_same_loss_as_logits():
    y_true, logits = make_batch(np.random.default_rng(4))
    probabilities = keras.ops.softmax(logits, axis=-1)
    from_probs = MaskedCrossEntropy(from_logits=False)(y_true, probabilities)
    from_logits = MaskedCrossEntropy()(y_true, logits)
    np.testing.assert_allclose(float(from_probs), float(from_logits), rtol=1e-5)


def test_float16_logits_are_computed_in_float32():
    y_true, logits = make_batch(np.random.default_rng(5))
    logits16 = (logits * 20.0).astype("float16")  # values up to ~200
    value = MaskedCrossEntropy()(y_true, tf.constant(logits16))
    assert keras.backend.standardize_dtype(value.dtype) == "float32"
    # float16 arithmetic would be off by ~1e-3 relative; float32 is not.
    expected = reference_loss(y_true, logits16.astype(np.float64), 0.1)
    np.testing.assert_allclose(float(value), expected, rtol=1e-6)


def test_sample_weight_scales_tokens_and_keeps_the_token_count():
    y_true, logits = make_batch(np.random.default_rng(6))
    weights = np.array([1.0, 0.0, 3.0], "float32")
    token_losses = reference_token_losses(y_true, logits, 0.1)
    expected = (token_losses * weights[:, None]).sum() / np.sum(y_true != 0)
    value = MaskedCrossEntropy()(y_true, logits, sample_weight=weights)
    np.testing.assert_allclose(float(value), expected, rtol=1e-5)
    per_token = np.broadcast_to(weights[:, None], y_true.shape)
    value = MaskedCrossEntropy()(y_true, logits, sample_weight=per_token)
    np.testing.assert_allclose(float(value), expected, rtol=1e-5)


def test_custom_pad_id():
    y_true, logits = make_batch(np.random.default_rng(7))
    y_true = np.where(y_true == 0, 6, y_true - 1)  # padding is now id 6
    value = MaskedCrossEntropy(pad_id=6)(y_true, logits)
    np.testing.assert_allclose(
        float(value), reference_loss(y_true, logits, 0.1, pad_id=6), rtol=1e-5
    )


@pytest.mark.parametrize(
    "true_shape, pred_shape",
    [((2, 5), (2, 5)), ((2, 5), (2, 5, 7, 1)), ((2, 5), (2, 4, 7))],
    ids=["same-rank", "rank+2", "length-mismatch"],
)
def test_shape_mismatch_names_the_arguments(true_shape, pred_shape):
    with pytest.raises(ValueError, match=r"y_true\.shape=.*y_pred\.shape="):
        MaskedCrossEntropy()(np.ones(true_shape, "int32"), np.zeros(pred_shape))


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(label_smoothing=1.0), "label_smoothing"),
        (dict(label_smoothing=-0.1), "label_smoothing"),
        (dict(reduction="mean"), "reduction"),
    ],
)
def test_invalid_arguments_are_named(kwargs, name):
    with pytest.raises(ValueError, match=name):
        MaskedCrossEntropy(**kwargs)


def test_config_round_trip():
    loss = MaskedCrossEntropy(label_smoothing=0.2, pad_id=3, reduction="sum")
    config = loss.get_config()
    assert config == {
        "label_smoothing": 0.2,
        "pad_id": 3,
        "from_logits": True,
        "reduction": "sum",
        "name": "masked_cross_entropy",
    }
    serialized = keras.losses.serialize(loss)
    assert serialized["registered_name"] == "keras_transformer>MaskedCrossEntropy"
    for clone in (
        MaskedCrossEntropy.from_config(config),
        keras.losses.deserialize(serialized),
    ):
        assert isinstance(clone, MaskedCrossEntropy)
        assert clone.get_config() == config


# A batch for an Embedding(V, V) "model" whose logits are rows of its table:
# the first two sentences (replica 0) are mostly padding, the last two
# (replica 1) are not, so a mean of per-replica means is not the global mean.
VOCAB = 5
X = np.array([[1, 2, 0, 0], [3, 0, 0, 0], [1, 2, 3, 4], [4, 3, 2, 1]], "int32")
Y = np.array([[2, 0, 0, 0], [1, 0, 0, 0], [2, 3, 4, 1], [3, 2, 1, 4]], "int32")
TABLE = np.random.default_rng(8).normal(size=(VOCAB, VOCAB)).astype("float32")


def _embedding_model():
    model = keras.Sequential(
        [keras.Input((4,), dtype="int32"), keras.layers.Embedding(VOCAB, VOCAB)]
    )
    model.set_weights([TABLE])
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate=1.0),
        loss=MaskedCrossEntropy(label_smoothing=0.1),
        metrics=[MaskedAccuracy(), Perplexity()],
    )
    return model


def test_compiled_model_reports_the_mean_over_real_tokens():
    model = _embedding_model()
    logs = model.evaluate(X, Y, batch_size=4, verbose=0, return_dict=True)
    np.testing.assert_allclose(
        logs["loss"], reference_loss(Y, TABLE[X], 0.1), rtol=1e-5
    )


def test_mirrored_strategy_trains_on_the_global_mean_over_real_tokens():
    devices = tf.config.list_logical_devices("CPU")
    if len(devices) < 2:
        pytest.skip("TensorFlow was initialised before two CPUs could be set up")
    strategy = mirrored_strategy(devices[:2])
    with strategy.scope():
        model = _embedding_model()

    logits, mask = TABLE[X].astype(np.float64), Y != 0
    global_mean = reference_loss(Y, logits, 0.1)
    replica_means = [
        reference_loss(Y[i : i + 2], logits[i : i + 2], 0.1) for i in (0, 2)
    ]
    assert abs(global_mean - np.mean(replica_means)) > 0.05  # the test can tell
    # d loss / d logits of the global mean: (softmax - q) / number of real tokens.
    softmax = np.exp(log_softmax(logits))
    dlogits = (softmax - smoothed_targets(Y, VOCAB, 0.1)) * mask[..., None] / mask.sum()
    expected_table = TABLE - np.stack(
        [dlogits[X == v].sum(axis=0) for v in range(VOCAB)]
    )

    history = model.fit(X, Y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    np.testing.assert_allclose(history.history["loss"][0], global_mean, rtol=1e-5)
    np.testing.assert_allclose(model.get_weights()[0], expected_table, atol=1e-6)
    nll = -np.take_along_axis(log_softmax(logits), Y[..., None], -1)[..., 0]
    accuracy = np.sum((logits.argmax(-1) == Y) & mask) / mask.sum()
    np.testing.assert_allclose(
        history.history["masked_accuracy"][0], accuracy, rtol=1e-6
    )
    np.testing.assert_allclose(
        history.history["perplexity"][0], np.exp(nll[mask].mean()), rtol=1e-5
    )


def reference_consistency(y_true, logits_a, logits_b, pad_id=0):
    # (KL(a || b) + KL(b || a)) / 2 per position, averaged over real tokens.
    log_a, log_b = log_softmax(logits_a), log_softmax(logits_b)
    kl_ab = (np.exp(log_a) * (log_a - log_b)).sum(-1)
    kl_ba = (np.exp(log_b) * (log_b - log_a)).sum(-1)
    real = y_true != pad_id
    return ((kl_ab + kl_ba) / 2)[real].sum() / real.sum()


def test_dropout_consistency_matches_numpy_and_ignores_padding():
    rng = np.random.default_rng(3)
    y_true, logits_a = make_batch(rng)
    logits_b = logits_a + rng.normal(scale=0.7, size=logits_a.shape)
    expected = reference_consistency(y_true, logits_a, logits_b)
    assert expected > 0.01
    value = dropout_consistency(y_true, logits_a, logits_b)
    np.testing.assert_allclose(float(value), expected, rtol=1e-5)
    # Symmetric, and 0 for equal predictions.
    np.testing.assert_allclose(
        float(dropout_consistency(y_true, logits_b, logits_a)), expected, rtol=1e-5
    )
    assert float(dropout_consistency(y_true, logits_a, logits_a)) == 0.0
    # Whatever the logits at padding positions, the value is the same.
    noisy = logits_b.copy()
    noisy[y_true == 0] += rng.normal(scale=5.0, size=noisy[y_true == 0].shape)
    np.testing.assert_allclose(
        float(dropout_consistency(y_true, logits_a, noisy)), expected, rtol=1e-5
    )
    np.testing.assert_allclose(
        float(
            dropout_consistency(
                np.where(y_true == 0, 2, 0), logits_a, logits_b, pad_id=2
            )
        ),
        reference_consistency(np.where(y_true == 0, 2, 0), logits_a, logits_b, 2),
        rtol=1e-5,
    )


def test_dropout_consistency_pulls_both_predictions_together():
    rng = np.random.default_rng(4)
    y_true, logits_a = make_batch(rng)
    logits_b = logits_a + rng.normal(size=logits_a.shape)
    a = tf.Variable(logits_a, dtype="float32")
    b = tf.Variable(logits_b, dtype="float32")
    with tf.GradientTape() as tape:
        value = dropout_consistency(y_true, a, b)
    grad_a, grad_b = tape.gradient(value, [a, b])
    real = (y_true != 0)[..., None]
    for grad in (grad_a, grad_b):
        assert np.abs(grad.numpy()[np.broadcast_to(real, grad.shape)]).max() > 1e-3
        assert np.all(grad.numpy()[np.broadcast_to(~real, grad.shape)] == 0)
    # A small step down the gradient brings the two predictions closer.
    closer = dropout_consistency(y_true, a - 0.1 * grad_a, b - 0.1 * grad_b)
    assert float(closer) < float(value)
