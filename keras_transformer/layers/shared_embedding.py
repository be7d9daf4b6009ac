"""Token embeddings shared with the pre-softmax projection, section 3.4."""

import math

import keras
from keras import ops

from keras_transformer.layers.masking import padding_mask
from keras_transformer.validation import check_positive_int


@keras.saving.register_keras_serializable(package="keras_transformer")
class SharedEmbedding(keras.layers.ReversibleEmbedding):
    """One matrix `U` for the input embeddings and the output projection.

    `layer(ids)` looks up `U[ids] * sqrt(d_model)` and marks id 0 as padding
    with a Keras mask (unless `mask_zero=False`); `layer(x, reverse=True)`
    gives the logits `x Uᵀ`, unscaled and without a mask. One instance serves
    the encoder input, the decoder input and the pre-softmax linear
    transformation: the paper's three-way weight tying.

    This is `keras.layers.ReversibleEmbedding` with tied weights and the
    paper's `sqrt(d_model)` scale on lookups, so it keeps what Keras's
    embeddings do: float ids (such as the placeholders Keras builds
    subclassed models with on `load_model`) are cast to integers, LoRA
    (`enable_lora`) and `quantize("int8")` (or `model.quantize("int8")`;
    weights only, see `quantize`) work, and the weight is the variable
    `embeddings`.

    Args:
        vocab_size: number of token ids (including the reserved ones).
        d_model: embedding size.
        embeddings_initializer: defaults to a normal distribution with
            standard deviation `d_model ** -0.5`, so scaled embeddings have
            unit variance.
        mask_zero: mark id 0 as padding with a Keras mask (as
            `keras.layers.Embedding(mask_zero=True)`); `False` for inputs
            without padding, such as fixed-length language-model windows.
        **kwargs: passed to `keras.layers.ReversibleEmbedding` (e.g. `name`,
            `dtype`, `embeddings_regularizer`); the weights are always tied.
            Under mixed precision give `reverse_dtype` the compute dtype
            (as `Transformer` does): the matrix is float32, and without it
            `x Uᵀ` is computed in float32.

    Call arguments:
        inputs: integer ids `(B, T)`, or with `reverse=True` float `(B, T, D)`.
            Only integer ids get the padding mask: float inputs are taken for
            hidden states, whose logits carry no mask.
        reverse: project to vocabulary logits instead of embedding.

    Returns:
        `(B, T, D)` embeddings, or `(B, T, vocab_size)` logits with `reverse`.

    Example:

    >>> import numpy as np
    >>> emb = SharedEmbedding(vocab_size=10, d_model=4)
    >>> x = emb(np.array([[3, 5, 0]]))
    >>> tuple(x.shape), tuple(emb(x, reverse=True).shape)
    ((1, 3, 4), (1, 3, 10))
    >>> len(emb.weights)
    1

    References:
        Vaswani et al. 2017, "Attention Is All You Need", section 3.4.
    """

    def __init__(
        self,
        vocab_size,
        d_model,
        embeddings_initializer=None,
        mask_zero=True,
        **kwargs,
    ):
        for name, value in (("vocab_size", vocab_size), ("d_model", d_model)):
            check_positive_int(name, value)
        if embeddings_initializer is None:
            embeddings_initializer = keras.initializers.RandomNormal(
                stddev=d_model**-0.5
            )
        super().__init__(
            vocab_size,
            d_model,
            tie_weights=True,
            embeddings_initializer=embeddings_initializer,
            mask_zero=mask_zero,
            **kwargs,
        )
        self.vocab_size = vocab_size
        self.d_model = d_model
        # Reverse inputs may carry a mask; the logits drop it (compute_mask).
        self.supports_masking = True

    def call(self, inputs, reverse=False):
        outputs = super().call(inputs, reverse=reverse)
        return self._scale_lookup(outputs, reverse)

    def quantized_call(self, inputs, reverse=False):
        """The call of a quantized layer (Keras calls it instead of `call`)."""
        outputs = super().quantized_call(inputs, reverse=reverse)
        return self._scale_lookup(outputs, reverse)

    def quantize(self, mode=None, type_check=True, config=None):
        """Quantizes `U` with Keras's `ReversibleEmbedding` machinery.

        `model.quantize("int8")` calls it: rows of `U` become int8 with one
        float32 scale each (by their largest absolute value), and lookups and
        logits read them. For int8 only the weights are quantized: the
        hidden states of the reverse projection stay float, whatever
        activation quantizer `config` names. A subclass that changes `call`
        must override this method too.
        """
        if type_check and type(self) is not SharedEmbedding:
            raise NotImplementedError(
                f"Layer {type(self).__name__} does not have a `quantize` "
                "method implemented."
            )
        if mode == "int8":
            config = _int8_weights_only(config)
        super().quantize(mode, type_check=False, config=config)

    def quantized_build(self, embeddings_shape, mode, config=None):
        # Also reached without a config: building from an int8 dtype policy,
        # as `.keras` files of the previous version (which saved none) do.
        if mode == "int8":
            config = _int8_weights_only(config)
        super().quantized_build(embeddings_shape, mode, config=config)

    def _scale_lookup(self, outputs, reverse):
        # Lookups (B, T, D) are scaled by sqrt(D); logits (B, T, V) are not.
        if reverse:
            return outputs
        return outputs * ops.cast(math.sqrt(self.d_model), outputs.dtype)

    def compute_mask(self, inputs, mask=None):
        # `compute_mask` does not see `reverse`: integer inputs are ids. Logits
        # carry no mask: losses here handle padding themselves, and a Keras
        # mask would make Keras reweight them a second time.
        if self.mask_zero and "int" in keras.backend.standardize_dtype(inputs.dtype):
            return padding_mask(inputs)
        return None

    def get_config(self):
        config = super().get_config()
        # Always tied, and named after the paper rather than Keras.
        del config["tie_weights"]
        config["vocab_size"] = config.pop("input_dim")
        config["d_model"] = config.pop("output_dim")
        return config

    def compute_output_shape(self, input_shape, reverse=False):
        return tuple(super().compute_output_shape(input_shape, reverse=reverse))


def _int8_weights_only(config):
    """The int8 config without an activation quantizer: `x Uᵀ` in float."""
    weight_quantizer = None if config is None else config.weight_quantizer
    return keras.quantizers.Int8QuantizationConfig(
        weight_quantizer=weight_quantizer, activation_quantizer=None
    )
