"""Training recipes as YAML files: every key documented, checked on load.

A recipe has five sections. Every key has a default, so an empty file is a
valid recipe (the built-in corpus with the "tiny" model); an unknown key or an
invalid value is an error that names it.

```yaml
data:
  corpus: builtin        # builtin | multi30k | tfds:NAME | files
  data_dir: null         # multi30k / tfds: where the data is (or goes)
  source_lang: en        # multi30k, tfds: source language code
  target_lang: de        # multi30k, tfds: target language code
  train_files: null      # files: [source_path, target_path]
  valid_files: null      # files: [source_path, target_path]
  test_files: null       # files: [source_path, target_path]
  max_length: 64         # longer pairs are dropped (and counted)
  seed: 0                # built-in corpus generation
tokenizer:
  vocab_size: 8000       # shared source + target subword vocabulary
  path: null             # reuse a saved tokenizer instead of training one
model:
  preset: tiny           # base | big | small | tiny
  overrides: {}          # any Transformer argument, e.g. {num_layers: 3}
training:
  token_budget: 4096     # source + target tokens per batch
  warmup_steps: 4000
  lr_scale: 1.0          # multiplies the paper's learning rate
  label_smoothing: 0.1
  epochs: null           # stop after this many epochs ...
  steps: null            # ... or optimizer steps ...
  minutes: null          # ... or minutes, whichever comes first
  strategy: default      # default | mirrored | multi_worker
  mixed_precision: float32   # float32 | mixed_float16 | mixed_bfloat16
  jit_compile: false
  average_last: 5        # average the last N checkpoints at the end (0: off)
  checkpoint_minutes: 10 # how often a checkpoint is written for averaging
  snapshot_minutes: []   # save the model after these minutes, e.g. [10, 20]
  validate: true         # score the validation split after each epoch
  seed: 0
evaluation:
  beam_size: 4
  alpha: 0.6
  batch_tokens: 4096     # source tokens per beam-search batch
output_dir: runs/default
```
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from keras_transformer.models import PRESETS, Transformer

STRATEGIES = ("default", "mirrored", "multi_worker")
PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
FIXED_CORPORA = ("builtin", "multi30k", "files")


@dataclass
class DataConfig:
    corpus: str = "builtin"
    data_dir: str | None = None
    source_lang: str = "en"
    target_lang: str = "de"
    train_files: list[str] | None = None
    valid_files: list[str] | None = None
    test_files: list[str] | None = None
    max_length: int = 64
    seed: int = 0


@dataclass
class TokenizerConfig:
    vocab_size: int = 8000
    path: str | None = None


@dataclass
class ModelConfig:
    preset: str = "tiny"
    overrides: dict[str, Any] = field(default_factory=dict)


@dataclass
class TrainingConfig:
    token_budget: int = 4096
    warmup_steps: int = 4000
    lr_scale: float = 1.0
    label_smoothing: float = 0.1
    epochs: int | None = None
    steps: int | None = None
    minutes: float | None = None
    strategy: str = "default"
    mixed_precision: str = "float32"
    jit_compile: bool = False
    average_last: int = 5
    checkpoint_minutes: float = 10.0
    snapshot_minutes: list[float] = field(default_factory=list)
    validate: bool = True
    seed: int = 0


@dataclass
class EvaluationConfig:
    beam_size: int = 4
    alpha: float = 0.6
    batch_tokens: int = 4096


@dataclass
class Config:
    """A whole training recipe; see the module docstring for every key."""

    data: DataConfig = field(default_factory=DataConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    output_dir: str = "runs/default"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


_SECTIONS = {
    "data": DataConfig,
    "tokenizer": TokenizerConfig,
    "model": ModelConfig,
    "training": TrainingConfig,
    "evaluation": EvaluationConfig,
}


def load_config(path: str | Path) -> Config:
    """Reads and checks a YAML recipe.

    Args:
        path: the YAML file.

    Returns:
        A validated `Config`.

    Raises:
        FileNotFoundError: no such file.
        ValueError: unknown key or invalid value, naming it.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Config file not found: {path}")
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return config_from_dict(raw, source=str(path))


def config_from_dict(raw: dict, source: str = "config") -> Config:
    """Builds and checks a `Config` from nested dicts (as read from YAML).

    Example:

    >>> config_from_dict({"model": {"preset": "small"}}).model.preset
    'small'
    >>> config_from_dict({"training": {"stepz": 5}})
    Traceback (most recent call last):
    ...
    ValueError: config: unknown key `training.stepz`; known keys: ...
    """
    if not isinstance(raw, dict):
        raise ValueError(f"{source}: expected a mapping at the top level.")
    sections = {}
    for key, value in raw.items():
        if key == "output_dir":
            continue
        if key not in _SECTIONS:
            raise ValueError(
                f"{source}: unknown key `{key}`; known keys: "
                f"{', '.join([*_SECTIONS, 'output_dir'])}"
            )
        cls = _SECTIONS[key]
        value = value or {}
        if not isinstance(value, dict):
            raise ValueError(f"{source}: `{key}` must be a mapping.")
        known = [f.name for f in dataclasses.fields(cls)]
        for name in value:
            if name not in known:
                raise ValueError(
                    f"{source}: unknown key `{key}.{name}`; known keys: "
                    f"{', '.join(known)}"
                )
        sections[key] = cls(**value)
    config = Config(**sections)
    if "output_dir" in raw:
        config.output_dir = str(raw["output_dir"])
    validate(config, source)
    return config


def validate(config: Config, source: str = "config") -> None:
    """Raises `ValueError` naming the first invalid value of `config`."""

    def fail(key, value, expected):
        raise ValueError(f"{source}: invalid `{key}`: {value!r} ({expected})")

    def positive(key, value, allow_none=False):
        if value is None and allow_none:
            return
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            fail(key, value, "expected a positive number")

    d, t, m, tr, e = (
        config.data,
        config.tokenizer,
        config.model,
        config.training,
        config.evaluation,
    )
    if d.corpus not in FIXED_CORPORA and not d.corpus.startswith("tfds:"):
        fail("data.corpus", d.corpus, "expected builtin, multi30k, tfds:NAME or files")
    if d.corpus == "files" and not d.train_files:
        fail("data.train_files", d.train_files, "required when data.corpus is files")
    for key in ("train_files", "valid_files", "test_files"):
        value = getattr(d, key)
        if value is not None and (not isinstance(value, list) or len(value) != 2):
            fail(f"data.{key}", value, "expected [source_path, target_path]")
    positive("data.max_length", d.max_length)
    positive("tokenizer.vocab_size", t.vocab_size)
    if m.preset not in PRESETS:
        fail("model.preset", m.preset, f"expected one of {sorted(PRESETS)}")
    _validate_model(m, fail)
    positive("training.token_budget", tr.token_budget)
    positive("training.warmup_steps", tr.warmup_steps)
    positive("training.lr_scale", tr.lr_scale)
    if not 0.0 <= tr.label_smoothing < 1.0:
        fail("training.label_smoothing", tr.label_smoothing, "expected 0 <= x < 1")
    for key in ("epochs", "steps", "minutes"):
        positive(f"training.{key}", getattr(tr, key), allow_none=True)
    if tr.strategy not in STRATEGIES:
        fail("training.strategy", tr.strategy, f"expected one of {STRATEGIES}")
    if tr.mixed_precision not in PRECISIONS:
        fail(
            "training.mixed_precision",
            tr.mixed_precision,
            f"expected one of {PRECISIONS}",
        )
    if not isinstance(tr.average_last, int) or tr.average_last < 0:
        fail("training.average_last", tr.average_last, "expected an integer >= 0")
    positive("training.checkpoint_minutes", tr.checkpoint_minutes)
    if not isinstance(tr.validate, bool):
        fail("training.validate", tr.validate, "expected true or false")
    snapshots = tr.snapshot_minutes
    if not isinstance(snapshots, list) or not all(
        isinstance(m, (int, float)) and not isinstance(m, bool) and m > 0
        for m in snapshots
    ):
        fail("training.snapshot_minutes", snapshots, "expected a list of numbers > 0")
    positive("evaluation.beam_size", e.beam_size)
    positive("evaluation.batch_tokens", e.batch_tokens)
    if e.alpha < 0:
        fail("evaluation.alpha", e.alpha, "expected a number >= 0")


def _validate_model(m: ModelConfig, fail) -> None:
    if not isinstance(m.overrides, dict):
        fail("model.overrides", m.overrides, "expected a mapping")
    params = {**PRESETS[m.preset], **m.overrides}
    allowed = inspect.signature(Transformer).parameters
    for name, value in m.overrides.items():
        if name not in allowed or name == "vocab_size":
            fail(f"model.overrides.{name}", value, "not a Transformer argument")
    for name in ("dropout", "attention_dropout"):
        value = params.get(name, 0.0)
        if not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
            fail(f"model.overrides.{name}", value, "expected 0 <= x < 1")
    if params["d_model"] % params["num_heads"]:
        fail(
            "model.overrides.num_heads",
            params["num_heads"],
            f"must divide d_model={params['d_model']}",
        )
