"""The encoder stack, section 3.1 of the paper."""

import keras

from keras_transformer.layers.encoder_layer import EncoderLayer
from keras_transformer.layers.positional_encoding import PositionalEncoding
from keras_transformer.validation import check_positive_int, check_rate


@keras.saving.register_keras_serializable(package="keras_transformer")
class Encoder(keras.layers.Layer):
    """Positional encoding, dropout, then `N` identical `EncoderLayer`s.

    The input is a sequence of embeddings (e.g. from `SharedEmbedding`, whose
    Keras mask marks the padding), so one embedding matrix can be shared with
    the decoder. With `norm_first=True` a final LayerNorm follows the stack.

    Args:
        num_layers: `N` (6 in the paper).
        num_heads: attention heads `h`.
        d_ff: inner size of the feed-forward networks.
        dropout: dropout rate on the embeddings and every sublayer.
        attention_dropout: dropout rate on the attention weights.
        max_length: longest sequence the positional encoding covers.
        learned_positions: learned positional embeddings instead of sinusoids.
        activation: activation of the feed-forward networks.
        norm_first: pre-LN instead of the paper's post-LN.
        layer_norm_epsilon: epsilon of the layer normalizations.
        kernel_initializer: initializer of every kernel (attention
            projections and feed-forward).
        bias_initializer: initializer of their biases.
        sliding_window: restricted self-attention (Table 1): each position
            attends only to positions less than `sliding_window` away.
        key_dim: d_k = d_v, the size of each attention head; default
            `d_model // num_heads` (Table 3, row B varies it alone).
        **kwargs: passed to `keras.layers.Layer`.

    Call arguments:
        x: `(B, S, D)` embeddings.
        mask: `(B, S)` padding mask; defaults to the Keras mask of `x`.
        training: whether dropout is active.
        return_attention_scores: also return a list with each layer's
            `(B, H, S, S)` self-attention weights.
        attention_mask: boolean `(B, S, S)` (or `(S, S)`), `True` = may
            attend, for every layer; combined with the padding mask.

    Returns:
        `(B, S, D)`, or `(outputs, scores)`.

    Example:

    >>> import numpy as np
    >>> from keras_transformer.layers import SharedEmbedding
    >>> ids = np.array([[5, 6, 7, 0]])
    >>> x = SharedEmbedding(vocab_size=10, d_model=8)(ids)
    >>> memory = Encoder(num_layers=2, num_heads=2, d_ff=16)(x)
    >>> tuple(memory.shape)
    (1, 4, 8)

    References:
        Vaswani et al. 2017, "Attention Is All You Need", sections 3.1, 5.4.
    """

    def __init__(
        self,
        num_layers=6,
        num_heads=8,
        d_ff=2048,
        dropout=0.1,
        attention_dropout=0.0,
        max_length=2048,
        learned_positions=False,
        activation="relu",
        norm_first=False,
        layer_norm_epsilon=1e-6,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        sliding_window=None,
        key_dim=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("num_layers", num_layers)
        check_positive_int("num_heads", num_heads)
        check_positive_int("d_ff", d_ff)
        check_rate("dropout", dropout)
        check_rate("attention_dropout", attention_dropout)
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.d_ff = d_ff
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.max_length = max_length
        self.learned_positions = learned_positions
        self.activation = activation
        self.norm_first = norm_first
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        if sliding_window is not None:
            check_positive_int("sliding_window", sliding_window)
        self.sliding_window = sliding_window
        if key_dim is not None:
            check_positive_int("key_dim", key_dim)
        self.key_dim = key_dim
        self.supports_masking = True

    def build(self, input_shape):
        self.positional_encoding = PositionalEncoding(
            self.max_length,
            learned=self.learned_positions,
            dtype=self.dtype_policy,
            name="positional_encoding",
        )
        self.positional_encoding.build(input_shape)
        self.embedding_dropout = keras.layers.Dropout(
            self.dropout, dtype=self.dtype_policy, name="embedding_dropout"
        )
        self.layers = []
        for i in range(self.num_layers):
            layer = EncoderLayer(
                self.num_heads,
                self.d_ff,
                dropout=self.dropout,
                attention_dropout=self.attention_dropout,
                activation=self.activation,
                norm_first=self.norm_first,
                layer_norm_epsilon=self.layer_norm_epsilon,
                sliding_window=self.sliding_window,
                key_dim=self.key_dim,
                kernel_initializer=self.kernel_initializer,
                bias_initializer=self.bias_initializer,
                dtype=self.dtype_policy,
                name=f"layer_{i}",
            )
            layer.build(input_shape)
            self.layers.append(layer)
        self.final_norm = None
        if self.norm_first:
            self.final_norm = keras.layers.LayerNormalization(
                epsilon=self.layer_norm_epsilon,
                dtype=self.dtype_policy,
                name="final_norm",
            )
            self.final_norm.build(input_shape)

    def call(
        self,
        x,
        mask=None,
        training=None,
        return_attention_scores=False,
        attention_mask=None,
    ):
        x = self.positional_encoding(x)
        x = self.embedding_dropout(x, training=training)
        scores = []
        for layer in self.layers:
            out = layer(
                x,
                mask=mask,
                attention_mask=attention_mask,
                training=training,
                return_attention_scores=return_attention_scores,
            )
            x = out[0] if return_attention_scores else out
            if return_attention_scores:
                scores.append(out[1])
        if self.final_norm is not None:
            x = self.final_norm(x)
        return (x, scores) if return_attention_scores else x

    def get_config(self):
        config = super().get_config()
        config.update(
            num_layers=self.num_layers,
            num_heads=self.num_heads,
            d_ff=self.d_ff,
            dropout=self.dropout,
            attention_dropout=self.attention_dropout,
            max_length=self.max_length,
            learned_positions=self.learned_positions,
            activation=self.activation,
            norm_first=self.norm_first,
            layer_norm_epsilon=self.layer_norm_epsilon,
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
            bias_initializer=keras.initializers.serialize(self.bias_initializer),
            sliding_window=self.sliding_window,
            key_dim=self.key_dim,
        )
        return config

    def compute_output_spec(self, *args, **kwargs):
        return keras.Operation.compute_output_spec(self, *args, **kwargs)

    def compute_output_shape(self, input_shape):
        return input_shape
