"""Tests for keras_transformer.metrics: MaskedAccuracy and Perplexity."""

import keras
import numpy as np
import pytest

from keras_transformer.losses import MaskedCrossEntropy
from keras_transformer.metrics import MaskedAccuracy, Perplexity


def log_softmax(logits):
    logits = np.asarray(logits, np.float64)
    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def two_batches():
    # Different lengths and padding, so that pooling tokens differs from
    # averaging the two batch values.
    rng = np.random.default_rng(0)
    y1 = np.array([[3, 1, 4, 0], [2, 0, 0, 0]], "int32")
    y2 = np.array([[5, 2, 6, 1, 4, 3], [1, 5, 2, 6, 3, 0], [4, 4, 0, 0, 0, 0]], "int32")
    l1 = rng.normal(scale=2.0, size=(2, 4, 7)).astype("float32")
    l2 = rng.normal(scale=2.0, size=(3, 6, 7)).astype("float32")
    # Make some predictions right so accuracy is not trivially ~0.
    np.put_along_axis(l2, y2[..., None], 5.0, axis=-1)
    l2[0, :2] = 0.0
    return [(y1, l1), (y2, l2)]


def pooled(batches, per_token):
    values, counts = [], []
    for y, logits in batches:
        mask = y != 0
        values.append(per_token(y, logits)[mask].sum())
        counts.append(mask.sum())
    return sum(values) / sum(counts), [
        v / c for v, c in zip(values, counts, strict=True)
    ]


def hits(y, logits):
    return (np.argmax(logits, -1) == y).astype(np.float64)


def nll(y, logits):
    return -np.take_along_axis(log_softmax(logits), y[..., None], -1)[..., 0]


def test_masked_accuracy_over_two_batches_matches_numpy():
    batches = two_batches()
    expected, per_batch = pooled(batches, hits)
    assert abs(expected - np.mean(per_batch)) > 0.05  # pooling matters here
    metric = MaskedAccuracy()
    for y, logits in batches:
        metric.update_state(y, logits)
    np.testing.assert_allclose(float(metric.result()), expected, rtol=1e-6)


def test_perplexity_over_two_batches_matches_numpy():
    batches = two_batches()
    mean_nll, per_batch = pooled(batches, nll)
    assert abs(np.exp(mean_nll) - np.mean(np.exp(per_batch))) > 0.5
    metric = Perplexity()
    for y, logits in batches:
        metric.update_state(y, logits)
    np.testing.assert_allclose(float(metric.result()), np.exp(mean_nll), rtol=1e-5)


def test_perplexity_is_exp_of_the_unsmoothed_loss():
    y, logits = two_batches()[1]
    metric = Perplexity()
    metric.update_state(y, logits)
    loss = MaskedCrossEntropy(label_smoothing=0.0)(y, logits)
    np.testing.assert_allclose(float(metric.result()), np.exp(float(loss)), rtol=1e-5)


@pytest.mark.parametrize("metric_class", [MaskedAccuracy, Perplexity])
def test_padding_invariance(metric_class):
    y, logits = two_batches()[0]
    metric = metric_class()
    metric.update_state(y, logits)
    base = float(metric.result())
    rng = np.random.default_rng(1)
    longer_y = np.pad(y, ((0, 0), (0, 3)))
    extra = rng.normal(scale=100.0, size=(2, 3, 7)).astype("float32")
    extra[:, -1, :2] = [np.inf, np.nan]
    padded = metric_class()
    padded.update_state(longer_y, np.concatenate([logits, extra], axis=1))
    np.testing.assert_allclose(float(padded.result()), base, rtol=1e-6)


@pytest.mark.parametrize(
    "metric_class, empty_value", [(MaskedAccuracy, 0.0), (Perplexity, 1.0)]
)
def test_reset_state(metric_class, empty_value):
    (y1, l1), (y2, l2) = two_batches()
    metric = metric_class()
    metric.update_state(y1, l1)
    metric.reset_state()
    assert float(metric.result()) == empty_value
    metric.update_state(y2, l2)
    fresh = metric_class()
    fresh.update_state(y2, l2)
    assert float(metric.result()) == float(fresh.result())


@pytest.mark.parametrize("metric_class", [MaskedAccuracy, Perplexity])
def test_sample_weight_gives_the_weighted_mean_over_real_tokens(metric_class):
    y, logits = two_batches()[1]
    weights = np.array([2.0, 0.0, 1.0], "float32")
    token_weights = (y != 0) * weights[:, None]
    per_token = hits(y, logits) if metric_class is MaskedAccuracy else nll(y, logits)
    expected = (per_token * token_weights).sum() / token_weights.sum()
    if metric_class is Perplexity:
        expected = np.exp(expected)
    metric = metric_class()
    metric.update_state(y, logits, sample_weight=weights)
    np.testing.assert_allclose(float(metric.result()), expected, rtol=1e-5)


def test_perplexity_from_probabilities_and_float16_logits():
    y, logits = two_batches()[1]
    expected = Perplexity()
    expected.update_state(y, logits)
    from_probs = Perplexity(from_logits=False)
    from_probs.update_state(y, keras.ops.softmax(logits))
    np.testing.assert_allclose(
        float(from_probs.result()), float(expected.result()), rtol=1e-5
    )
    logits16 = logits.astype("float16")
    half = Perplexity()
    half.update_state(y, logits16)
    mask = y != 0
    reference = np.exp(nll(y, logits16.astype(np.float64))[mask].mean())
    np.testing.assert_allclose(float(half.result()), reference, rtol=1e-6)


@pytest.mark.parametrize("metric_class", [MaskedAccuracy, Perplexity])
def test_shape_mismatch_names_the_arguments(metric_class):
    with pytest.raises(ValueError, match=r"y_true\.shape=.*y_pred\.shape="):
        metric_class().update_state(np.ones((2, 5), "int32"), np.zeros((2, 5)))


@pytest.mark.parametrize(
    "metric",
    [
        MaskedAccuracy(pad_id=3, name="accuracy"),
        Perplexity(pad_id=3, from_logits=False, name="ppl"),
    ],
    ids=["MaskedAccuracy", "Perplexity"],
)
def test_config_round_trip(metric):
    config = metric.get_config()
    assert config["pad_id"] == 3
    serialized = keras.metrics.serialize(metric)
    assert serialized["registered_name"] == f"keras_transformer>{type(metric).__name__}"
    for clone in (
        type(metric).from_config(config),
        keras.metrics.deserialize(serialized),
    ):
        assert type(clone) is type(metric)
        assert clone.get_config() == config
