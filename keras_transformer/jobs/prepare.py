"""`keras-transformer prepare`, and the training job's data: streamed, prepared once.

The training pairs of a recipe are never held in memory: they are read as a
`PairStream` (`train_stream`), the tokenizer is trained on a random sample
of their sentences (`tokenizer.sample_sentences`), and they are tokenized
once into length-bucketed shards (`prepare_corpus`) under
`data.prepared_dir` (by default `output_dir/prepared`), from which every
epoch is read (`prepared_batches`). Both the tokenizer and the shards are
named by what they are made of, so a later run of the same data, and every
worker of a multi-worker run, reuses them: the chief writes them, the other
workers wait for them.
"""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path

import sentencepiece as spm

from keras_transformer import data
from keras_transformer.config import Config, ConfigError, check_paths, load_config
from keras_transformer.data.prepared import (
    FORMAT,
    NoPairsError,
    PreparedCorpus,
    SubwordSampling,
    identity_key,
    prepare_corpus,
    wait_for_file,
)
from keras_transformer.data.streams import PairStream
from keras_transformer.data.tokenizer import MODEL_FILENAME, sample_description
from keras_transformer.jobs.run_dir import PREPARED_DIR, missing_parents, remove_empty

logger = logging.getLogger(__name__)

_POLL_SECONDS = 1.0


def train_stream(config: Config) -> PairStream:
    """The training pairs named by `config.data`, as a stream.

    Files (and Multi30k's) are read line by line as `load_parallel_files`
    reads them; the built-in corpus from memory; a TFDS split from TFDS's
    record files.
    """
    d = config.data
    if d.corpus == "builtin":
        return data.stream_pairs(data.builtin_corpus("train", seed=d.seed))
    if d.corpus == "multi30k":
        files = data.multi30k_files("train", d.data_dir, d.source_lang, d.target_lang)
        name = f"multi30k/train.{d.source_lang}-{d.target_lang}"
        return data.stream_parallel_files(*files, name=name)
    if d.corpus == "files":
        return data.stream_parallel_files(*d.train_files)
    return data.stream_tfds(
        d.corpus.removeprefix("tfds:"),
        "train",
        data_dir=d.data_dir,
        source_key=d.source_lang,
        target_key=d.target_lang,
    )


def prepared_root(config: Config) -> Path:
    """`data.prepared_dir`, or `output_dir/prepared`."""
    if config.data.prepared_dir is not None:
        return Path(config.data.prepared_dir)
    return Path(config.output_dir) / PREPARED_DIR


def stream_tokenizer(
    config: Config, stream: PairStream, root: Path, write: bool = True
) -> data.Tokenizer:
    """The tokenizer trained on a sample of `stream`, as the recipe asks.

    Kept in `root/tokenizer-KEY/`, KEY naming the stream's identity, the
    vocabulary size and the sample size: reused when there. With
    `write=False`, waits for another process (the chief) to write it.

    Raises:
        ConfigError: `tokenizer.vocab_size` does not fit the corpus.
    """
    t = config.tokenizer
    key = identity_key(
        {
            "format": FORMAT,
            "corpus": stream.identity,
            "vocab_size": t.vocab_size,
            "sample_sentences": t.sample_sentences,
            # Another SentencePiece may train other pieces from the same text.
            "sentencepiece": spm.__version__,
        }
    )
    directory = root / f"tokenizer-{key}"
    path = directory / MODEL_FILENAME
    if not path.exists() and not write:
        wait_for_file(str(path), "train the tokenizer", _POLL_SECONDS)
    if path.exists():
        logger.info("Reusing the tokenizer %s", path)
        return data.Tokenizer.load(path)
    start = time.monotonic()
    sample, total = stream.sample_sentences(t.sample_sentences)
    read = time.monotonic()
    if not total:
        raise NoPairsError(f"{stream.name}: no sentence pairs", 0)
    sampled = len(sample)
    try:
        # The sample is let go as SentencePiece copies it (`_released`).
        tokenizer = data.Tokenizer.train(
            _released(sample), vocab_size=t.vocab_size, max_sentences=None
        )
    except ValueError as error:
        needed = re.search(r"smaller than required_chars\. \d+ vs (\d+)", str(error))
        if needed is None:
            raise
        raise ConfigError(
            f"tokenizer.vocab_size: {t.vocab_size} (too small for this corpus: "
            f"its characters, 256 bytes and 4 reserved ids take "
            f"{needed.group(1)}; ask for more)"
        ) from None
    logger.info(
        "Trained the tokenizer on %s of %s (tokenizer.sample_sentences=%d; "
        "%.1f s reading, %.1f s training)",
        sample_description(sampled, total),
        stream.name,
        t.sample_sentences,
        read - start,
        time.monotonic() - read,
    )
    created = missing_parents(directory)
    try:
        tokenizer.save(directory)
    except BaseException:
        remove_empty(created)
        raise
    return tokenizer


def prepare_stream(
    config: Config,
    stream: PairStream,
    tokenizer: data.Tokenizer,
    root: Path,
    write: bool = True,
) -> PreparedCorpus:
    """`prepare_corpus` with the recipe's `max_length`, under `root`.

    A preparation that fails removes the directories it created, so that a
    failed start leaves the output directory as it found it.
    """
    created = missing_parents(root)
    try:
        return prepare_corpus(
            stream,
            tokenizer,
            root,
            max_length=config.data.max_length,
            chunk_rows=config.data.chunk_pairs,
            write=write,
            sampling=subword_sampling(config),
        )
    except BaseException:
        remove_empty(created)
        raise


def subword_sampling(config: Config) -> SubwordSampling | None:
    """The recipe's subword regularization (`tokenizer.sampling_alpha`), if any."""
    t = config.tokenizer
    if not t.sampling_alpha:
        return None
    return SubwordSampling(t.sampling_alpha, t.sampling_views, config.training.seed)


def prepare_command(config_path: str, overrides: dict | None = None) -> dict:
    """`keras-transformer prepare`: the tokenizer and shards a run would make.

    Run once before `train` (e.g. before the workers of a multi-worker run
    start), with the same recipe; `train` then finds both.

    Returns:
        What was prepared: the tokenizer's and the shards' paths, and the
        shards' counts.
    """
    config = load_config(config_path, overrides)
    check_paths(config)
    root = prepared_root(config)
    stream = train_stream(config)
    if config.tokenizer.path:
        tokenizer = data.Tokenizer.load(config.tokenizer.path)
    else:
        tokenizer = stream_tokenizer(config, stream, root)
    prepared = prepare_stream(config, stream, tokenizer, root)
    return {
        "prepared": prepared.path,
        "pairs": prepared.pairs,
        "kept": prepared.kept,
        "too_long": prepared.too_long,
        "empty": prepared.empty,
        "skipped_empty": prepared.skipped_empty,
        "vocab_size": tokenizer.vocab_size,
    }


def _released(items: list):
    """Yields the items of `items` in order, removing each from the list."""
    items.reverse()
    while items:
        yield items.pop()
