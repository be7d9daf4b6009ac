"""Token-level metrics that skip padding: accuracy and perplexity."""

import keras
from keras import ops

from keras_transformer.losses import (
    _log_probabilities,
    _standardize,
    _target_nll,
    _token_weights,
)


class _TokenMean(keras.metrics.Metric):
    """Base of the metrics: the weighted mean of a value per real token.

    The state is two sums over every batch seen since the last reset: the
    subclass's `token_values` times the token weights (a variable named
    `sum_name`), and the weights. Padding has weight 0; `sample_weight`, if
    given, weighs the tokens, `(batch_size,)` or `(batch_size, seq_len)`.
    """

    def __init__(self, pad_id, sum_name, name, dtype):
        super().__init__(name=name, dtype=dtype)
        self.pad_id = pad_id
        self._sum = self.add_variable(
            shape=(), initializer="zeros", dtype=self.dtype, name=sum_name
        )
        self.count = self.add_variable(
            shape=(), initializer="zeros", dtype=self.dtype, name="count"
        )

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true, y_pred = _standardize(y_true, y_pred)
        weights = _token_weights(y_true, self.pad_id, sample_weight)
        values = self.token_values(y_true, y_pred)
        self._sum.assign_add(ops.cast(ops.sum(values * weights), self.dtype))
        self.count.assign_add(ops.cast(ops.sum(weights), self.dtype))

    def token_values(self, y_true, y_pred):
        """The value of each target token, `(batch_size, seq_len)`."""
        raise NotImplementedError

    def mean(self):
        """The weighted mean of the token values; 0 before any real token."""
        return ops.divide_no_nan(self._sum, self.count)

    def get_config(self) -> dict:
        return {**super().get_config(), "pad_id": self.pad_id}


@keras.saving.register_keras_serializable(package="keras_transformer")
class MaskedAccuracy(_TokenMean):
    """Fraction of real (non-padding) target tokens predicted by the argmax.

    The state is two sums over every batch seen since the last reset: correct
    real tokens and real tokens, so the result is the accuracy over all those
    tokens (not a mean of per-batch accuracies). `sample_weight`, if given,
    weighs the tokens, `(batch_size,)` per sentence or `(batch_size, seq_len)`
    per token, and the result is the weighted mean.

    Args:
        pad_id: The target id that marks padding; those positions are ignored.
        name: Name of the metric.
        dtype: Dtype of the state and result.

    Call arguments (`update_state`):
        y_true: Integer target ids, `(batch_size, seq_len)`.
        y_pred: Logits or probabilities, `(batch_size, seq_len, vocab_size)`.
        sample_weight: Optional `(batch_size,)` or `(batch_size, seq_len)`.

    Returns:
        `result()`: a scalar in [0, 1]; 0 before any real token was seen.

    Example:

    >>> import numpy as np
    >>> metric = MaskedAccuracy()
    >>> y_true = np.array([[1, 2, 0]])  # the last position is padding
    >>> y_pred = np.eye(3)[[[1, 0, 2]]]  # predicts 1, 0, 2
    >>> metric.update_state(y_true, y_pred)
    >>> float(metric.result())  # 1 of 2 real tokens
    0.5

    References:
        Vaswani et al., "Attention Is All You Need", 2017, reports BLEU and
        per-wordpiece perplexity (Table 3), not token accuracy; this is a
        training diagnostic next to `Perplexity`.
    """

    def __init__(
        self, pad_id: int = 0, name: str = "masked_accuracy", dtype="float32"
    ) -> None:
        super().__init__(pad_id, "correct", name=name, dtype=dtype)

    @property
    def correct(self):
        """The state: the weighted sum of the correctly predicted tokens."""
        return self._sum

    def token_values(self, y_true, y_pred):
        predicted = ops.cast(ops.argmax(y_pred, axis=-1), "int32")
        return ops.cast(ops.equal(predicted, y_true), "float32")

    def result(self):
        return self.mean()


@keras.saving.register_keras_serializable(package="keras_transformer")
class Perplexity(_TokenMean):
    """exp of the mean unsmoothed cross-entropy per real target token.

    The state is two sums over every batch seen since the last reset: the
    cross-entropy `-log p(y)` of the real (non-padding) tokens and their
    number. The result is `exp(sum / count)`, the perplexity of all those
    tokens together (not a mean of per-batch perplexities). The
    cross-entropy is never label-smoothed, whatever the training loss uses,
    and is computed in float32. `sample_weight`, if given, weighs the tokens,
    `(batch_size,)` per sentence or `(batch_size, seq_len)` per token.

    Args:
        pad_id: The target id that marks padding; those positions are ignored.
        from_logits: Whether `y_pred` holds logits (True) or probabilities.
        name: Name of the metric.
        dtype: Dtype of the state and result.

    Call arguments (`update_state`): those of `MaskedAccuracy`.

    Returns:
        `result()`: a scalar >= 1; exactly 1 before any real token was seen.

    Example:

    >>> import numpy as np
    >>> metric = Perplexity()
    >>> y_true = np.array([[3, 1, 0]])  # the last position is padding
    >>> logits = np.zeros((1, 3, 8))  # uniform over 8 ids
    >>> metric.update_state(y_true, logits)
    >>> round(float(metric.result()), 4)  # a uniform guess: the vocabulary size
    8.0

    References:
        Vaswani et al., "Attention Is All You Need", 2017, section 6.2 and
        Table 3 (perplexities per wordpiece on the development set).
    """

    def __init__(
        self,
        pad_id: int = 0,
        from_logits: bool = True,
        name: str = "perplexity",
        dtype="float32",
    ) -> None:
        super().__init__(pad_id, "total", name=name, dtype=dtype)
        self.from_logits = from_logits

    @property
    def total(self):
        """The state: the weighted sum of the tokens' cross-entropies."""
        return self._sum

    def token_values(self, y_true, y_pred):
        log_probs = _log_probabilities(y_pred, self.from_logits)
        nll = _target_nll(y_true, log_probs, self.pad_id)
        # where, not only a product: whatever the logits at padding, 0 there.
        return ops.where(ops.equal(y_true, self.pad_id), 0.0, nll)

    def result(self):
        return ops.exp(self.mean())

    def get_config(self) -> dict:
        return {**super().get_config(), "from_logits": self.from_logits}
