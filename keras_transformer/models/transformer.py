"""The Transformer, Figure 1 of the paper."""

import keras
from keras import ops

from keras_transformer.layers import (
    Decoder,
    Encoder,
    SharedEmbedding,
)
from keras_transformer.layers.masking import padding_mask
from keras_transformer.models.presets import PRESETS

# The dtypes `projection_dtype` may name.
PROJECTION_DTYPES = ("float32", "float16", "bfloat16")


@keras.saving.register_keras_serializable(package="keras_transformer")
class Transformer(keras.Model):
    """Encoder-decoder Transformer for translation with one shared vocabulary.

    Source and target share one subword vocabulary and one embedding matrix,
    used three times: encoder input, decoder input and the pre-softmax
    projection (section 3.4). Id 0 is padding.

    Args:
        vocab_size: size of the shared vocabulary.
        num_layers: `N`, layers in each of the encoder and decoder stacks.
        d_model: model dimension.
        num_heads: attention heads `h`; must divide `d_model`.
        d_ff: inner size of the feed-forward networks.
        dropout: `P_drop`, on embeddings and every sublayer's output.
        max_length: longest source or target sequence.
        learned_positions: learned positional embeddings (Table 3, row E).
        norm_first: pre-LN sublayers instead of the paper's post-LN.
        attention_dropout: dropout on attention weights (0 in the paper).
        sliding_window: restricted self-attention (Table 1, row 4): each
            position attends only to positions less than `sliding_window`
            away, in the encoder and decoder self-attention; `None` = full.
        key_dim: d_k = d_v, the size of each attention head; default
            `d_model // num_heads` (Table 3, row B varies it alone).
        activation_dropout: dropout inside the feed-forward networks, after
            the activation (0 in the paper).
        word_dropout: the rate at which whole token embeddings of the
            source and the decoder's input are zeroed in training, before
            the positions are added (word dropout, Sennrich and Zhang
            2019; Marian's `--dropout-src`/`--dropout-trg`); 0 in the paper.
        projection_dtype: dtype of the product of the pre-softmax
            projection, the model's largest; `None` = the compute dtype, as
            every other product. "float32" under a mixed policy keeps it
            full precision (the logits are float32 either way).
        **kwargs: passed to `keras.Model` (e.g. `name`, `dtype`).

    Call arguments:
        inputs: `(source_ids, target_in)`, integer `(B, S)` and `(B, T)`.
        training: whether dropout is active.
        return_attention_scores: also return `{"encoder": [...],
            "decoder_self": [...], "decoder_cross": [...]}`, one
            `(B, H, ., .)` tensor per layer.

    Returns:
        float32 logits `(B, T, vocab_size)` (and the scores if asked).

    Example:

    >>> import numpy as np
    >>> model = Transformer.from_preset("tiny", vocab_size=100)
    >>> logits = model((np.array([[5, 6, 7, 3]]), np.array([[2, 8, 9]])))
    >>> tuple(logits.shape)
    (1, 3, 100)

    References:
        Vaswani et al. 2017, "Attention Is All You Need", section 3, Figure 1.
    """

    def __init__(
        self,
        vocab_size,
        num_layers=6,
        d_model=512,
        num_heads=8,
        d_ff=2048,
        dropout=0.1,
        max_length=256,
        learned_positions=False,
        norm_first=False,
        attention_dropout=0.0,
        sliding_window=None,
        key_dim=None,
        activation_dropout=0.0,
        projection_dtype=None,
        word_dropout=0.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not 0 <= word_dropout < 1:
            raise ValueError(
                "word_dropout must be >= 0 and < 1. "
                f"Received: word_dropout={word_dropout}"
            )
        if projection_dtype not in (None, *PROJECTION_DTYPES):
            raise ValueError(
                f"projection_dtype must be None or one of {PROJECTION_DTYPES}. "
                f"Received: projection_dtype={projection_dtype!r}"
            )
        # The sublayers check their other arguments.
        # Keras keeps the tied matrix in its variable dtype, so without
        # `reverse_dtype` the projection to the vocabulary would run in
        # float32 under mixed precision; the logits are cast to float32
        # before the softmax (`decode`).
        self.embedding = SharedEmbedding(
            vocab_size,
            d_model,
            reverse_dtype=projection_dtype or self.compute_dtype,
            dtype=self.dtype_policy,
            name="embedding",
        )
        stack = dict(
            num_layers=num_layers,
            num_heads=num_heads,
            d_ff=d_ff,
            dropout=dropout,
            attention_dropout=attention_dropout,
            max_length=max_length,
            learned_positions=learned_positions,
            norm_first=norm_first,
            sliding_window=sliding_window,
            key_dim=key_dim,
            activation_dropout=activation_dropout,
            dtype=self.dtype_policy,
        )
        # One mask value per token, shared by its d_model features.
        self.word_dropout_layer = None
        if word_dropout:
            self.word_dropout_layer = keras.layers.Dropout(
                word_dropout,
                noise_shape=(None, None, 1),
                dtype=self.dtype_policy,
                name="word_dropout",
            )
        self.encoder = Encoder(name="encoder", **stack)
        self.decoder = Decoder(name="decoder", **stack)
        if d_model % num_heads:
            raise ValueError(
                "d_model must be divisible by num_heads. "
                f"Received: d_model={d_model}, num_heads={num_heads}"
            )
        self.vocab_size = vocab_size
        self.num_layers = num_layers
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_ff = d_ff
        self.dropout = dropout
        self.max_length = max_length
        self.learned_positions = learned_positions
        self.norm_first = norm_first
        self.attention_dropout = attention_dropout
        self.sliding_window = sliding_window
        self.key_dim = key_dim
        self.activation_dropout = activation_dropout
        self.projection_dtype = projection_dtype
        self.word_dropout = word_dropout

    @classmethod
    def from_preset(cls, name, vocab_size, **overrides):
        """A model of a named size from `PRESETS`, e.g. "base" or "big".

        Args:
            name: preset name: "base", "big" (the paper's Table 3), "small" or
                "tiny" (for CPUs).
            vocab_size: size of the shared vocabulary.
            **overrides: any other `Transformer` argument.

        Returns:
            An unbuilt `Transformer`.
        """
        if name not in PRESETS:
            raise ValueError(
                f"Unknown preset. Received: name={name!r}; "
                f"expected one of {sorted(PRESETS)}"
            )
        return cls(vocab_size=vocab_size, **{**PRESETS[name], **overrides})

    def build(self, input_shape=None):
        hidden = (None, None, self.d_model)
        self.embedding.build()
        self.encoder.build(hidden)
        self.decoder.build(hidden, hidden)
        self.built = True

    def _build_on_first_use(self):
        # `encode`, `decode` and `init_cache` may come before the first call
        # (e.g. a search on a new model): the whole model is built at once,
        # as `build` makes it, not one sublayer at a time.
        if not self.built:
            self.build()

    def call(self, inputs, training=None, return_attention_scores=False):
        source_ids, target_in = inputs
        encoded = self.encode(
            source_ids,
            training=training,
            return_attention_scores=return_attention_scores,
        )
        memory, source_mask = encoded[:2]
        out = self.decode(
            target_in,
            memory,
            source_mask,
            training=training,
            return_attention_scores=return_attention_scores,
        )
        if not return_attention_scores:
            return out
        logits, decoder_scores = out
        return logits, {
            "encoder": encoded[2],
            "decoder_self": decoder_scores["self_attention"],
            "decoder_cross": decoder_scores["cross_attention"],
        }

    def encode(self, source_ids, training=False, return_attention_scores=False):
        """Runs the encoder stack once per sentence.

        Args:
            source_ids: integer `(B, S)`, 0 = padding.
            training: whether dropout is active.
            return_attention_scores: also return the per-layer weights.

        Returns:
            `(memory (B, S, D), source_mask (B, S))`, plus the scores if asked.
        """
        self._build_on_first_use()
        source_ids = _as_ids("source_ids", source_ids)
        source_mask = padding_mask(source_ids)
        x = self.embedding(source_ids)
        x = self._drop_words(x, training)  # 0 by default: x unchanged
        out = self.encoder(
            x,
            mask=source_mask,
            training=training,
            return_attention_scores=return_attention_scores,
        )
        if return_attention_scores:
            return out[0], source_mask, out[1]
        return out, source_mask

    def decode(
        self,
        target_ids,
        memory,
        source_mask,
        cache=None,
        cache_index=None,
        training=False,
        return_attention_scores=False,
    ):
        """Target logits given the encoder output: teacher forcing or one step.

        Args:
            target_ids: integer `(B, T)`: the whole shifted target, or with
                `cache` the new position(s) starting at `cache_index`.
            memory: `(B, S, D)` from `encode`.
            source_mask: `(B, S)` from `encode`.
            cache: per-layer caches from `init_cache`, or `None`.
            cache_index: position of `target_ids[:, 0]` when using `cache`.
            training: whether dropout is active.
            return_attention_scores: also return the decoder's weights.

        Returns:
            float32 logits `(B, T, vocab_size)`; with
            `return_attention_scores`, `(logits, scores)`; with `cache`,
            `(logits, updated cache)` (not both).
        """
        self._build_on_first_use()
        target_ids = _as_ids("target_ids", target_ids)
        x = self.embedding(target_ids)
        x = self._drop_words(x, training)  # 0 by default: x unchanged
        out = self.decoder(
            x,
            memory,
            x_mask=padding_mask(target_ids),
            memory_mask=source_mask,
            cache=cache,
            cache_index=cache_index,
            training=training,
            return_attention_scores=return_attention_scores,
        )
        x, extra = out if cache is not None or return_attention_scores else (out, None)
        # Pre-softmax projection with the shared matrix; softmax in float32.
        logits = ops.cast(self.embedding(x, reverse=True), "float32")
        return logits if extra is None else (logits, extra)

    def _drop_words(self, embedded, training):
        if self.word_dropout_layer is None:
            return embedded
        return self.word_dropout_layer(embedded, training=training)

    def init_cache(self, memory, max_length):
        """Key/value caches for decoding up to `max_length` target positions."""
        self._build_on_first_use()
        return self.decoder.init_cache(memory, max_length)

    def enable_lora(self, rank, lora_alpha=None):
        """LoRA on every attention's query and value projections.

        Every other weight is frozen: training then updates only the
        low-rank factors (Hu et al. 2021), which start at zero, so the
        model's outputs are unchanged until it trains. `save` merges them
        into the kernels.

        Args:
            rank: rank of the low-rank update.
            lora_alpha: its scale is `lora_alpha / rank`; default `rank`.
        """
        for variable in self.variables:
            variable.trainable = False
        for layer in self._attention_layers():
            layer.enable_lora(rank, lora_alpha=lora_alpha)

    def get_config(self):
        config = super().get_config()
        config.update(
            vocab_size=self.vocab_size,
            num_layers=self.num_layers,
            d_model=self.d_model,
            num_heads=self.num_heads,
            d_ff=self.d_ff,
            dropout=self.dropout,
            max_length=self.max_length,
            learned_positions=self.learned_positions,
            norm_first=self.norm_first,
            attention_dropout=self.attention_dropout,
            sliding_window=self.sliding_window,
            key_dim=self.key_dim,
            activation_dropout=self.activation_dropout,
            projection_dtype=self.projection_dtype,
            word_dropout=self.word_dropout,
        )
        quantized = {
            layer.path: layer.dtype_policy
            for layer in self._quantizable_layers()
            if layer.quantization_mode is not None
        }
        if quantized:
            # After `quantize`: a policy per quantized layer, so a loaded
            # model builds them quantized (layers pass `dtype` on).
            default = self.dtype_policy
            if isinstance(default, keras.dtype_policies.DTypePolicyMap):
                default = default.default_policy
            policies = keras.dtype_policies.DTypePolicyMap(default)
            for path, policy in quantized.items():
                policies[path] = policy
            config["dtype"] = keras.dtype_policies.serialize(policies)
        return config

    def _attention_layers(self):
        """Every `MultiHeadAttention` of the two stacks (none before build)."""
        if not self.built:
            return
        for stack in (self.encoder, self.decoder):
            for layer in stack.layers:
                yield layer.self_attention
                if getattr(layer, "cross_attention", None) is not None:
                    yield layer.cross_attention

    def _quantizable_layers(self):
        """The layers `quantize` may change: embedding and projections."""
        yield self.embedding
        if not self.built:
            return
        for attention in self._attention_layers():
            yield from (
                attention.query_dense,
                attention.key_dense,
                attention.value_dense,
                attention.output_dense,
            )
        for stack in (self.encoder, self.decoder):
            for layer in stack.layers:
                yield from (layer.feed_forward.inner, layer.feed_forward.outer)

    def compute_output_shape(self, input_shape):
        source_shape, target_shape = input_shape
        return (*target_shape, self.vocab_size)


def _as_ids(name, ids):
    """`ids` as integers, as Keras's `Embedding` takes them.

    Float ids (the placeholders Keras builds a subclassed model with on
    `load_model`, or the averaged first batches of a `MirroredStrategy`'s
    symbolic build) are cast; anything else must be integer.
    """
    dtype = str(getattr(ids, "dtype", ""))
    if "float" in dtype:
        ids = ops.cast(ids, "int32")
    elif "int" not in dtype:
        raise ValueError(f"`{name}` must be integer token ids. Received: dtype={dtype}")
    if len(ids.shape) != 2:
        raise ValueError(
            f"`{name}` must have shape (batch_size, seq_len). "
            f"Received: {name}.shape={tuple(ids.shape)}"
        )
    return ids
