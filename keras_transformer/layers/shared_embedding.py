"""Token embeddings shared with the pre-softmax projection, section 3.4."""

import math

import keras
import numpy as np
from keras import ops

from keras_transformer.layers.masking import padding_mask
from keras_transformer.validation import check_positive_int


@keras.saving.register_keras_serializable(package="keras_transformer")
class SharedEmbedding(keras.layers.Layer):
    """One matrix `U` for the input embeddings and the output projection.

    `layer(ids)` looks up `U[ids] * sqrt(d_model)` and marks id 0 as padding
    with a Keras mask (unless `mask_zero=False`); `layer(x, reverse=True)`
    gives the logits `x Uᵀ`. One instance serves the encoder input, the
    decoder input and the pre-softmax linear transformation: the paper's
    three-way weight tying.

    Args:
        vocab_size: number of token ids (including the reserved ones).
        d_model: embedding size.
        embeddings_initializer: defaults to a normal distribution with
            standard deviation `d_model ** -0.5`, so scaled embeddings have
            unit variance.
        mask_zero: mark id 0 as padding with a Keras mask (as
            `keras.layers.Embedding(mask_zero=True)`); `False` for inputs
            without padding, such as fixed-length language-model windows.
        **kwargs: passed to `keras.layers.Layer`.

    Call arguments:
        inputs: integer ids `(B, T)`, or with `reverse=True` float `(B, T, D)`.
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
        super().__init__(**kwargs)
        for name, value in (("vocab_size", vocab_size), ("d_model", d_model)):
            check_positive_int(name, value)
        self.vocab_size = vocab_size
        self.d_model = d_model
        if embeddings_initializer is None:
            embeddings_initializer = keras.initializers.RandomNormal(
                stddev=d_model**-0.5
            )
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        self.mask_zero = mask_zero
        self.supports_masking = True

    def build(self, input_shape=None):
        if self.quantization_mode == "int8":  # Loading a quantized model.
            self._int8_build()
            return
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.vocab_size, self.d_model),
            initializer=self.embeddings_initializer,
        )

    def call(self, inputs, reverse=False):
        if reverse:
            # (B, T, D) x (V, D)ᵀ -> (B, T, V), as one 2-D matmul.
            embeddings = ops.cast(self.embeddings, inputs.dtype)
            return self._logits(inputs, embeddings)
        x = ops.take(self.embeddings, self._ids(inputs), axis=0)
        return x * ops.cast(math.sqrt(self.d_model), x.dtype)

    def quantize(self, mode=None, type_check=True, config=None):
        """Stores `U` as int8 rows with one float32 scale per row.

        `model.quantize("int8")` calls it: lookups and logits then read
        the int8 table (weights only; the products stay in float). Rows are
        scaled by their largest absolute value, as Keras's `Embedding` does.
        """
        if type_check and type(self) is not SharedEmbedding:
            raise self._not_implemented_error(self.quantize)
        if mode != "int8":
            raise NotImplementedError(
                f"SharedEmbedding quantizes to int8 only. Received: mode={mode}"
            )
        table = ops.convert_to_numpy(self.embeddings).astype("float32")
        largest = np.max(np.abs(table), axis=-1)
        scale = 127.0 / np.where(largest > 0, largest, 1.0)
        values = np.clip(np.round(table * scale[:, None]), -127, 127)
        del self.embeddings
        self._int8_build()
        self.embeddings.assign(values.astype("int8"))
        self.embeddings_scale.assign(scale)
        self.dtype_policy = keras.dtype_policies.get(
            f"int8_from_{self.dtype_policy.name}"
        )

    def _int8_build(self):
        self._is_quantized = True
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.vocab_size, self.d_model),
            initializer="zeros",
            dtype="int8",
            trainable=False,
        )
        self.embeddings_scale = self.add_weight(
            name="embeddings_scale",
            shape=(self.vocab_size,),
            initializer="ones",
            trainable=False,
        )

    def _int8_call(self, inputs, reverse=False):
        dtype = self.compute_dtype
        if reverse:
            # x (q / s)ᵀ = (x qᵀ) / s: the scales divide the logits' columns.
            logits = self._logits(inputs, ops.cast(self.embeddings, inputs.dtype))
            return logits / ops.cast(self.embeddings_scale, logits.dtype)
        ids = self._ids(inputs)
        rows = ops.cast(ops.take(self.embeddings, ids, axis=0), dtype)
        scale = ops.cast(ops.take(self.embeddings_scale, ids, axis=0), dtype)
        return rows * (math.sqrt(self.d_model) / scale)[..., None]

    def _logits(self, inputs, embeddings):
        flat = ops.reshape(inputs, (-1, self.d_model))
        logits = ops.matmul(flat, ops.transpose(embeddings))
        return ops.reshape(logits, (*ops.shape(inputs)[:-1], self.vocab_size))

    @staticmethod
    def _ids(inputs):
        if "int" not in str(inputs.dtype):
            raise ValueError(
                "`inputs` must be integer token ids. "
                f"Received: inputs.dtype={inputs.dtype}"
            )
        return inputs

    def compute_mask(self, inputs, mask=None):
        # Logits carry no mask: losses here handle padding themselves, and a
        # Keras mask would make Keras reweight them a second time.
        if self.mask_zero and "int" in str(inputs.dtype):
            return padding_mask(inputs)
        return None

    def get_config(self):
        config = super().get_config()
        config.update(
            vocab_size=self.vocab_size,
            d_model=self.d_model,
            embeddings_initializer=keras.initializers.serialize(
                self.embeddings_initializer
            ),
            mask_zero=self.mask_zero,
        )
        return config

    def compute_output_spec(self, inputs, reverse=False):
        # Trace `call`: the shape depends on `reverse`, a non-tensor argument.
        return keras.Operation.compute_output_spec(self, inputs, reverse=reverse)

    def compute_output_shape(self, input_shape, reverse=False):
        if reverse:
            return (*input_shape[:-1], self.vocab_size)
        return (*input_shape, self.d_model)
