"""Training recipes as YAML files, checked against one schema.

A recipe has five sections and `output_dir`. Every key has a default, so an
empty file is a valid recipe (the built-in corpus with the "tiny" model).
The schema below (pydantic models) is the one source of truth: it checks
exact types (no string for a number, no float for an integer, no string for
a boolean), ranges and choices, `model.overrides` against the model's own
arguments, and what keys depend on each other; `docs/config.md`, the
reference of every key, is generated from it (`python -m
keras_transformer.config > docs/config.md`). An invalid recipe raises
`ConfigError`, one line naming the dotted key and the value, and for an
unknown key the closest valid one (for a key an earlier version had, the
key it became). Numbers are finite (no `.inf` or `.nan`), and a key
given twice in the file is an error naming it and its line.

Example:

>>> config = config_from_dict({"model": {"preset": "small"}})
>>> config.model.preset, config.training.warmup_steps
('small', 4000)
>>> try:
...     config_from_dict({"training": {"stepz": 5}})
... except ConfigError as error:
...     print(error)
config: unknown key training.stepz; did you mean training.steps?
"""

from __future__ import annotations

import difflib
import inspect
import os
import types
import typing
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from keras_transformer.models.presets import PRESETS
from keras_transformer.models.transformer import PROJECTION_DTYPES

FIXED_CORPORA = ("builtin", "multi30k", "files")
MIN_VOCAB_SIZE = 261
"""4 reserved ids, 256 byte pieces (byte fallback) and at least a character."""
RENAMED = {
    "evaluation.batch_size": (
        "evaluation.batch_tokens",
        "source tokens per beam-search batch, not sentences",
    ),
}
"""Keys of earlier versions: the key each became, and what it means now."""


class ConfigError(ValueError):
    """An invalid recipe: the message names the key and the value."""


class _Section(BaseModel):
    # Numbers are finite: `.inf` and `.nan` are refused like any bad value.
    model_config = ConfigDict(
        extra="forbid", strict=True, validate_assignment=True, allow_inf_nan=False
    )


class DataConfig(_Section):
    """`data`: the parallel corpus and how long its sentences may be."""

    corpus: str = Field(
        "builtin",
        description="builtin, multi30k, files, or tfds:NAME (a TFDS data set)",
    )
    data_dir: str | None = Field(
        None,
        description="multi30k, tfds: an existing directory with the data; "
        "null downloads it to the default cache",
    )
    source_lang: str = Field("en", description="source language code")
    target_lang: str = Field("de", description="target language code")
    train_files: list[str] | None = Field(
        None, description="files: [source_path, target_path] (required)"
    )
    valid_files: list[str] | None = Field(
        None, description="files: [source_path, target_path]"
    )
    test_files: list[str] | None = Field(
        None, description="files: [source_path, target_path]"
    )
    max_length: int = Field(
        64,
        ge=1,
        description="longest sentence kept, in tokens; longer pairs "
        "are dropped and counted",
    )
    seed: int = Field(0, ge=0, description="seed of the built-in corpus")
    prepared_dir: str | None = Field(
        None,
        description="where the training pairs are tokenized once into "
        "length-bucketed shards (and the tokenizer trained on them kept), "
        "reused by later runs and by every worker; named by what they are "
        "made of, so never stale; null: output_dir/prepared",
    )
    shuffle_buffer: int = Field(
        65536,
        ge=1,
        description="pairs of a length bucket shuffled together in memory "
        "(rounded down to whole chunks, at least one); an epoch reads a "
        "bucket's chunks in a random order",
    )
    chunk_pairs: int = Field(
        4096, ge=1, description="pairs per chunk file of the prepared shards"
    )

    @field_validator("corpus")
    @classmethod
    def _known_corpus(cls, corpus: str) -> str:
        if corpus in FIXED_CORPORA or (corpus.startswith("tfds:") and corpus[5:]):
            return corpus
        raise ValueError("expected builtin, multi30k, files or tfds:NAME")

    @field_validator("train_files", "valid_files", "test_files")
    @classmethod
    def _a_pair(cls, files: list[str] | None) -> list[str] | None:
        if files is not None and len(files) != 2:
            raise ValueError("expected [source_path, target_path]")
        return files

    @model_validator(mode="after")
    def _files_need_train_files(self) -> DataConfig:
        if self.corpus == "files" and self.train_files is None:
            raise _KeyError("train_files", None, "required when data.corpus is files")
        return self


class TokenizerConfig(_Section):
    """`tokenizer`: the shared SentencePiece vocabulary."""

    vocab_size: int = Field(
        8000,
        ge=MIN_VOCAB_SIZE,
        description="ids in the shared source and target vocabulary: 4 reserved, "
        "256 bytes, one per character of the corpus, then pieces",
    )
    path: str | None = Field(
        None, description="a saved tokenizer to use instead of training one"
    )
    sample_sentences: int = Field(
        2_000_000,
        ge=1,
        description="the tokenizer trains on a uniform random sample of this "
        "many training sentences, source and target (all, when fewer)",
    )
    sampling_alpha: float = Field(
        0.0,
        ge=0,
        le=1,
        description="subword regularization (Kudo, 2018): the training pairs' "
        "segmentations are drawn with this smoothing instead of the best one "
        "(smaller is more varied; 0: off); validation and translation keep "
        "the best segmentation",
    )
    sampling_views: int = Field(
        16,
        ge=1,
        description="with sampling_alpha: segmentations drawn per training "
        "pair (from training.seed), prepared once; epoch e reads the e-th "
        "modulo this",
    )

    @field_validator("vocab_size", mode="before")
    @classmethod
    def _room_for_bytes(cls, size: Any) -> Any:
        if type(size) is int and size < MIN_VOCAB_SIZE:
            raise ValueError(
                f"expected >= {MIN_VOCAB_SIZE}: 4 reserved ids, 256 bytes and "
                "at least one character"
            )
        return size


class ModelOverrides(_Section):
    """`model.overrides`: `Transformer` arguments that replace the preset's."""

    num_layers: int | None = Field(None, ge=1, description="N, layers per stack")
    d_model: int | None = Field(None, ge=1, description="model dimension")
    num_heads: int | None = Field(None, ge=1, description="attention heads h")
    d_ff: int | None = Field(None, ge=1, description="feed-forward inner size")
    dropout: float | None = Field(None, ge=0, lt=1, description="P_drop")
    max_length: int | None = Field(
        None,
        ge=1,
        description="longest sequence the model takes (default: "
        "data.max_length, at least 64)",
    )
    learned_positions: bool | None = Field(
        None, description="learned positional embeddings instead of sinusoids"
    )
    norm_first: bool | None = Field(None, description="pre-LN sublayers")
    attention_dropout: float | None = Field(
        None, ge=0, lt=1, description="dropout on attention weights"
    )
    activation_dropout: float | None = Field(
        None,
        ge=0,
        lt=1,
        description="dropout inside the feed-forward networks, after the activation",
    )
    word_dropout: float | None = Field(
        None,
        ge=0,
        lt=1,
        description="rate at which whole token embeddings (source and "
        "decoder input) are zeroed in training",
    )
    key_dim: int | None = Field(
        None, ge=1, description="d_k = d_v per head (default: d_model / num_heads)"
    )
    sliding_window: int | None = Field(
        None,
        ge=1,
        description="restricted self-attention: attend only to positions "
        "less than this far away (default: all)",
    )

    projection_dtype: Literal[PROJECTION_DTYPES] | None = Field(  # type: ignore[valid-type]
        None,
        description="dtype of the pre-softmax projection's product (default: "
        "the compute dtype of training.mixed_precision)",
    )

    def given(self) -> dict[str, Any]:
        """The overrides the recipe sets."""
        return self.model_dump(exclude_none=True)


class ModelConfig(_Section):
    """`model`: a preset size, and arguments that replace the preset's."""

    preset: Literal[tuple(PRESETS)] = Field(  # type: ignore[valid-type]
        "tiny", description="base, big (the paper's), small or tiny"
    )
    overrides: ModelOverrides = Field(
        default_factory=ModelOverrides,
        description="any Transformer argument, e.g. {num_layers: 3}",
    )

    @model_validator(mode="after")
    def _heads_divide_width(self) -> ModelConfig:
        params = {**PRESETS[self.preset], **self.overrides.given()}
        if params["d_model"] % params["num_heads"]:
            raise _KeyError(
                "overrides.num_heads",
                params["num_heads"],
                f"must divide d_model={params['d_model']}",
            )
        return self

    def arguments(self, vocab_size: int, data_max_length: int) -> dict[str, Any]:
        """`Transformer` keyword arguments: preset, then overrides."""
        return {
            "vocab_size": vocab_size,
            **PRESETS[self.preset],
            "max_length": max(data_max_length, 64),
            **self.overrides.given(),
        }


# The names of the Transformer's weights (`keras.Variable.name`), which
# `training.weight_decay_exclude` picks from.
WEIGHT_NAMES = ("kernel", "bias", "gamma", "beta", "embeddings", "position_embeddings")


class TrainingConfig(_Section):
    """`training`: batches, schedule, budget, distribution, checkpoints."""

    token_budget: int = Field(
        4096, ge=1, description="source (and target) token positions per batch"
    )
    warmup_steps: int = Field(4000, ge=1, description="warm-up of the schedule")
    lr_scale: float = Field(1.0, gt=0, description="multiplies the paper's rate")
    cooldown_steps: int = Field(
        0,
        ge=0,
        description="the rate falls linearly over the last this many of "
        "training.steps, to zero just after the last (0: off, the paper); "
        "another training.steps moves the line, and minutes or epochs that "
        "end the run first cut it short",
    )
    label_smoothing: float = Field(0.1, ge=0, lt=1, description="epsilon_ls")
    rdrop_alpha: float = Field(
        0.0,
        ge=0,
        description="R-Drop: each batch runs twice (other dropout masks) and this "
        "weighs the two predictions' symmetric KL divergence (Liang et al. 2021; "
        "a step costs about two; 0: off, the paper)",
    )
    bidirectional_epochs: int = Field(
        0,
        ge=0,
        description="bidirectional training (Ding et al. 2021): the first this "
        "many epochs read each pair in a direction drawn at random, source to "
        "target or target to source (0: off, the paper)",
    )
    weight_decay: float = Field(
        0.0,
        ge=0,
        description="decoupled weight decay: each step every weight (but those of "
        "weight_decay_exclude) shrinks "
        "by this times the learning rate, as in Keras's Adam (0: off, the paper)",
    )
    weight_decay_exclude: list[str] = Field(
        default_factory=list,
        description="weights not decayed: those whose name holds one of these, "
        "e.g. [bias, gamma, beta, embeddings] (the model's weights are named "
        "kernel, bias, gamma and beta (LayerNorm), embeddings and, with learned "
        "positions, position_embeddings)",
    )
    epochs: int | None = Field(None, ge=1, description="stop after this many epochs")
    steps: int | None = Field(
        None, ge=1, description="... or this many optimizer steps"
    )
    minutes: float | None = Field(
        None, gt=0, description="... or minutes of training, whichever first"
    )
    strategy: Literal["default", "mirrored", "multi_worker"] = Field(
        "default", description="default, mirrored or multi_worker"
    )
    mixed_precision: Literal["float32", "mixed_float16", "mixed_bfloat16", "auto"] = (
        Field(
            "float32",
            description="float32, mixed_float16, mixed_bfloat16, or auto: "
            "mixed_bfloat16 where the GPUs or the CPU compute bfloat16 in "
            "hardware, float32 elsewhere",
        )
    )
    jit_compile: bool = Field(False, description="compile the whole step with XLA")
    average_last: int = Field(
        5, ge=0, description="average the last N checkpoints at the end (0: off)"
    )
    keep_best: int = Field(
        5,
        ge=0,
        description="keep the N checkpoints of lowest validation perplexity "
        "(at epoch ends), and end with the best on validation of: the average "
        "of the last average_last, the average of these, the best one (0: off)",
    )
    checkpoint_minutes: float = Field(
        10.0,
        gt=0,
        description="how often the training state is written: one checkpoint "
        "resumed from, averaged and kept by snapshots",
    )
    checkpoint_steps: int | None = Field(
        None,
        ge=1,
        description="... or every this many optimizer steps instead: an "
        "uninterrupted run by steps then averages the same checkpoints on any "
        "machine",
    )
    snapshot_minutes: list[float] = Field(
        default_factory=list,
        description="keep the model after these minutes, e.g. [30, 60]: "
        "the average of the last average_last checkpoints then",
    )
    snapshot_steps: list[int] = Field(
        default_factory=list,
        description="the same at these optimizer steps, e.g. [2000, 4000]: "
        "the same models on any machine, however fast",
    )
    validate_: bool = Field(
        True, alias="validate", description="score the validation split each epoch"
    )
    seed: int = Field(0, ge=0, description="seed of weights, dropout and data order")

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        validate_assignment=True,
        allow_inf_nan=False,
        populate_by_name=True,
    )

    @field_validator("snapshot_minutes")
    @classmethod
    def _positive_minutes(cls, minutes: list[float]) -> list[float]:
        if any(m <= 0 for m in minutes):
            raise ValueError("expected a list of numbers > 0")
        return minutes

    @field_validator("weight_decay_exclude")
    @classmethod
    def _names(cls, names: list[str]) -> list[str]:
        if not all(names):
            raise ValueError("expected non-empty names")
        for name in names:
            if not any(name in weight for weight in WEIGHT_NAMES):
                raise ValueError(
                    f"{name!r} is in no weight's name; the model's weights are "
                    f"named {', '.join(WEIGHT_NAMES)}"
                )
        return names

    @field_validator("snapshot_steps")
    @classmethod
    def _positive_steps(cls, steps: list[int]) -> list[int]:
        if any(s < 1 for s in steps):
            raise ValueError("expected a list of integers > 0")
        return steps

    @property
    def validate(self) -> bool:  # `validate` is also a pydantic method name
        return self.validate_

    @model_validator(mode="after")
    def _exclusion_needs_decay(self) -> TrainingConfig:
        if self.weight_decay_exclude and not self.weight_decay:
            raise _KeyError(
                "weight_decay_exclude",
                self.weight_decay_exclude,
                "has no effect with training.weight_decay 0",
            )
        return self

    @model_validator(mode="after")
    def _cooldown_needs_steps(self) -> TrainingConfig:
        if self.cooldown_steps and self.steps is None:
            raise _KeyError(
                "cooldown_steps",
                self.cooldown_steps,
                "needs training.steps, the step where the rate reaches zero",
            )
        if self.cooldown_steps and self.cooldown_steps >= self.steps:
            raise _KeyError(
                "cooldown_steps",
                self.cooldown_steps,
                f"must be less than training.steps ({self.steps})",
            )
        return self

    @model_validator(mode="after")
    def _rdrop_needs_fit(self) -> TrainingConfig:
        if self.rdrop_alpha and self.strategy == "multi_worker":
            raise _KeyError(
                "rdrop_alpha",
                self.rdrop_alpha,
                "is not available with strategy multi_worker (its loop "
                "computes the loss itself, not through the model)",
            )
        return self

    @model_validator(mode="after")
    def _multi_worker_counts_steps(self) -> TrainingConfig:
        if self.strategy == "multi_worker" and self.steps is None:
            raise _KeyError(
                "steps",
                None,
                "required with strategy multi_worker (its loop "
                "counts steps, not epochs or minutes)",
            )
        return self


class EvaluationConfig(_Section):
    """`evaluation`: the search that scores the test split."""

    beam_size: int = Field(4, ge=1, description="beam size; 1 is greedy search")
    alpha: float = Field(0.6, ge=0, description="length penalty")
    batch_tokens: int | None = Field(
        None,
        ge=1,
        description="source tokens per beam-search batch; null: 16384 / beam_size",
    )


class Config(_Section):
    """A whole training recipe; see `docs/config.md` for every key."""

    data: DataConfig = Field(default_factory=DataConfig)
    tokenizer: TokenizerConfig = Field(default_factory=TokenizerConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    training: TrainingConfig = Field(default_factory=TrainingConfig)
    evaluation: EvaluationConfig = Field(default_factory=EvaluationConfig)
    output_dir: str = Field("runs/default", description="where the run is written")

    @model_validator(mode="after")
    def _sizes_fit(self) -> Config:
        if self.training.token_budget < self.data.max_length:
            raise _KeyError(
                "training.token_budget",
                self.training.token_budget,
                f"must hold one sentence of data.max_length={self.data.max_length}",
            )
        model_max = self.model.overrides.max_length
        if model_max is not None and model_max < self.data.max_length:
            raise _KeyError(
                "model.overrides.max_length",
                model_max,
                f"must be at least data.max_length={self.data.max_length}",
            )
        return self

    def to_dict(self) -> dict:
        """The recipe as plain data, every key included (as YAML writes it)."""
        data = self.model_dump(by_alias=True, mode="json")
        data["model"]["overrides"] = self.model.overrides.given()
        return data


class _KeyError(ValueError):
    """Raised inside validators: names a key relative to the model checked."""

    def __init__(self, key: str, value: Any, expected: str) -> None:
        super().__init__(expected)
        self.key, self.value, self.expected = key, value, expected


def load_config(path: str | Path, overrides: dict | None = None) -> Config:
    """Reads and checks a YAML recipe.

    Args:
        path: the YAML file.
        overrides: `{"training.steps": 100, ...}`, set before checking (the
            command line's options).

    Returns:
        A valid `Config`.

    Raises:
        FileNotFoundError: no such file.
        ConfigError: invalid YAML, a key given twice, an unknown key or an
            invalid value.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Config file not found: {path}")
    raw = read_yaml(path)
    return config_from_dict(raw, source=str(path), overrides=overrides)


class _UniqueKeyLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` that refuses a key given twice in one mapping.

    PyYAML keeps the last value of a repeated key without a word, so a
    recipe that sets `training.steps` twice would train to the second
    value. The document's nodes are checked before anything is built.
    """

    def get_single_data(self):
        node = self.get_single_node()
        if node is None:
            return None
        _check_unique_keys(node, [])
        return self.construct_document(node)


def _check_unique_keys(node: yaml.Node, path: list[str]) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, yaml.Mark] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue  # (a complex key: never a recipe's)
            key = key_node.value
            if key in seen and key != "<<":
                raise yaml.MarkedYAMLError(
                    problem=f"duplicate key {'.'.join([*path, key])} (first on "
                    f"line {seen[key].line + 1})",
                    problem_mark=key_node.start_mark,
                )
            seen[key] = key_node.start_mark
            _check_unique_keys(value_node, [*path, key])
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _check_unique_keys(item, [*path, str(index)])


def read_yaml(path: str | Path) -> Any:
    """The data of a YAML file; a key repeated in a mapping is an error.

    Raises:
        OSError: the file cannot be read.
        ConfigError: not UTF-8, not YAML, or a repeated key (one line naming
            the file, the line and the dotted key).
    """
    try:
        return yaml.load(Path(path).read_text(encoding="utf-8"), _UniqueKeyLoader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f", line {mark.line + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or "not valid YAML"
        raise ConfigError(f"{path}{where}: {problem}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None


def config_from_dict(
    raw: Any, source: str = "config", overrides: dict | None = None
) -> Config:
    """Builds and checks a `Config` from nested dicts (as read from YAML).

    Args:
        raw: the recipe (`None` for an empty one).
        source: names the recipe in error messages.
        overrides: dotted keys and values set before checking.

    Raises:
        ConfigError: names the first invalid key and its value.
    """
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: expected a mapping of sections, got {raw!r}")
    raw = {key: value for key, value in raw.items()}
    for dotted, value in (overrides or {}).items():
        raw = _set_dotted(raw, dotted.split("."), value)
    # An empty section (`training:` alone) means its defaults.
    raw = {
        key: {} if value is None and key != "output_dir" else value
        for key, value in raw.items()
    }
    try:
        return Config.model_validate(raw)
    except ValidationError as error:
        raise ConfigError(_message(error, raw, source)) from None


def _set_dotted(mapping: Any, keys: list[str], value: Any) -> dict:
    """A copy of `mapping` with `value` at the nested `keys`."""
    head, *rest = keys
    mapping = dict(mapping) if isinstance(mapping, dict) else {}
    mapping[head] = _set_dotted(mapping.get(head), rest, value) if rest else value
    return mapping


def check_paths(config: Config) -> None:
    """Raises `ConfigError` for a file or directory the recipe names that is
    missing (nothing is created or downloaded in its place)."""
    d = config.data
    if d.data_dir is not None and not os.path.isdir(d.data_dir):
        hint = (
            "; leave it out to download to the default cache"
            if (d.corpus != "files")
            else ""
        )
        raise ConfigError(f"data.data_dir: no such directory: {d.data_dir!r}{hint}")
    for key in ("train_files", "valid_files", "test_files"):
        for path in getattr(d, key) or ():
            if not os.path.isfile(path):
                raise ConfigError(f"data.{key}: no such file: {path!r}")
    path = config.tokenizer.path
    if path is not None and not os.path.exists(path):
        raise ConfigError(f"tokenizer.path: no such tokenizer: {path!r}")
    if d.prepared_dir is not None:
        _check_writable_dir("data.prepared_dir", d.prepared_dir)


def _check_writable_dir(key: str, path: str) -> None:
    """`path` is a directory, or one can be made there (an existing one may
    be read-only: it can hold what others prepared)."""
    existing = os.path.abspath(path)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise ConfigError(
            f"{key}: {path!r} is not a directory ({existing!r} is a file)"
        )
    made = existing != os.path.abspath(path)
    if made and not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{key}: {path!r} cannot be made ({existing!r} is read-only)")


def _message(error: ValidationError, raw: dict, source: str) -> str:
    """One line for the first error: the dotted key, the value, the rule."""
    first = error.errors()[0]
    location = [str(part) for part in first["loc"] if part != "validate_"]
    if first["type"] == "extra_forbidden":
        dotted = ".".join(location)
        if dotted in RENAMED:
            key, meaning = RENAMED[dotted]
            return f"{source}: {dotted} is now {key} ({meaning})"
        known = _known_keys(location[:-1])
        close = difflib.get_close_matches(location[-1], known, n=1)
        parent = ".".join(location[:-1])
        if close:
            suggestion = f"{parent}.{close[0]}" if parent else close[0]
            return f"{source}: unknown key {dotted}; did you mean {suggestion}?"
        return f"{source}: unknown key {dotted}; known keys: {', '.join(known)}"
    cause = first.get("ctx", {}).get("error")
    if isinstance(cause, _KeyError):
        # A cross-key rule: the key it names, relative to the model checked.
        key = ".".join([*location, cause.key]) if location else cause.key
        return f"{source}: {key}: {cause.value!r} ({cause.expected})"
    dotted = ".".join(location) or "(top level)"
    message = first["msg"].removeprefix("Value error, ")
    return f"{source}: {dotted}: {first['input']!r} ({message})"


def _known_keys(location: list[str]) -> list[str]:
    model: type[BaseModel] = Config
    for part in location:
        field = model.model_fields.get(part)
        annotation = getattr(field, "annotation", None)
        if not (inspect.isclass(annotation) and issubclass(annotation, BaseModel)):
            return []
        model = annotation
    return [field.alias or name for name, field in model.model_fields.items()]


def reference_markdown() -> str:
    """`docs/config.md`: every key of the schema, its type, default and rule."""
    lines = [
        "# Recipe reference",
        "",
        "Every key a training recipe (`keras-transformer train --config "
        "FILE.yaml`) may set, generated from the schema in "
        "`keras_transformer/config.py` (`python -m keras_transformer.config > "
        "docs/config.md`; a test checks this page is current). Types are "
        "exact: a number where a number is expected, an integer where an "
        "integer is, `true`/`false` for a boolean; numbers are finite (no "
        "`.inf` or `.nan`), and a key given twice is an error.",
        "",
    ]
    sections = [
        ("data", DataConfig),
        ("tokenizer", TokenizerConfig),
        ("model", ModelConfig),
        ("model.overrides", ModelOverrides),
        ("training", TrainingConfig),
        ("evaluation", EvaluationConfig),
    ]
    lines += ["| key | type | default | meaning |", "|---|---|---|---|"]
    lines.append(
        f"| `output_dir` | string | `{Config.model_fields['output_dir'].default}` "
        f"| {Config.model_fields['output_dir'].description} |"
    )
    for prefix, model in sections:
        for name, field in model.model_fields.items():
            if prefix == "model" and name == "overrides":
                continue
            key = f"{prefix}.{field.alias or name}"
            default = (
                field.default_factory() if field.default_factory else field.default
            )
            default = "[]" if default == [] else yaml.safe_dump(default).strip()
            default = default.removesuffix("\n...").strip()
            lines.append(
                f"| `{key}` | {_type_name(field)} | `{default}` "
                f"| {field.description}{_rule(field)} |"
            )
    return "\n".join(lines) + "\n"


def _type_name(field) -> str:
    return _describe_type(field.annotation)


_TYPE_NAMES = {int: "integer", float: "number", bool: "boolean", str: "string"}


def _describe_type(annotation) -> str:
    """The YAML reader's name of a type; `Literal` values are shown as written."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Literal:
        return f"one of [{', '.join(str(value) for value in args)}]"
    if origin in (typing.Union, types.UnionType):
        names = [_describe_type(arg) for arg in args if arg is not type(None)]
        return " or ".join(names + ["null"] * (type(None) in args))
    if origin is list:
        return f"list of {_describe_type(args[0])}s"
    return _TYPE_NAMES.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _rule(field) -> str:
    bounds = []
    for constraint in field.metadata:
        for attribute, symbol in (("ge", ">="), ("gt", ">"), ("lt", "<")):
            value = getattr(constraint, attribute, None)
            if value is not None:
                bounds.append(f"{symbol} {value}")
    return f" ({', '.join(bounds)})" if bounds else ""


if __name__ == "__main__":
    print(reference_markdown(), end="")
