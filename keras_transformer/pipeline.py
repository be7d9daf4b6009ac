"""End-to-end jobs: train from a recipe, evaluate, translate, export, demo.

These are the library functions behind the command line; `cli.py` only parses
arguments and calls them. A trained model lives in one directory:

```
model_dir/
  model.keras          the Transformer (averaged weights when averaging is on)
  tokenizer/           the SentencePiece model of the shared vocabulary
  config.yaml          the recipe it was trained with
  summary.json         what happened: steps, minutes, losses, scores
  translator/          string-in/string-out SavedModel (after `export`)
  backup/              Keras BackupAndRestore state while training runs
  checkpoints/         the last checkpoints, for averaging
  logs/                TensorBoard logs
```
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path

import keras
import tensorflow as tf
import yaml
from tqdm.auto import tqdm

from keras_transformer import data
from keras_transformer.config import Config, load_config
from keras_transformer.decoding import Translator
from keras_transformer.evaluation import score_translations
from keras_transformer.losses import MaskedCrossEntropy
from keras_transformer.metrics import MaskedAccuracy, Perplexity
from keras_transformer.models import Transformer
from keras_transformer.training import (
    CheckpointAveraging,
    Snapshots,
    TrainingBudget,
    build_for_fit,
    fit_distributed,
    is_chief,
    make_strategy,
    set_mixed_precision,
    transformer_optimizer,
)

logger = logging.getLogger(__name__)

MODEL_FILE = "model.keras"
TOKENIZER_DIR = "tokenizer"
SNAPSHOT_DIR = "snapshots"
TRANSLATOR_DIR = "translator"


def load_splits(config: Config) -> dict:
    """The train, validation and test pairs named by `config.data`.

    Returns:
        `{"train": ..., "valid": ..., "test": ...}`, each a `ParallelCorpus`
        or a `tf.data.Dataset` of `(source, target)` strings; a split the
        corpus does not have is `None`.
    """
    d = config.data
    if d.corpus == "builtin":
        return {
            split: data.builtin_corpus(name, seed=d.seed)
            for split, name in (("train", "train"), ("valid", "val"), ("test", "test"))
        }
    if d.corpus == "multi30k":
        kwargs = dict(data_dir=d.data_dir, source=d.source_lang, target=d.target_lang)
        return {
            "train": data.load_multi30k("train", **kwargs),
            "valid": data.load_multi30k("val", **kwargs),
            "test": data.load_multi30k("test_2016_flickr", **kwargs),
        }
    if d.corpus == "files":
        return {
            split: None if files is None else data.load_parallel_files(*files)
            for split, files in (
                ("train", d.train_files),
                ("valid", d.valid_files),
                ("test", d.test_files),
            )
        }
    name = d.corpus.removeprefix("tfds:")
    splits = {"train": "train", "valid": "validation", "test": "test"}
    return {
        split: data.load_tfds(
            name,
            tfds_split,
            data_dir=d.data_dir,
            source_key=d.source_lang,
            target_key=d.target_lang,
        )
        for split, tfds_split in splits.items()
    }


def train_from_config(config: Config, verbose: int | str = "auto") -> dict:
    """Trains a Transformer as the recipe says and saves it to `output_dir`.

    Rerunning the same recipe after a crash resumes from the last backup.

    Args:
        config: the recipe (see `keras_transformer.config`).
        verbose: Keras `fit` verbosity (progress bar by default).

    Returns:
        The summary also written to `output_dir/summary.json`.
    """
    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(yaml.safe_dump(config.to_dict(), sort_keys=False))
    tr = config.training
    # A multi-worker strategy must exist before any other TensorFlow op.
    strategy = make_strategy(tr.strategy)
    keras.utils.set_random_seed(tr.seed)
    set_mixed_precision(tr.mixed_precision)

    splits = load_splits(config)
    tokenizer = _tokenizer(config, splits["train"], out)
    batches = {
        split: data.make_batches(
            pairs,
            tokenizer,
            max_length=config.data.max_length,
            token_budget=tr.token_budget,
            shuffle=split == "train",
            seed=tr.seed,
        )
        for split, pairs in splits.items()
        if pairs is not None and (split == "train" or split == "valid" and tr.validate)
    }

    with strategy.scope():
        model = Transformer.from_preset(
            config.model.preset,
            vocab_size=tokenizer.vocab_size,
            max_length=max(config.data.max_length, 64),
            **config.model.overrides,
        )
        loss = MaskedCrossEntropy(label_smoothing=tr.label_smoothing)
        optimizer = transformer_optimizer(
            model.d_model, tr.warmup_steps, scale=tr.lr_scale
        )
        model.compile(
            optimizer=optimizer,
            loss=loss,
            metrics=[MaskedAccuracy(name="accuracy"), Perplexity(name="perplexity")],
            jit_compile=tr.jit_compile,
        )
    start = time.monotonic()
    if tr.strategy == "multi_worker":
        history, averaging, stopped = _fit_multi_worker(
            config, model, batches["train"], loss, optimizer, strategy, out
        )
    else:
        history, averaging, stopped = _fit(config, model, batches, out, verbose)
    minutes = (time.monotonic() - start) / 60
    if is_chief(strategy):
        model.save(out / MODEL_FILE)
        # Each snapshot becomes a model directory `evaluate` can read.
        for folder in sorted((out / SNAPSHOT_DIR).glob("minute_*")):
            tokenizer.save(folder / TOKENIZER_DIR)
    summary = {
        "steps": int(model.optimizer.iterations.numpy()),
        "minutes": round(minutes, 2),
        "epochs_run": len(history.get("loss", [])),
        "history": {k: [round(float(v), 5) for v in vs] for k, vs in history.items()},
        "parameters": int(model.count_params()),
        "vocab_size": tokenizer.vocab_size,
        "averaged_checkpoints": len(averaging.checkpoints) if averaging else 0,
        "stopped_by_budget": stopped,
    }
    _write_summary(out, summary)
    return summary


def load_trained(model_dir: str | os.PathLike):
    """The `(model, tokenizer)` saved in `model_dir` by `train_from_config`.

    The model is loaded for inference: without its optimizer (whose state
    would otherwise be exported with a translator, twice the weights).

    Raises:
        FileNotFoundError: the directory, its model or its tokenizer is missing.
        ValueError: the model file cannot be read (e.g. a corrupt file).
    """
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise FileNotFoundError(f"Model directory not found: {model_dir}")
    model_path = model_dir / MODEL_FILE
    if not model_path.is_file():
        raise FileNotFoundError(f"No {MODEL_FILE} in {model_dir}: train a model first.")
    tokenizer_path = model_dir / TOKENIZER_DIR
    if not tokenizer_path.exists():
        raise FileNotFoundError(
            f"No tokenizer in {model_dir} (expected {tokenizer_path}); the model "
            "cannot be used without the vocabulary it was trained with."
        )
    try:
        model = keras.models.load_model(model_path, compile=False)
    except Exception as error:  # noqa: BLE001 - re-raised with the file named
        raise ValueError(
            f"Cannot load {model_path}: it looks corrupt ({error})"
        ) from error
    return model, data.Tokenizer.load(tokenizer_path)


def train_command(
    config_path: str,
    strategy: str | None = None,
    output_dir: str | None = None,
    minutes: float | None = None,
    steps: int | None = None,
    evaluate: bool = True,
) -> dict:
    """`keras-transformer train`: a recipe file plus command-line overrides.

    Trains, then (unless `evaluate=False`) scores the test split with the
    recipe's beam search and adds the scores to the summary.
    """
    config = load_config(config_path)
    if strategy:
        config.training.strategy = strategy
    if output_dir:
        config.output_dir = output_dir
    if minutes:
        config.training.minutes = minutes
    if steps:
        config.training.steps = steps
    summary = train_from_config(config)
    model, tokenizer = load_trained(config.output_dir)
    e = config.evaluation
    translator = Translator(
        tokenizer,
        model,
        beam_size=e.beam_size,
        alpha=e.alpha,
        batch_tokens=e.batch_tokens,
    )
    test = load_splits(config)["test"] if evaluate else None
    if test is not None:
        sources, references = _pairs(test)
        hypotheses = translate_sentences(translator, sources)
        summary["test"] = score_translations(hypotheses, references)
        _write_summary(Path(config.output_dir), {"test": summary["test"]})
    # `translate` loads this instead of tracing the search anew.
    tf.saved_model.save(translator, str(Path(config.output_dir) / TRANSLATOR_DIR))
    return summary


def translate_sentences(
    translator, sentences: list[str], batch_size: int = 1000, progress: bool = False
) -> list[str]:
    """Translates `sentences` in batches with a `Translator` (or SavedModel).

    Args:
        translator: callable mapping a `(B,)` `tf.string` tensor to `(B,)`.
        sentences: the sentences.
        batch_size: sentences per call (the translator sorts and batches
            each call's sentences by length itself).
        progress: show a progress bar (on stderr, so stdout stays clean).

    Returns:
        One translation per sentence, in order.
    """
    out = []
    with tqdm(
        total=len(sentences), unit="sentence", disable=not progress, file=sys.stderr
    ) as bar:
        for i in range(0, len(sentences), batch_size):
            batch = tf.constant(sentences[i : i + batch_size], dtype=tf.string)
            out.extend(t.decode("utf-8") for t in translator(batch).numpy())
            bar.update(len(out) - bar.n)
    return out


def make_translator(model_dir: str, beam_size: int = 4, alpha: float = 0.6):
    """A `Translator` for the model and tokenizer saved in `model_dir`."""
    model, tokenizer = load_trained(model_dir)
    return Translator(tokenizer, model, beam_size=beam_size, alpha=alpha)


def _pairs(corpus) -> tuple[list[str], list[str]]:
    if isinstance(corpus, data.ParallelCorpus):
        return list(corpus.sources), list(corpus.targets)
    sources, targets = [], []
    for source, target in corpus.as_numpy_iterator():
        sources.append(source.decode("utf-8"))
        targets.append(target.decode("utf-8"))
    return sources, targets


def _tokenizer(config: Config, train_pairs, out: Path):
    path = out / TOKENIZER_DIR
    if config.tokenizer.path:
        tokenizer = data.Tokenizer.load(config.tokenizer.path)
    elif path.exists():
        tokenizer = data.Tokenizer.load(path)  # Resuming: keep the same ids.
    else:
        tokenizer = data.Tokenizer.train(
            train_pairs, vocab_size=config.tokenizer.vocab_size
        )
    tokenizer.save(path)
    return tokenizer


def _fit(config: Config, model, batches: dict, out: Path, verbose):
    """`model.fit` on one device or a MirroredStrategy, with the callbacks."""
    tr = config.training
    budget = TrainingBudget(minutes=tr.minutes, steps=tr.steps)
    callbacks = [
        # Backups each epoch: Keras 3.15 redoes steps when resuming from an
        # integer `save_freq` (tests/training/test_fault_tolerance.py).
        keras.callbacks.BackupAndRestore(str(out / "backup"), save_freq="epoch"),
        keras.callbacks.TensorBoard(str(out / "logs"), update_freq=50),
        budget,
    ]
    if tr.snapshot_minutes:
        callbacks.append(Snapshots(out / SNAPSHOT_DIR, tr.snapshot_minutes))
    averaging = None
    if tr.average_last:
        averaging = CheckpointAveraging(
            str(out / "checkpoints"),
            keep=tr.average_last,
            every_n_minutes=tr.checkpoint_minutes,
        )
        callbacks.append(averaging)
    build_for_fit(model, batches["train"])  # Needed under MirroredStrategy.
    history = model.fit(
        batches["train"],
        validation_data=batches.get("valid"),
        epochs=tr.epochs or (1000 if tr.minutes or tr.steps else 10),
        callbacks=callbacks,
        verbose=verbose,
        shuffle=False,  # `make_batches` shuffles; Keras cannot shuffle tf.data.
    )
    return history.history, averaging, budget.stopped


def _fit_multi_worker(
    config: Config, model, dataset, loss, optimizer, strategy, out: Path
):
    """The custom loop that Keras 3 `fit` cannot replace here (keras#20585)."""
    tr = config.training
    if tr.steps is None:
        raise ValueError(
            "training.strategy=multi_worker needs training.steps: the custom "
            f"loop counts steps, not epochs or minutes. Received: steps={tr.steps}"
        )
    losses = fit_distributed(
        model,
        dataset.repeat(),
        loss,
        optimizer,
        steps=tr.steps,
        strategy=strategy,
        checkpoint_path=str(out / "checkpoints" / "last.weights.h5"),
        checkpoint_every=max(1, tr.steps // 10),
    )
    return {"loss": losses}, None, False


def _write_summary(out: Path, summary: dict) -> None:
    path = out / "summary.json"
    previous = json.loads(path.read_text()) if path.exists() else {}
    previous.update(summary)
    path.write_text(json.dumps(previous, indent=2))


def run_demo(
    minutes: float = 5.0,
    output_dir: str = "demo_output",
    seed: int = 0,
    verbose: int | str = "auto",
    test_sentences: int | None = None,
) -> dict:
    """The main job: a small translator trained on the built-in corpus.

    Trains the "tiny" preset on the built-in English→German corpus for
    `minutes`, scores the test split with beam search (sacrebleu BLEU and
    chrF), saves the model and tokenizer, exports the string-to-string
    SavedModel, and writes attention and positional-encoding plots.

    Args:
        minutes: training budget.
        output_dir: where everything is written.
        seed: seed of the corpus split and of training.
        verbose: Keras `fit` verbosity.
        test_sentences: score only the first this many test sentences (all
            1000 by default).

    Returns:
        `{"summary", "scores", "examples", "files"}`: the training summary,
        test scores, `(source, translation, reference)` triples, and the
        paths written.
    """
    from keras_transformer.config import config_from_dict

    out = Path(output_dir)
    config = config_from_dict(
        {
            "data": {"corpus": "builtin", "max_length": 48, "seed": seed},
            "tokenizer": {"vocab_size": 1000},
            "model": {"preset": "tiny"},
            "training": {
                "minutes": minutes,
                "token_budget": 2048,
                "warmup_steps": 250,
                "lr_scale": 1.0,
                "average_last": 0,
                # Every second goes to training steps; the test split is
                # scored after training.
                "validate": False,
                "seed": seed,
            },
            "output_dir": str(out),
        },
        source="demo",
    )
    logger.info("Training the 'tiny' Transformer for %g minutes.", minutes)
    summary = train_from_config(config, verbose=verbose)

    model, tokenizer = load_trained(out)
    translator = Translator(tokenizer, model, beam_size=4, alpha=0.6)
    test = data.builtin_corpus("test", seed=seed)
    sources, references = list(test.sources), list(test.targets)
    if test_sentences is not None:
        sources, references = sources[:test_sentences], references[:test_sentences]
    logger.info("Translating %d test sentences with beam search.", len(sources))
    hypotheses = translate_sentences(
        translator, sources, batch_size=100, progress=verbose != 0
    )
    scores = score_translations(hypotheses, references)
    _write_summary(out, {"test": scores})

    translator_dir = out / TRANSLATOR_DIR
    tf.saved_model.save(translator, str(translator_dir))
    files = {
        "model": str(out / MODEL_FILE),
        "tokenizer": str(out / TOKENIZER_DIR),
        "translator": str(translator_dir),
        **_demo_plots(model, tokenizer, sources[0], out),
    }
    return {
        "summary": summary,
        "scores": scores,
        "examples": list(zip(sources, hypotheses, references, strict=True))[:8],
        "files": files,
    }


def _demo_plots(model, tokenizer, sentence: str, out: Path) -> dict:
    from keras_transformer.decoding import beam_search
    from keras_transformer.visualization import (
        plot_attention_heads,
        plot_positional_encoding,
        save_figure,
    )

    source = tokenizer.tokenize(tf.constant([sentence])).to_tensor()
    source = tf.concat(
        [tf.cast(source, tf.int32), tf.fill([1, 1], data.END_ID)], axis=1
    )
    ids = beam_search(model, source)["ids"][0].numpy()
    ids = ids[: list(ids).index(data.END_ID) + 1] if data.END_ID in ids else ids
    target_in = tf.constant([[data.START_ID, *ids[:-1]]], tf.int32)
    _, scores = model((source, target_in), return_attention_scores=True)
    source_tokens = tokenizer.tokens(source[0].numpy())
    target_tokens = tokenizer.tokens(ids)
    paths = {}
    figures = {
        "cross_attention_png": plot_attention_heads(
            scores["decoder_cross"][-1][0],
            target_tokens,
            source_tokens,
            title="Encoder-decoder attention, last decoder layer",
        ),
        "encoder_attention_png": plot_attention_heads(
            scores["encoder"][-1][0],
            source_tokens,
            source_tokens,
            title="Encoder self-attention, last layer",
        ),
        "positional_encoding_png": plot_positional_encoding(
            length=model.max_length, depth=model.d_model
        ),
    }
    for key, figure in figures.items():
        path = out / (key.removesuffix("_png") + ".png")
        paths[key] = str(save_figure(figure, path))
    return paths
