"""`keras-transformer train`: a recipe in, a trained model directory out.

In order:

1. The recipe is checked whole (`config.py`), command-line options
   included, and so are the files it names; nothing is written before.
2. The output directory is locked for this process (`run_dir.run_lock`),
   and decides what happens (`run_dir.run_status`): a new run starts; a
   run of the same recipe that did not finish resumes exactly where its
   last training state left it; a finished run is left as it is, or trains
   on when only the budget grew (`training.minutes` or `training.steps`;
   its model is kept as a snapshot first); anything else is an error
   (`--overwrite` starts over, when the directory holds nothing but the
   run's own files).
3. The data are read and the tokenizer is trained on a sample of the
   training sentences (or reused when resuming); the training pairs are
   tokenized once into length-bucketed shards on disk (`jobs.prepare`),
   or the shards of an earlier run of the same data are reused. Only then
   is the run written: its manifest, `config.yaml` and the tokenizer. A
   start that fails before leaves the directory as it found it.
4. The model and optimizer are built, and the last training state, if any,
   is loaded. `model.fit` (or, across machines, `fit_distributed`) trains
   on an endless, seeded stream of epochs positioned at the state's step,
   read from the shards (`data.prepared_batches`, in memory bounded by
   `data.shuffle_buffer` whatever the corpus's size), writing a checkpoint
   every `training.checkpoint_minutes` (or `checkpoint_steps`)
   (`training.Checkpoints`). A loss that becomes NaN or infinite stops the
   run with `TrainingDiverged`, its last good state kept.
5. The last checkpoints are averaged into the model, which is saved with
   each snapshot's own average (`training.snapshot_minutes`,
   `training.snapshot_steps`); the exported translator and the summary
   are written, and the test split is scored.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import keras
import yaml

from keras_transformer import data
from keras_transformer.config import (
    Config,
    ConfigError,
    check_paths,
    load_config,
    read_yaml,
)
from keras_transformer.data.prepared import NoPairsError
from keras_transformer.decoding import Translator
from keras_transformer.evaluation import score_translations
from keras_transformer.jobs.prepare import (
    prepare_stream,
    prepared_root,
    stream_tokenizer,
    train_stream,
)
from keras_transformer.jobs.run_dir import (
    CHECKPOINT_DIR,
    CONFIG_FILE,
    LOG_DIR,
    MODEL_FILE,
    PREPARED_DIR,
    SNAPSHOT_DIR,
    TOKENIZER_DIR,
    TRANSLATOR_DIR,
    clear_run,
    foreign_entries,
    keep_finished_model,
    read_summary,
    record_entries,
    remove_temporaries,
    run_lock,
    run_status,
    write_summary,
    write_text,
)
from keras_transformer.jobs.translate import translate_sentences
from keras_transformer.jobs.trust import model_files, sign_translator
from keras_transformer.losses import MaskedCrossEntropy
from keras_transformer.metrics import MaskedAccuracy, Perplexity
from keras_transformer.models import RDropTransformer, Transformer
from keras_transformer.training import (
    BudgetProgress,
    Checkpoints,
    TrainingBudget,
    average_checkpoints,
    build_for_fit,
    fit_distributed,
    make_strategy,
    restore_latest,
    set_mixed_precision,
    transformer_optimizer,
    write_snapshot_model,
)
from keras_transformer.training.atomic import save_model_atomically
from keras_transformer.training.best import BEST_DIR, BestCheckpoints, choose_final
from keras_transformer.training.checkpoints import SNAPSHOT_FILE
from keras_transformer.training.interrupt import (
    StopOnNonFinite,
    StopOnSignal,
    TrainingDiverged,
    TrainingInterrupted,
)
from keras_transformer.training.precision import (
    AUTO,
    auto_policy,
    cpu_flags,
    cpu_precision_warning,
)

logger = logging.getLogger(__name__)


def train_command(
    config_path: str,
    overrides: dict | None = None,
    overwrite: bool = False,
    evaluate: bool = True,
) -> dict:
    """`keras-transformer train`: a recipe file plus command-line overrides.

    Args:
        config_path: the YAML recipe.
        overrides: `{"training.steps": 100, "output_dir": "runs/x"}`, the
            command line's options.
        overwrite: start over in an output directory that holds a run (its
            files only are removed).
        evaluate: score the test split after training.

    Returns:
        The summary also written to `output_dir/summary.json`.
    """
    config = load_config(config_path, overrides)
    return train_from_config(config, overwrite=overwrite, evaluate=evaluate)


def train_from_config(
    config: Config,
    verbose: int | str = "auto",
    overwrite: bool = False,
    evaluate: bool = True,
) -> dict:
    """Trains a Transformer as the recipe says, into `config.output_dir`.

    Rerunning the same recipe resumes an unfinished run exactly and leaves a
    finished one as it is.

    Args:
        config: the recipe.
        verbose: 0 for no progress bar; otherwise a bar in the budget's
            minutes or steps (`BudgetProgress`).
        overwrite: start over in a directory that holds a run.
        evaluate: score the test split after training, when there is one.

    Returns:
        The summary, also in `output_dir/summary.json`.
    """
    check_paths(config)
    out = Path(config.output_dir)
    # The chief writes the run, and holds it while it does; the other
    # workers of a multi-worker run read it.
    chief = _chief_by_environment(config.training.strategy)
    with run_lock(out) if chief else contextlib.nullcontext():
        return _start(config, out, chief, verbose, overwrite, evaluate)


def _start(config, out, chief, verbose, overwrite, evaluate) -> dict:
    recipe = config.to_dict()
    if overwrite:
        foreign = foreign_entries(out) if chief else []
        if foreign:
            clear_run(out)  # refuses, naming them; nothing is removed
        status = "new"  # the run there is removed once the checks pass
    else:
        status = run_status(out, recipe)
    if status == "finished":
        logger.warning(
            "%s holds a finished run of this recipe; left as it is (a larger "
            "training.minutes or training.steps trains it on, --overwrite "
            "trains it again).",
            out,
        )
        return read_summary(out)
    tr = config.training
    # A multi-worker strategy must exist before any other TensorFlow op.
    strategy = make_strategy(tr.strategy)
    # The data and the tokenizer, checked before anything is written.
    splits = load_splits(config, ("valid", "test"))
    _check_splits(config, splits)
    reuse = status in ("resume", "extend") or not (chief or overwrite)
    root = prepared_root(config)
    # The run's own prepared directory, made by this start, goes if it fails.
    own = chief and root == out / PREPARED_DIR and not root.exists()
    stream = train_stream(config)
    try:
        tokenizer = _tokenizer(config, stream, out / TOKENIZER_DIR, reuse, root, chief)
        prepared = prepare_stream(config, stream, tokenizer, root, write=chief)
    except NoPairsError as error:
        if own:
            shutil.rmtree(root, ignore_errors=True)
        if config.data.corpus != "files" or error.pairs:
            raise
        files = config.data.train_files
        raise ConfigError(
            f"data.train_files: {files!r} hold no sentence pairs"
        ) from None
    except BaseException:
        if own:
            shutil.rmtree(root, ignore_errors=True)
        raise
    if chief:
        if overwrite:
            clear_run(out)
        remove_temporaries(out)
        if status == "extend":
            kept = keep_finished_model(out)
            logger.warning(
                "%s holds a finished run of this recipe; training it on to the "
                "new budget (its model is kept in %s).",
                out,
                kept,
            )
        if status in ("resume", "extend"):
            _warn_if_the_cooldown_moves(out, config.training)
        # The recipe, with the budget it now trains to.
        entries = [CONFIG_FILE, TOKENIZER_DIR]
        entries += [PREPARED_DIR] if root == out / PREPARED_DIR else []
        record_entries(out, *entries)
        write_text(out / CONFIG_FILE, yaml.safe_dump(recipe, sort_keys=False))
        if not (out / TOKENIZER_DIR).exists():
            tokenizer.save(out / TOKENIZER_DIR)
    keras.utils.set_random_seed(tr.seed)
    previous_policy = keras.config.dtype_policy()
    gpus, flags = _gpu_capabilities(), cpu_flags()
    policy = tr.mixed_precision
    if policy == AUTO:
        policy, why = auto_policy(gpus, flags)
        if chief:
            logger.info("training.mixed_precision: auto trains in %s: %s", policy, why)
    set_mixed_precision(policy)
    slow = cpu_precision_warning(policy, len(gpus), flags)
    if chief and slow:
        logger.warning(slow)
    try:
        summary = _train(
            config, strategy, chief, out, verbose, splits, tokenizer, prepared
        )
    finally:
        keras.config.set_dtype_policy(previous_policy)
    summary["mixed_precision"] = policy
    if not chief:
        return summary
    model, tokenizer = _load(out)
    e = config.evaluation
    translator = Translator(
        tokenizer, model, e.beam_size, e.alpha, batch_tokens=e.batch_tokens
    )
    test = splits["test"] if evaluate else None
    if test is not None:
        sources, references = _pairs(test)
        summary["test"] = score_translations(
            translate_sentences(translator, sources), references
        )
    # `translate` loads this instead of tracing the search anew.
    record_entries(out, TRANSLATOR_DIR)
    _export(translator, out / TRANSLATOR_DIR)
    return write_summary(out, {**summary, "finished": True})


def _gpu_capabilities() -> list[tuple[int, int] | None]:
    """Each GPU TensorFlow sees: its compute capability, or None."""
    import tensorflow as tf

    return [
        tf.config.experimental.get_device_details(gpu).get("compute_capability")
        for gpu in tf.config.list_physical_devices("GPU")
    ]


def _chief_by_environment(strategy: str) -> bool:
    """Whether this process writes the run, known before TensorFlow starts.

    As `training.is_chief` decides it from the strategy: every process but
    a multi-worker run's; there, the `TF_CONFIG` task of type "chief", or
    worker 0 when the cluster names no chief.
    """
    if strategy != "multi_worker":
        return True
    try:
        tf_config = json.loads(os.environ.get("TF_CONFIG") or "{}")
        task, cluster = tf_config.get("task", {}), tf_config.get("cluster", {})
    except (ValueError, AttributeError):
        return True  # `make_strategy` reports the error
    if task.get("type") == "chief":
        return True
    return (
        task.get("type") == "worker"
        and int(task.get("index", 0)) == 0
        and "chief" not in cluster
    )


def _check_splits(config: Config, splits: dict) -> None:
    """Each split the recipe names holds sentences (else `ConfigError`)."""
    if config.data.corpus != "files":
        return
    for split in ("valid", "test"):
        corpus = splits.get(split)
        if corpus is not None and not len(corpus):
            files = getattr(config.data, f"{split}_files")
            raise ConfigError(f"data.{split}_files: {files!r} hold no sentence pairs")


def load_splits(config: Config, splits=("train", "valid", "test")) -> dict:
    """The train, validation and test pairs named by `config.data`, in memory.

    The training job reads only the validation and test splits so; it
    streams the training pairs (`jobs.prepare.train_stream`).

    Args:
        config: the recipe.
        splits: the splits to read, of "train", "valid" and "test".

    Returns:
        `{"train": ..., "valid": ..., "test": ...}` for the splits asked,
        each a `ParallelCorpus` or a `tf.data.Dataset` of `(source, target)`
        strings; a split the corpus does not have is `None`.
    """
    d = config.data
    if d.corpus == "builtin":
        names = {"train": "train", "valid": "val", "test": "test"}
        return {
            split: data.builtin_corpus(names[split], seed=d.seed) for split in splits
        }
    if d.corpus == "multi30k":
        kwargs = dict(data_dir=d.data_dir, source=d.source_lang, target=d.target_lang)
        names = {"train": "train", "valid": "val", "test": "test_2016_flickr"}
        return {split: data.load_multi30k(names[split], **kwargs) for split in splits}
    if d.corpus == "files":
        return {
            split: None if files is None else data.load_parallel_files(*files)
            for split, files in (
                (split, getattr(d, f"{split}_files")) for split in splits
            )
        }
    name = d.corpus.removeprefix("tfds:")
    names = {"train": "train", "valid": "validation", "test": "test"}
    return {
        split: data.load_tfds(
            name,
            names[split],
            data_dir=d.data_dir,
            source_key=d.source_lang,
            target_key=d.target_lang,
        )
        for split in splits
    }


def _exclude_from_weight_decay(optimizer, names: list[str]) -> None:
    """Spares the weights named by `training.weight_decay_exclude` from decay."""
    if names:
        # Keras reads the names as one regular expression; ours are plain text.
        optimizer.exclude_from_weight_decay(
            var_names=[re.escape(name) for name in names]
        )


def _warn_if_the_cooldown_moves(out: Path, tr) -> None:
    """Say so when another `training.steps` moves the run's cool-down line.

    The line ends at `training.steps`: a run resumed or trained on with
    another number of steps goes on from the new line's rate, not from where
    the old line had taken it.
    """
    if not tr.cooldown_steps:
        return
    try:
        before = read_yaml(out / CONFIG_FILE)["training"]["steps"]
    except (OSError, ConfigError, KeyError, TypeError):
        return
    if not isinstance(before, int) or before == tr.steps:
        return
    logger.warning(
        "training.cooldown_steps: this run was to cool down over steps %d-%d "
        "(training.steps %d); with training.steps %d it cools down over steps "
        "%d-%d, going on from the rate of that line.",
        before - tr.cooldown_steps,
        before,
        before,
        tr.steps,
        tr.steps - tr.cooldown_steps,
        tr.steps,
    )


def _train(
    config: Config,
    strategy,
    chief: bool,
    out: Path,
    verbose,
    splits,
    tokenizer,
    prepared,
) -> dict:
    """Training proper: model, state, `fit`; the model saved."""
    tr = config.training
    batching = dict(
        max_length=config.data.max_length,
        token_budget=tr.token_budget,
        seed=tr.seed,
        replicas=strategy.num_replicas_in_sync,
    )
    with strategy.scope():
        arguments = config.model.arguments(tokenizer.vocab_size, config.data.max_length)
        if tr.rdrop_alpha:
            model = RDropTransformer(rdrop_alpha=tr.rdrop_alpha, **arguments)
        else:
            model = Transformer(**arguments)
        model.compile(
            optimizer=transformer_optimizer(
                model.d_model,
                tr.warmup_steps,
                scale=tr.lr_scale,
                cooldown=(
                    (tr.steps - tr.cooldown_steps, tr.cooldown_steps)
                    if tr.cooldown_steps
                    else None
                ),
                weight_decay=tr.weight_decay,
            ),
            loss=MaskedCrossEntropy(label_smoothing=tr.label_smoothing),
            metrics=[MaskedAccuracy(name="accuracy"), Perplexity(name="perplexity")],
            jit_compile=tr.jit_compile,
        )
        model.build()
        _exclude_from_weight_decay(model.optimizer, tr.weight_decay_exclude)
        model.optimizer.build(model.trainable_variables)
    record = restore_latest(out / CHECKPOINT_DIR, model, set_aside=chief) or {}
    resumed_from = int(model.optimizer.iterations.numpy())

    # The endless stream of seeded epochs, from the epoch of the state's step.
    per_epoch = record.get("batches_per_epoch")
    epoch = resumed_from // per_epoch if per_epoch else 0
    stream, stats = data.prepared_batches(
        prepared,
        token_budget=tr.token_budget,
        seed=tr.seed,
        epochs_from=epoch,
        shuffle_buffer=config.data.shuffle_buffer,
        replicas=strategy.num_replicas_in_sync,
        with_stats=True,
        bidirectional_epochs=tr.bidirectional_epochs,
    )
    if per_epoch not in (None, stats.batches):
        raise ValueError(
            f"{out / CHECKPOINT_DIR}: the saved state counts {per_epoch} batches per "
            f"epoch, the data now {stats.batches}: the training data or the number of "
            "replicas changed"
        )
    done = resumed_from - epoch * stats.batches  # batches of `epoch` trained
    build_for_fit(model, stream)  # the compiled loss and metrics, on a batch
    valid = None
    if tr.validate and splits["valid"] is not None:
        valid = data.make_batches(splits["valid"], tokenizer, shuffle=False, **batching)

    history = {k: list(v) for k, v in record.get("history", {}).items()}
    if tr.strategy != "multi_worker" and done and len(history.get("loss", ())) > epoch:
        # A budget stopped the run inside `epoch`, which `fit` logged then;
        # finishing it logs it again, so the entry of its first part goes.
        history = {k: v[:epoch] for k, v in history.items()}
    budget = TrainingBudget(tr.minutes, tr.steps, record.get("minutes", 0.0))
    log = _Log(
        history,
        lambda: budget.elapsed_minutes,
        per_step=tr.strategy == "multi_worker",
    )
    best = best_dir = None
    if tr.keep_best and valid is not None and tr.strategy != "multi_worker":
        best_dir = out / CHECKPOINT_DIR / BEST_DIR
        best = BestCheckpoints(best_dir, tr.keep_best, write=chief)
        best.forget_after(resumed_from)
    kept = max(tr.average_last, 1)
    checkpoints = Checkpoints(
        out / CHECKPOINT_DIR,
        None if tr.checkpoint_steps else tr.checkpoint_minutes,
        steps=tr.checkpoint_steps,
        # The averaged ones, and one to fall back to if the newest is bad.
        keep=kept + 1,
        record=lambda: {"batches_per_epoch": stats.batches, "history": log.history},
        snapshot_minutes=tr.snapshot_minutes,
        snapshot_steps=tr.snapshot_steps,
        snapshot_dir=out / SNAPSHOT_DIR,
        snapshot_keep=kept,
        elapsed_minutes=record.get("minutes", 0.0),
        snapshots=record.get("snapshots"),
        write=chief,
        best_dir=best_dir,
    )
    # Last: its record holds the epoch the log has just added.
    diverged = StopOnNonFinite()
    callbacks = [diverged, budget, log, checkpoints]
    if best is not None:
        callbacks.insert(3, best)
    progress = None
    if verbose and chief:  # A bar in the budget's units, not Keras's epochs
        progress = BudgetProgress(budget, steps=_epochs(tr) * stats.batches)
        callbacks.insert(3, progress)
    stop = StopOnSignal()
    if tr.strategy != "multi_worker":  # (workers would stop at different steps)
        callbacks.insert(0, stop)
    if chief:  # what `fit` writes
        written = [CHECKPOINT_DIR]
        written += [SNAPSHOT_DIR] if tr.snapshot_minutes or tr.snapshot_steps else []
        written += [LOG_DIR] if tr.strategy != "multi_worker" else []
        record_entries(out, *written)

    start = time.monotonic()
    try:
        if tr.strategy == "multi_worker":
            fit_distributed(
                model,
                stream.skip(done),
                model.loss,
                model.optimizer,
                steps=tr.steps,
                strategy=strategy,
                callbacks=callbacks,
            )
        else:
            callbacks.append(keras.callbacks.TensorBoard(str(out / LOG_DIR)))
            _fit(model, stream, done, stats.batches, valid, callbacks, budget, tr)
    finally:
        if progress is not None:
            progress.close()
    minutes = (time.monotonic() - start) / 60
    trained_minutes = budget.elapsed_minutes  # (choosing the final model is not)
    steps = int(model.optimizer.iterations.numpy())
    if diverged.step is not None:
        kept = checkpoints.checkpoints
        kept_note = (
            f"the last state saved with finite weights, step "
            f"{kept[-1].rsplit('-', 1)[1]}, is kept in {out / CHECKPOINT_DIR}"
            if kept
            else "no training state was saved before"
        )
        raise TrainingDiverged(
            f"the loss became {diverged.loss} at step {diverged.step}: training "
            f"stopped; {kept_note} (a lower training.lr_scale or a longer "
            "training.warmup_steps may help, in a new output directory or "
            "with --overwrite)"
        )
    if stop.received:
        raise TrainingInterrupted(
            f"{stop.received} at step {steps}: the training state is saved in "
            f"{out / CHECKPOINT_DIR}; run the same command again to resume"
        )
    if tr.cooldown_steps and steps < tr.steps:
        logger.warning(
            "Training stopped at step %d, before training.steps (%d) where the "
            "cool-down (training.cooldown_steps %d) ends: the rate did not reach "
            "zero (training.minutes or training.epochs came first).",
            steps,
            tr.steps,
            tr.cooldown_steps,
        )

    def validation_perplexity():
        return model.evaluate(valid, verbose=0, return_dict=True)["perplexity"]

    last = checkpoints.checkpoints[-max(tr.average_last, 1) :]
    final = {"choice": "last", "checkpoints": [Path(p).name for p in last]}
    if chief:  # (the other workers of a multi-worker run write nothing)
        if best is not None and best.best():
            final = choose_final(
                model,
                {"last": last, "best_average": best.best(), "best": best.best(1)},
                validation_perplexity,
            )
            final["checkpoint_scores"] = {
                name: best.scores[name]
                for name in final["checkpoints"]
                if name in best.scores
            }
        elif tr.average_last:
            average_checkpoints(model, last)
        logger.info(
            "The final model: %s (%s)%s",
            final["choice"].replace("_", " "),
            ", ".join(final["checkpoints"]),
            f"; validation perplexity {final['scores']}" if "scores" in final else "",
        )
        record_entries(out, MODEL_FILE)
        save_model_atomically(model, out / MODEL_FILE)
        # Each snapshot becomes a model directory `evaluate` can read.
        checkpoints.finish_snapshots()  # (one left unfinished by a kill)
        for label in checkpoints.snapshots:
            folder = out / SNAPSHOT_DIR / label
            if not (folder / SNAPSHOT_FILE).exists():
                continue  # (no checkpoint was left to keep: a warning said so)
            if not (folder / MODEL_FILE).exists():
                score = validation_perplexity if best is not None else None
                write_snapshot_model(model, folder, score)
            tokenizer.save(folder / TOKENIZER_DIR)
    return {
        "steps": steps,
        "minutes": round(trained_minutes, 2),
        "minutes_this_run": round(minutes, 2),
        "resumed_from_step": resumed_from,
        "epochs_run": len(log.history.get("loss", [])),
        "history": {
            k: [int(v) if k == "step" else round(float(v), 5) for v in vs]
            for k, vs in log.history.items()
        },
        "parameters": int(model.count_params()),
        "vocab_size": tokenizer.vocab_size,
        "averaged_checkpoints": len(final["checkpoints"]),
        "final_model": final,
        "stopped_by_budget": budget.stopped,
    }


def _epochs(tr) -> int:
    """Epochs `fit` runs: a budget stops it (by 1000), or `training.epochs`."""
    return tr.epochs or (1000 if tr.minutes or tr.steps else 10)


def _fit(model, stream, done, per_epoch, valid, callbacks, budget, tr):
    """`model.fit` on `stream` after its first `done` batches; epochs whole.

    A run resumed inside an epoch first finishes that epoch (its remaining
    batches), then goes on with whole epochs of the same stream.
    """
    epochs = _epochs(tr)
    epoch = int(model.optimizer.iterations.numpy()) // per_epoch
    phases = []
    if done:  # the rest of the epoch the run stopped in
        phases.append((stream.skip(done).take(per_epoch - done), per_epoch - done))
    phases.append((stream.skip(per_epoch if done else 0), per_epoch))
    for batches, steps_per_epoch in phases:
        step = int(model.optimizer.iterations.numpy())
        if epoch >= epochs or budget.exhausted(step):
            break
        last = epoch + 1 if steps_per_epoch < per_epoch else epochs
        model.fit(
            batches,
            validation_data=valid,
            steps_per_epoch=steps_per_epoch,
            epochs=last,
            initial_epoch=epoch,
            callbacks=callbacks,
            verbose=0,  # `BudgetProgress` draws the bar
            shuffle=False,  # The stream is shuffled; Keras cannot shuffle it.
        )
        epoch = last
        if model.stop_training:  # the budget, or a signal
            break


class _Log(keras.callbacks.Callback):
    """The logs of every epoch (or step), across `fit` calls and resumes.

    Beside each entry's metrics it keeps the optimizer `step` it was logged
    at and the training `minutes` then (`minutes()`, all runs together), so
    the speed over any stretch of a run can be read back from its history.
    """

    def __init__(
        self, history: dict, minutes: Callable[[], float], per_step: bool = False
    ) -> None:
        super().__init__()
        self.history = history
        self.minutes = minutes
        self.per_step = per_step

    def on_epoch_end(self, epoch, logs=None):
        self._add(logs)

    def on_train_batch_end(self, batch, logs=None):
        if self.per_step:
            self._add(logs)

    def _add(self, logs):
        clock = {
            "step": int(self.model.optimizer.iterations.numpy()),
            "minutes": self.minutes(),
        }
        for key, value in {**(logs or {}), **clock}.items():
            self.history.setdefault(key, []).append(float(value))


def _tokenizer(config: Config, stream, path: Path, reuse: bool, root, chief):
    """The run's tokenizer, not yet saved: the recipe's, the run's own when
    `reuse` (resuming: the same ids), or the one trained on a sample of the
    training `stream` (`jobs.prepare.stream_tokenizer`: kept in `root`; the
    chief trains it, the other workers wait for it).

    Raises:
        ConfigError: `tokenizer.vocab_size` does not fit the corpus.
    """
    if config.tokenizer.path:
        return data.Tokenizer.load(config.tokenizer.path)
    if reuse and path.exists():
        return data.Tokenizer.load(path)
    return stream_tokenizer(config, stream, root, write=chief)


def _load(out: Path):
    from keras_transformer.jobs.run_dir import load_trained

    return load_trained(out)


def _export(translator: Translator, path: Path) -> None:
    """`tf.saved_model.save`, into a temporary folder renamed at the end."""
    import shutil

    temporary = path.with_name(f"{path.name}.tmp-export")
    shutil.rmtree(temporary, ignore_errors=True)
    translator.save(str(temporary))
    sign_translator(temporary, *model_files(path.parent))
    shutil.rmtree(path, ignore_errors=True)
    temporary.rename(path)


def _pairs(corpus) -> tuple[list[str], list[str]]:
    if isinstance(corpus, data.ParallelCorpus):
        return list(corpus.sources), list(corpus.targets)
    sources, targets = [], []
    for source, target in corpus.as_numpy_iterator():
        sources.append(source.decode("utf-8"))
        targets.append(target.decode("utf-8"))
    return sources, targets
