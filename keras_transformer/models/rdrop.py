"""R-Drop: the Transformer trained with two dropout passes per batch."""

import keras

from keras_transformer.losses import dropout_consistency
from keras_transformer.models.transformer import Transformer


@keras.saving.register_keras_serializable(package="keras_transformer")
class RDropTransformer(Transformer):
    """A `Transformer` whose training objective is R-Drop's.

    Each training batch goes through the model twice, with other dropout
    masks the second time. The objective is the compiled loss of both
    passes, averaged, plus `rdrop_alpha / 2` times the symmetric KL
    divergence of their predictions per real token
    (`keras_transformer.losses.dropout_consistency`): the paper's
    `L1 + L2 + alpha * KL_sym`, halved so that the cross-entropy keeps the
    scale it has without R-Drop (and `rdrop_alpha` the paper's meaning).
    A step costs about two; evaluation, inference and the weights are
    those of a `Transformer`. `fit` logs the objective as `loss`.

    The second pass runs in `Model.compute_loss`, Keras's own extension
    point, so `compile` and `fit` are used as for any model, on each
    backend (TensorFlow, JAX and PyTorch all compute the loss where its
    gradient reaches the weights through both passes).

    Args:
        vocab_size: size of the shared vocabulary.
        rdrop_alpha: weight of the consistency term (the paper's `alpha`;
            5 for its translation tasks). 0 trains as a `Transformer`.
        **kwargs: the other arguments of `Transformer`.

    Example:

    >>> import numpy as np
    >>> from keras_transformer.losses import MaskedCrossEntropy
    >>> model = RDropTransformer(rdrop_alpha=5.0, vocab_size=20, num_layers=1,
    ...                          d_model=8, num_heads=2, d_ff=16, dropout=0.3)
    >>> model.compile(optimizer="adam", loss=MaskedCrossEntropy())
    >>> source = np.array([[5, 6, 7, 3]]); target = np.array([[2, 8, 9, 3]])
    >>> history = model.fit((source, target[:, :-1]), target[:, 1:], verbose=0)
    >>> len(history.history["loss"])
    1

    References:
        Liang et al., "R-Drop: Regularized Dropout for Neural Networks",
        NeurIPS 2021.
    """

    def __init__(self, vocab_size, rdrop_alpha=5.0, **kwargs):
        super().__init__(vocab_size, **kwargs)
        if not rdrop_alpha >= 0:
            raise ValueError(
                f"rdrop_alpha must be >= 0. Received: rdrop_alpha={rdrop_alpha}"
            )
        self.rdrop_alpha = rdrop_alpha

    def compute_loss(
        self, x=None, y=None, y_pred=None, sample_weight=None, training=True
    ):
        first = super().compute_loss(x, y, y_pred, sample_weight, training)
        if not (training and self.rdrop_alpha):
            return first
        again = self(x, training=True)  # other dropout masks
        second = super().compute_loss(x, y, again, sample_weight, training)
        consistency = dropout_consistency(y, y_pred, again)
        return (first + second) / 2 + self.rdrop_alpha / 2 * consistency

    def get_config(self):
        return {**super().get_config(), "rdrop_alpha": self.rdrop_alpha}
