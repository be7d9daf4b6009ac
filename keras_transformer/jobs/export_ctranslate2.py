"""`keras-transformer export --format ctranslate2`: a CTranslate2 model.

CTranslate2 (an optional extra: `pip install 'keras-transformer-mt[ctranslate2]'`)
runs Transformer translation models in C++ with its own kernels. The
model's weights are written into CTranslate2's `TransformerSpec` one to one:

- the shared embedding matrix `U` is the encoder's and the decoder's
  embeddings (scaled by `sqrt(d_model)` there, as `SharedEmbedding` scales
  them) and the output projection's weight, without a bias (the file keeps
  one copy);
- the positional table (sinusoidal or learned) is written as it is, so
  CTranslate2 adds exactly ours rather than its own sinusoid layout;
- each `MultiHeadAttention`'s `(d_model, h, d_k)` query, key and value
  kernels become `(h * d_k, d_model)` Linear weights, fused into one
  query-key-value projection for self-attention and a key-value one for
  cross-attention; the output kernel `(h, d_k, d_model)` becomes
  `(d_model, h * d_k)`;
- the feed-forward network's kernel-1 convolutions `(1, in, out)` become
  `(out, in)` Linear weights; post-LN or pre-LN (`norm_first`, with the
  stacks' final LayerNorms) and the LayerNorm epsilon are kept.

The vocabulary is the SentencePiece pieces in id order, so each
CTranslate2 token is the id of the same number (`<pad>` 0, `<unk>` 1, `<s>`
2, `</s>` 3); CTranslate2 appends `</s>` to each source, as training did,
and starts the decoder with `<s>`. The tokenizer's `tokenizer.model` is
copied beside the model, so the directory is all `CTranslate2Translator`
needs.

Settings CTranslate2 cannot represent are refused with their name:
restricted self-attention (`sliding_window`), a quantized model (export
the float model: `quantization` quantizes for CTranslate2), activations
other than relu, gelu and silu.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from keras_transformer.token_ids import END_ID, PAD_ID, START_ID, UNK_ID

INSTALL = "pip install 'keras-transformer-mt[ctranslate2]'"
"""How to install CTranslate2 for this package (the `ctranslate2` extra)."""

CTRANSLATE2_FILES = frozenset(
    {
        "model.bin",
        "config.json",
        "shared_vocabulary.json",
        "source_vocabulary.json",
        "target_vocabulary.json",
        "tokenizer.model",
    }
)
"""The files of a directory this module writes (`model.bin` always)."""

_ACTIVATIONS = {"relu": "RELU", "gelu": "GELU", "silu": "SWISH"}


def import_ctranslate2():
    """The `ctranslate2` module, or an `ImportError` that says how to get it."""
    try:
        import ctranslate2
    except ImportError:
        raise ImportError(f"CTranslate2 is not installed: {INSTALL}") from None
    return ctranslate2


def export_ctranslate2(
    model_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    quantization: str | None = None,
    overwrite: bool = False,
) -> str:
    """Writes the model in `model_dir` as a CTranslate2 model to `out_dir`.

    The directory is written under a temporary name and renamed when
    complete; an existing one is replaced only if it is an earlier
    CTranslate2 export and `overwrite` is set.

    Args:
        model_dir: a directory written by `keras-transformer train`.
        out_dir: a new or empty directory, or with `overwrite` an earlier
            CTranslate2 export.
        quantization: CTranslate2's weight type (`"int8"`, `"int16"`,
            `"float16"`, `"bfloat16"`, ...); None keeps float32.
        overwrite: replace a CTranslate2 model already at `out_dir`.

    Returns:
        `out_dir`.

    Raises:
        ImportError: CTranslate2 is not installed.
        FileExistsError: `out_dir` is a file, a directory of other files, or
            a CTranslate2 model without `overwrite`.
        ValueError: the model has a setting CTranslate2 cannot represent.
    """
    from keras_transformer.jobs.export import check_destination, replace_with
    from keras_transformer.jobs.run_dir import load_trained

    import_ctranslate2()
    out = Path(os.path.abspath(out_dir))  # `.`, `..` and `x/` have a name
    check_destination(
        out, overwrite, CTRANSLATE2_FILES, "model.bin", "CTranslate2 model", out_dir
    )
    model, tokenizer = load_trained(model_dir)
    temporary = out.with_name(f"{out.name}.tmp-export")
    shutil.rmtree(temporary, ignore_errors=True)
    try:
        write_ctranslate2(model, tokenizer, temporary, quantization)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    replace_with(temporary, out)
    return str(out)


def write_ctranslate2(
    model: Any,
    tokenizer: Any,
    directory: str | os.PathLike,
    quantization: str | None = None,
) -> None:
    """Writes `model` and `tokenizer` as a CTranslate2 model into `directory`.

    `model.bin`, `config.json` and `shared_vocabulary.json` are
    CTranslate2's; `tokenizer.model` is the tokenizer's SentencePiece model.

    Args:
        model: a `keras_transformer.models.Transformer`.
        tokenizer: its `keras_transformer.data.Tokenizer`.
        directory: created if needed; files of these names are replaced.
        quantization: CTranslate2's weight type, or None for float32.

    Raises:
        ValueError: a setting CTranslate2 cannot represent, named.
    """
    spec = transformer_spec(model, tokenizer)
    spec.validate()
    spec.optimize(quantization=quantization)
    os.makedirs(directory, exist_ok=True)
    spec.save(os.fspath(directory))
    tokenizer.save(directory)


def transformer_spec(model: Any, tokenizer: Any):
    """CTranslate2's `TransformerSpec` holding `model`'s weights.

    Args:
        model: a built `keras_transformer.models.Transformer`.
        tokenizer: its `keras_transformer.data.Tokenizer`.

    Returns:
        A `ctranslate2.specs.TransformerSpec` (call `validate`, `optimize`
        and `save` to write it, as `export_ctranslate2` does).

    Raises:
        ValueError: a setting CTranslate2 cannot represent, named.
    """
    ctranslate2 = import_ctranslate2()
    specs = ctranslate2.specs
    _check_supported(model, tokenizer)
    layer = model.encoder.layers[0]
    activation = _activation_name(layer.feed_forward.activation)
    options = dict(
        pre_norm=bool(model.norm_first),
        activation=getattr(specs.Activation, _ACTIVATIONS[activation]),
        head_dim=layer.self_attention.key_dim,
    )
    spec = specs.TransformerSpec(
        specs.TransformerEncoderSpec(model.num_layers, model.num_heads, **options),
        specs.TransformerDecoderSpec(model.num_layers, model.num_heads, **options),
    )
    # U, (V, D): both stacks' embeddings and the output projection, no bias.
    embeddings = _numpy(model.embedding.embeddings)
    spec.encoder.embeddings[0].weight = embeddings
    spec.decoder.embeddings.weight = embeddings
    spec.decoder.projection.weight = embeddings
    for stack, stack_spec in (
        (model.encoder, spec.encoder),
        (model.decoder, spec.decoder),
    ):
        # CTranslate2 adds row t of the table at position t, from 0.
        table = stack.positional_encoding.table  # (max_length, D)
        stack_spec.position_encodings.encodings = _numpy(table)
        for layer, layer_spec in zip(stack.layers, stack_spec.layer, strict=True):
            _set_attention(layer_spec.self_attention, layer.self_attention, fused=3)
            _set_norm(layer_spec.self_attention.layer_norm, layer.self_attention_norm)
            if stack is model.decoder:
                _set_attention(layer_spec.attention, layer.cross_attention, fused=2)
                _set_norm(layer_spec.attention.layer_norm, layer.cross_attention_norm)
            _set_feed_forward(layer_spec.ffn, layer.feed_forward)
            _set_norm(layer_spec.ffn.layer_norm, layer.feed_forward_norm)
        if stack.final_norm is not None:  # pre-LN
            _set_norm(stack_spec.layer_norm, stack.final_norm)
    pieces = [tokenizer.id_to_token(i) for i in range(tokenizer.vocab_size)]
    spec.register_source_vocabulary(pieces)
    spec.register_target_vocabulary(pieces)
    config = spec.config
    config.unk_token = pieces[UNK_ID]
    config.bos_token = config.decoder_start_token = pieces[START_ID]
    config.eos_token = pieces[END_ID]
    config.add_source_bos, config.add_source_eos = False, True
    config.layer_norm_epsilon = float(layer.layer_norm_epsilon)
    # Ours, for `CTranslate2Translator`: the longest source and output.
    config.add_attribute("max_length", int(model.max_length))
    return spec


def _check_supported(model: Any, tokenizer: Any) -> None:
    from keras_transformer.models import Transformer

    if not isinstance(model, Transformer):
        raise ValueError(
            "CTranslate2 export takes a keras_transformer Transformer. "
            f"Received: {type(model).__name__}"
        )
    if model.sliding_window is not None:
        raise ValueError(
            "CTranslate2 has no restricted self-attention: the model sets "
            f"sliding_window={model.sliding_window}"
        )
    modes = {layer.quantization_mode for layer in model._quantizable_layers()}
    modes.discard(None)
    if modes:
        raise ValueError(
            f"The model is quantized ({', '.join(sorted(modes))}): export the "
            "float model, with CTranslate2's --quantization if wanted"
        )
    if tokenizer.vocab_size != model.vocab_size:
        raise ValueError(
            f"The tokenizer has {tokenizer.vocab_size} ids and the model "
            f"{model.vocab_size}: they are not of one run"
        )
    layers = [*model.encoder.layers, *model.decoder.layers]
    names = sorted(
        {_activation_name(layer.feed_forward.activation) for layer in layers}
    )
    if len(names) > 1 or names[0] not in _ACTIVATIONS:
        raise ValueError(
            f"CTranslate2 takes one activation of {sorted(_ACTIVATIONS)} per "
            f"model; the model's feed-forward networks use {names}"
        )
    epsilons = sorted({float(layer.layer_norm_epsilon) for layer in layers})
    if len(epsilons) > 1:
        raise ValueError(
            "CTranslate2 takes one LayerNorm epsilon per model; the model's "
            f"layers use {epsilons}"
        )


def _activation_name(activation) -> str:
    import keras

    name = keras.activations.serialize(activation)
    return {"swish": "silu"}.get(name, name) if isinstance(name, str) else str(name)


def _numpy(weight) -> np.ndarray:
    """A Keras variable (or a NumPy table) as float32, whatever its dtype."""
    value = weight.numpy() if hasattr(weight, "numpy") else weight
    return np.asarray(value, dtype=np.float32)


def _set_attention(spec, attention, fused: int) -> None:
    """Keras `EinsumDense` kernels -> CTranslate2 `(out, in)` Linear weights.

    `fused=3`: one query-key-value projection (self-attention); `fused=2`:
    a query projection and a key-value one (cross-attention).
    """
    projections = []
    for dense in (attention.query_dense, attention.key_dense, attention.value_dense):
        kernel = _numpy(dense.kernel)  # (D, H, K)
        weight = kernel.reshape(kernel.shape[0], -1).T  # (H * K, D)
        projections.append((weight, _numpy(dense.bias).reshape(-1)))
    groups = [projections] if fused == 3 else [projections[:1], projections[1:]]
    for linear, group in zip(spec.linear, groups, strict=False):
        linear.weight = np.concatenate([w for w, _ in group], axis=0)
        linear.bias = np.concatenate([b for _, b in group], axis=0)
    kernel = _numpy(attention.output_dense.kernel)  # (H, K, D)
    spec.linear[-1].weight = kernel.reshape(-1, kernel.shape[-1]).T  # (D, H * K)
    spec.linear[-1].bias = _numpy(attention.output_dense.bias)


def _set_feed_forward(spec, feed_forward) -> None:
    for linear, conv in (
        (spec.linear_0, feed_forward.inner),
        (spec.linear_1, feed_forward.outer),
    ):
        linear.weight = _numpy(conv.kernel)[0].T  # (1, in, out) -> (out, in)
        linear.bias = _numpy(conv.bias)


def _set_norm(spec, norm) -> None:
    spec.gamma = _numpy(norm.gamma)
    spec.beta = _numpy(norm.beta)


class CTranslate2Translator:
    """Translates with a CTranslate2 model written by `export_ctranslate2`.

    Sources are handled as `Translator` handles them: tokenized by our
    tokenizer (the `tokenizer.model` in the directory), cut to
    `max_length - 1` tokens (CTranslate2 appends the end token), an empty
    one translates to an empty string without a search, and each output may
    be the source's length + 50 tokens long, end included, and at most the
    model's `max_length`. Padding and start ids are never generated; an
    end id may be the first. The output ids are detokenized by our
    tokenizer.

    With `beam_size=1` the translations are `Translator`'s greedy ones. In
    beam search CTranslate2 divides a finished hypothesis's log-probability
    by `length ** length_penalty` (its length without the end token), not
    by GNMT's `((5 + length) / 6) ** alpha`: with `length_penalty=0` and
    `Translator(alpha=0)` both rank by log-probability and give the same
    translations; with a penalty they may differ.

    Args:
        directory: a directory written by `export_ctranslate2`.
        intra_threads: CPU threads per translation (0: CTranslate2's default).
        compute_type: CTranslate2's compute type (`"default"`: the weights').

    Call arguments:
        sentences: the sentences (a list of `str`).
        beam_size: beam size, 1 for greedy search.
        length_penalty: CTranslate2's length penalty exponent.
        max_batch_size: sentences per CTranslate2 batch (0: all at once).

    Returns:
        One translation per sentence, in order.

    Example:

    >>> import tempfile
    >>> from keras_transformer.data import Tokenizer
    >>> from keras_transformer.models import Transformer
    >>> tokenizer = Tokenizer.train(["two cats", "zwei Katzen"] * 20, vocab_size=300)
    >>> model = Transformer(vocab_size=tokenizer.vocab_size, num_layers=1,
    ...                     d_model=8, num_heads=2, d_ff=16, max_length=16)
    >>> model.build()
    >>> directory = tempfile.mkdtemp()
    >>> write_ctranslate2(model, tokenizer, directory)
    >>> translator = CTranslate2Translator(directory)
    >>> out = translator(["two cats", ""], beam_size=1)
    >>> len(out), out[1]
    (2, '')
    """

    def __init__(
        self,
        directory: str | os.PathLike,
        intra_threads: int = 0,
        compute_type: str = "default",
    ) -> None:
        import json

        from keras_transformer.data import Tokenizer

        ctranslate2 = import_ctranslate2()
        directory = Path(directory)
        config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
        if "max_length" not in config:
            raise ValueError(
                f"{str(directory)!r} is not a model of export_ctranslate2 (its "
                "config.json has no max_length)"
            )
        self.max_length = int(config["max_length"])
        self.tokenizer = Tokenizer.load(directory)
        self.translator = ctranslate2.Translator(
            str(directory),
            device="cpu",
            intra_threads=intra_threads,
            compute_type=compute_type,
        )
        self._pieces = [
            self.tokenizer.id_to_token(i) for i in range(self.tokenizer.vocab_size)
        ]
        self._ids = {piece: i for i, piece in enumerate(self._pieces)}

    def __call__(
        self,
        sentences: Sequence[str],
        beam_size: int = 4,
        length_penalty: float = 0.0,
        max_batch_size: int = 0,
    ) -> list[str]:
        import tensorflow as tf

        from keras_transformer.decoding.search_utils import EXTRA_LENGTH

        sentences = list(sentences)
        if not sentences:
            return []
        ids = self.tokenizer.tokenize(tf.constant(sentences, tf.string)).to_list()
        sources = [[self._pieces[i] for i in row[: self.max_length - 1]] for row in ids]
        # Each sentence's output limit is its own, as in our search: one
        # call per limit (below max_length, sentences of one length, so
        # batches without padding). A source's length counts the end token.
        limits = [min(len(s) + 1 + EXTRA_LENGTH, self.max_length) for s in sources]
        outputs = [[] for _ in sentences]
        for limit in sorted(set(limits)):
            rows = [i for i, n in enumerate(limits) if n == limit and sources[i]]
            if not rows:
                continue
            results = self.translator.translate_batch(
                [sources[i] for i in rows],
                beam_size=beam_size,
                length_penalty=length_penalty,
                max_batch_size=max_batch_size,
                max_input_length=0,
                max_decoding_length=limit,
                min_decoding_length=0,
                suppress_sequences=[[self._pieces[PAD_ID]], [self._pieces[START_ID]]],
            )
            for i, result in zip(rows, results, strict=True):
                outputs[i] = [self._ids[t] for t in result.hypotheses[0]]
        batch = np.zeros((len(outputs), max(1, *map(len, outputs))), np.int32)
        for row, tokens in enumerate(outputs):
            batch[row, : len(tokens)] = tokens
        text = self.tokenizer.detokenize(tf.constant(batch)).numpy()
        return [t.decode("utf-8") for t in text]
