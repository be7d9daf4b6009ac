"""The training loss: label-smoothed cross-entropy over real tokens, and
the consistency of two dropout passes (R-Drop)."""

import keras
from keras import ops

_REDUCTIONS = ("sum_over_batch_size", "sum", "none", None)


@keras.saving.register_keras_serializable(package="keras_transformer")
class MaskedCrossEntropy(keras.losses.Loss):
    """Label-smoothed cross-entropy averaged over the real (non-padding) tokens.

    For a target token `y` the smoothed target distribution over the
    vocabulary of `V` ids is

        q(k) = 1 - label_smoothing              if k == y
        q(k) = label_smoothing / (V - 1)        for each of the V - 1 ids k != y

    so the true id receives exactly `1 - label_smoothing` and the rest is
    spread uniformly over the other `V - 1` ids, the padding id included (as
    in the authors' tensor2tensor code). The loss of a token is the
    cross-entropy `-sum_k q(k) log p(k)`; it is not shifted by the entropy of
    `q`, so its minimum is that entropy rather than 0 (the gradients are the
    same). With `label_smoothing=0` it is the usual sparse cross-entropy.

    Positions whose target is `pad_id` contribute nothing, whatever the
    predictions there. With the default reduction the result is

        sum of token losses over real tokens / number of real tokens

    for the whole batch (not a mean of per-sentence means): each real token
    weighs the same. `sample_weight`, if given, scales the token losses,
    `(batch_size,)` per sentence or `(batch_size, seq_len)` per token; the
    divisor stays the number of real tokens.

    The computation runs in float32 whatever the dtype of `y_pred`, so
    float16 or bfloat16 logits of a mixed-precision model are safe.

    Distribution: under a `tf.distribute` strategy with more than one replica
    (`MirroredStrategy`, `MultiWorkerMirroredStrategy`), when called inside a
    replica context (as `Model.fit` and `Model.evaluate` do), the number of
    real tokens is summed over all replicas with an all-reduce and each
    replica returns `its sum of token losses / global number of real tokens`.
    Its share, in other words: the shares of all replicas add up to the
    per-real-token mean over the global batch, and since gradients are summed
    over replicas, training minimises exactly that global mean even when the
    replicas hold different numbers of padding positions. (Keras's built-in
    losses instead return `local mean / num_replicas`, which averages the
    per-replica means.) Keras reports `num_replicas * share` as the loss of a
    replica and averages those over replicas weighted by their batch sizes,
    so the logged loss is the global mean when the per-replica batches have
    equal sizes. In a custom loop, apply the gradients of the returned value
    directly; do not divide it by the number of replicas again. Called
    outside a replica context (eagerly, or in a strategy's cross-replica
    context) the loss is the plain mean over the tokens it is given.

    Keras masks attached to `y_pred` are ignored: which positions are padding
    is read from `y_true` alone.

    Args:
        label_smoothing: `epsilon_ls` in [0, 1), the probability mass moved
            from the true id to the other ids. 0.1 in the paper.
        pad_id: The target id that marks padding.
        from_logits: Whether `y_pred` holds logits (True) or probabilities.
        reduction: "sum_over_batch_size" (the mean over real tokens described
            above), "sum" (the sum over real tokens) or "none"/None (the token
            losses, with 0 at padding positions, shaped like `y_true`).
        name: Name of the loss.

    Call arguments:
        y_true: Integer target ids, `(batch_size, seq_len)`.
        y_pred: Logits or probabilities, `(batch_size, seq_len, vocab_size)`.
            Any matching leading shape works: `y_pred` must have exactly one
            dimension more than `y_true`.
        sample_weight: Optional weights, `(batch_size,)` or
            `(batch_size, seq_len)`.

    Returns:
        A float32 scalar, or float32 token losses `(batch_size, seq_len)` when
        `reduction` is "none" or None.

    Example:

    >>> import numpy as np
    >>> loss = MaskedCrossEntropy(label_smoothing=0.1)
    >>> y_true = np.array([[5, 7, 0]])  # the last position is padding
    >>> logits = np.zeros((1, 3, 10))  # a uniform prediction over 10 ids
    >>> round(float(loss(y_true, logits)), 4)  # log(10)
    2.3026
    >>> token_losses = MaskedCrossEntropy(reduction="none")(y_true, logits)
    >>> [round(float(value), 4) for value in token_losses[0]]
    [2.3026, 2.3026, 0.0]

    References:
        Vaswani et al., "Attention Is All You Need", 2017, section 5.4
        (Regularization: label smoothing).
    """

    def __init__(
        self,
        label_smoothing: float = 0.1,
        pad_id: int = 0,
        from_logits: bool = True,
        reduction: str | None = "sum_over_batch_size",
        name: str = "masked_cross_entropy",
    ) -> None:
        if reduction not in _REDUCTIONS:
            raise ValueError(
                f"reduction must be one of {_REDUCTIONS}. "
                f"Received: reduction={reduction!r}"
            )
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(
                "label_smoothing must be in [0, 1). "
                f"Received: label_smoothing={label_smoothing}"
            )
        super().__init__(name=name, reduction=reduction, dtype="float32")
        self.label_smoothing = label_smoothing
        self.pad_id = pad_id
        self.from_logits = from_logits

    def __call__(self, y_true, y_pred, sample_weight=None):
        with keras.name_scope(self.name):
            losses = self.call(y_true, y_pred)
            y_true = ops.cast(ops.convert_to_tensor(y_true), "int32")
            if sample_weight is not None:
                losses = losses * _token_weights(y_true, self.pad_id, sample_weight)
            if self.reduction in ("none", None):
                return losses
            total = ops.sum(losses)
            if self.reduction == "sum":
                return total
            count = _global_sum(ops.sum(_token_weights(y_true, self.pad_id)))
            return ops.divide_no_nan(total, count)

    def call(self, y_true, y_pred):
        """Token losses shaped like `y_true`, 0 at padding positions."""
        y_true, y_pred = _standardize(y_true, y_pred)
        losses = self._token_losses(y_true, y_pred)
        # where, not a product: whatever the logits at padding, 0 there.
        return ops.where(ops.equal(y_true, self.pad_id), 0.0, losses)

    def _token_losses(self, y_true, y_pred):
        if self.from_logits:
            return _fused_token_losses(
                y_true, y_pred, self.label_smoothing, self.pad_id
            )
        log_probs = _log_probabilities(y_pred, self.from_logits)
        return _smoothed_cross_entropy(
            y_true, log_probs, self.label_smoothing, self.pad_id
        )

    def get_config(self) -> dict:
        return {
            "label_smoothing": self.label_smoothing,
            "pad_id": self.pad_id,
            "from_logits": self.from_logits,
            "reduction": self.reduction,
            "name": self.name,
        }


def dropout_consistency(y_true, logits_a, logits_b, pad_id: int = 0):
    """The symmetric KL divergence of two predictions, per real token (R-Drop).

    R-Drop (Liang et al., 2021) runs each training batch through the model
    twice: dropout draws other masks in the second pass, so the two
    predictions differ, and the objective pulls them together with

        (KL(p_a || p_b) + KL(p_b || p_a)) / 2

    at each target position. This returns that term summed over the real
    (non-padding) positions of `y_true` and divided by their number, the
    normalization of `MaskedCrossEntropy` (under a `tf.distribute` strategy
    with more than one replica, inside a replica context, the divisor is
    the number of real tokens of the global batch). Both predictions carry
    gradients, as in the paper. The computation runs in float32.

    Args:
        y_true: Integer target ids, `(batch_size, seq_len)`; only their
            padding matters.
        logits_a: Logits of the first pass, `(batch_size, seq_len, vocab_size)`.
        logits_b: Logits of the second pass, shaped like `logits_a`.
        pad_id: The target id that marks padding.

    Returns:
        A float32 scalar, 0 where the two predictions agree.

    Example:

    >>> import numpy as np
    >>> y_true = np.array([[5, 0]])  # the second position is padding
    >>> same = np.zeros((1, 2, 3))
    >>> float(dropout_consistency(y_true, same, same))
    0.0
    >>> other = np.array([[[np.log(2.0), 0.0, 0.0], [9.0, 0.0, 0.0]]])
    >>> round(float(dropout_consistency(y_true, same, other)), 4)
    0.0578

    References:
        Liang et al., "R-Drop: Regularized Dropout for Neural Networks",
        NeurIPS 2021, equations (1)-(3).
    """
    y_true, logits_a = _standardize(y_true, logits_a)
    _, logits_b = _standardize(y_true, logits_b)
    log_a = ops.log_softmax(logits_a, axis=-1)
    log_b = ops.log_softmax(logits_b, axis=-1)
    # KL(a || b) + KL(b || a) = sum_k (p_a(k) - p_b(k)) (log p_a(k) - log p_b(k))
    both = ops.sum((ops.exp(log_a) - ops.exp(log_b)) * (log_a - log_b), axis=-1)
    weights = _token_weights(y_true, pad_id)
    count = _global_sum(ops.sum(weights))
    return ops.divide_no_nan(ops.sum(both * weights) / 2.0, count)


def _token_weights(y_true, pad_id: int, sample_weight=None):
    """Float32 weights shaped like `y_true`: 0 at padding, else `sample_weight`.

    `sample_weight` may be a scalar, `(batch_size,)` or `(batch_size, seq_len)`.
    """
    weights = ops.cast(ops.not_equal(y_true, pad_id), "float32")
    if sample_weight is None:
        return weights
    sample_weight = ops.cast(ops.convert_to_tensor(sample_weight), "float32")
    # Per-sentence weights (B,) broadcast over the positions of (B, T).
    while 0 < len(sample_weight.shape) < len(weights.shape):
        sample_weight = ops.expand_dims(sample_weight, -1)
    return weights * sample_weight


def _fused_token_losses(y_true, logits, label_smoothing: float, pad_id: int):
    """Token cross-entropies from logits, with their gradient in one pass.

    At a vocabulary of thousands the softmax over the logits is most of the
    cost; `_cross_entropy` computes it once, for the loss and its gradient
    together.
    """
    if keras.backend.backend() != "tensorflow":
        log_probs = ops.log_softmax(logits, axis=-1)
        return _smoothed_cross_entropy(y_true, log_probs, label_smoothing, pad_id)
    # Padding ids need not be valid indices; their losses are zeroed later.
    ids = ops.where(ops.equal(y_true, pad_id), 0, y_true)
    return _cross_entropy(ids, logits, label_smoothing)


def _smoothed_cross_entropy(y_true, log_probs, label_smoothing, pad_id):
    """`-sum_k q(k) log p(k)` from float32 log-probabilities, any backend."""
    nll = _target_nll(y_true, log_probs, pad_id)
    if label_smoothing == 0:
        return nll
    # -sum_k q(k) log p(k) = (1 - eps - off) * nll + off * sum_k -log p(k),
    # with off = eps / (V - 1), the mass of each id other than y.
    vocab_size = ops.cast(ops.shape(log_probs)[-1], "float32")
    off = label_smoothing / (vocab_size - 1.0)
    uniform_nll = -ops.sum(log_probs, axis=-1)
    return (1.0 - label_smoothing - off) * nll + off * uniform_nll


def _cross_entropy(ids, logits, label_smoothing):
    """`-sum_k q(k) log softmax(logits)(k)` over the last axis, and its gradient.

    With `on = 1 - label_smoothing` at the target id and `off` elsewhere,
    the loss is `logsumexp(x) - off * sum(x) - (on - off) * x[id]` and its
    gradient `softmax(x) - q`. The forward pass keeps the gradient, so the
    exponentials are computed once and the backward pass only scales it
    (TensorFlow's fused kernel does the same; this form compiles faster
    under XLA, which fuses the one-hot target into the gradient).
    TensorFlow backend only.
    """
    import tensorflow as tf

    @tf.custom_gradient
    def token_losses(logits):
        vocab_size = tf.shape(logits)[-1]
        off = label_smoothing / (tf.cast(vocab_size, "float32") - 1.0)
        on = 1.0 - label_smoothing
        top = tf.reduce_max(logits, axis=-1, keepdims=True)
        exp = tf.exp(logits - top)
        total = tf.reduce_sum(exp, axis=-1, keepdims=True)
        log_z = tf.squeeze(top + tf.math.log(total), -1)
        target_logit = tf.gather(logits, ids[..., None], batch_dims=len(ids.shape))
        losses = (
            log_z
            - off * tf.reduce_sum(logits, axis=-1)
            - (on - off) * tf.squeeze(target_logit, -1)
        )
        gradient = exp / total - off - (on - off) * tf.one_hot(ids, vocab_size)
        return losses, lambda upstream: gradient * upstream[..., None]

    return token_losses(logits)


def _log_probabilities(y_pred, from_logits: bool):
    """Float32 log-probabilities over the last axis of logits or probabilities."""
    y_pred = ops.cast(y_pred, "float32")
    if from_logits:
        return ops.log_softmax(y_pred, axis=-1)
    y_pred = y_pred / ops.sum(y_pred, axis=-1, keepdims=True)
    return ops.log(ops.clip(y_pred, keras.config.epsilon(), 1.0))


def _target_nll(y_true, log_probs, pad_id: int):
    """-log p(y_true), `(batch_size, seq_len)`, from `(B, T, V)` log-probs."""
    # Padding ids need not be valid indices; gather id 0 there instead.
    ids = ops.where(ops.equal(y_true, pad_id), 0, y_true)
    picked = ops.take_along_axis(log_probs, ops.expand_dims(ids, -1), axis=-1)
    return -ops.squeeze(picked, axis=-1)


def _standardize(y_true, y_pred):
    """Checks the shapes, returns int32 ids and float32 predictions."""
    y_true = ops.convert_to_tensor(y_true)
    y_pred = ops.convert_to_tensor(y_pred)
    true_shape, pred_shape = tuple(y_true.shape), tuple(y_pred.shape)
    pairs = zip(true_shape, pred_shape, strict=False)
    leading_match = all(a is None or b is None or a == b for a, b in pairs)
    if len(pred_shape) != len(true_shape) + 1 or not leading_match:
        raise ValueError(
            "y_pred must have the shape of y_true plus a vocabulary axis: "
            "y_true (batch_size, seq_len) and y_pred "
            "(batch_size, seq_len, vocab_size). "
            f"Received: y_true.shape={true_shape}, y_pred.shape={pred_shape}"
        )
    return ops.cast(y_true, "int32"), ops.cast(y_pred, "float32")


def _global_sum(value):
    """Sums `value` over the replicas when called inside a replica context."""
    if keras.backend.backend() != "tensorflow":
        return value  # tf.distribute strategies are TensorFlow's.
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return value
    return tf.stop_gradient(context.all_reduce(tf.distribute.ReduceOp.SUM, value))
