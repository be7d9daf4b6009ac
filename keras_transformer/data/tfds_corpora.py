"""Translation corpora from TensorFlow Datasets (TFDS)."""

from __future__ import annotations

import os

import tensorflow as tf

from keras_transformer.data.streams import PairStream, stream_pairs

# Datasets this package is tested with (through `tfds.testing.mock_data`);
# any TFDS dataset with two text features works.
TFDS_TRANSLATION_DATASETS = (
    "ted_hrlr_translate/pt_to_en",
    "wmt14_translate/de-en",
    "wmt14_translate/fr-en",
)


def load_tfds(
    name: str,
    split: str = "train",
    data_dir: str | os.PathLike | None = None,
    source_key: str | None = None,
    target_key: str | None = None,
    *,
    download: bool = True,
    shuffle_files: bool = False,
) -> tf.data.Dataset:
    """Loads a TFDS translation dataset as `(source, target)` string pairs.

    Runs `tfds.load(name, split=split, data_dir=data_dir)`: the data is
    downloaded and prepared into `data_dir` on first use (TFDS's default
    directory when None). The direction defaults to the dataset's supervised
    keys (`pt -> en` for `ted_hrlr_translate/pt_to_en`, `de -> en` for
    `wmt14_translate/de-en`, `fr -> en` for `wmt14_translate/fr-en`); pass
    both keys to choose, e.g. `source_key="en", target_key="de"` for the
    paper's WMT 2014 English-German task.

    Args:
        name: TFDS name with config, e.g. `"wmt14_translate/de-en"`.
        split: TFDS split, e.g. `"train"`, `"validation"`, `"test"`,
            `"train[:1%]"`.
        data_dir: where TFDS keeps its data.
        source_key: feature holding the source sentence (a language code).
        target_key: feature holding the target sentence.
        download: let TFDS download and prepare the data when absent.
        shuffle_files: passed to `tfds.load`.

    Returns:
        A `tf.data.Dataset` of `(source, target)` `tf.string` scalars.

    Raises:
        ValueError: only one of the keys is given, or a key is not a feature
            of the dataset (the message lists the features).

    Example:
        >>> import tensorflow_datasets as tfds
        >>> with tfds.testing.mock_data(num_examples=3):
        ...     pairs = load_tfds("ted_hrlr_translate/pt_to_en", "validation")
        ...     len(list(pairs))
        3
    """
    # Imported here: tensorflow_datasets is slow to import and only needed
    # for these corpora.
    import tensorflow_datasets as tfds

    if data_dir is not None:
        data_dir = os.fspath(data_dir)
    if (source_key is None) != (target_key is None):
        raise ValueError(
            "Give both source_key and target_key, or neither. Received: "
            f"source_key={source_key!r}, target_key={target_key!r}"
        )
    info = tfds.builder(name, data_dir=data_dir).info
    if source_key is None:
        if not info.supervised_keys:
            raise ValueError(
                f"{name} has no supervised keys; give source_key and target_key"
            )
        source_key, target_key = info.supervised_keys
    features = sorted(info.features.keys())
    for key in (source_key, target_key):
        if key not in features:
            raise ValueError(
                f"{name} has no feature {key!r}; its features are {features}"
            )
    examples = tfds.load(
        name,
        split=split,
        data_dir=data_dir,
        download=download,
        shuffle_files=shuffle_files,
    )
    return examples.map(
        lambda example: (example[source_key], example[target_key]),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )


def stream_tfds(
    name: str,
    split: str = "train",
    data_dir: str | os.PathLike | None = None,
    source_key: str | None = None,
    target_key: str | None = None,
    *,
    download: bool = True,
) -> PairStream:
    """A TFDS translation split as a `PairStream`, read as TFDS stores it.

    The pairs of `load_tfds`, streamed from the TFDS record files (never
    copied into Python lists), e.g. for `prepare_corpus`. The stream's
    identity is the dataset's name, version, split and keys, so shards
    prepared from it are reused until the dataset's version changes.

    Args:
        name: TFDS name with config, e.g. `"wmt14_translate/de-en"`.
        split: TFDS split.
        data_dir: where TFDS keeps its data.
        source_key: feature holding the source sentence.
        target_key: feature holding the target sentence.
        download: let TFDS download and prepare the data when absent.

    Returns:
        A `PairStream`.

    Example:
        >>> import tensorflow_datasets as tfds
        >>> with tfds.testing.mock_data(num_examples=3):
        ...     stream = stream_tfds("ted_hrlr_translate/pt_to_en", "validation")
        ...     sum(len(s) for (s, _), _ in stream.iterate())
        3
    """
    import tensorflow_datasets as tfds

    pairs = load_tfds(
        name,
        split,
        data_dir=data_dir,
        source_key=source_key,
        target_key=target_key,
        download=download,
    )
    info = tfds.builder(
        name, data_dir=None if data_dir is None else os.fspath(data_dir)
    ).info
    keys = (source_key, target_key)
    if source_key is None:
        keys = tuple(info.supervised_keys)
    identity = {
        "kind": "tfds",
        "name": name,
        "version": str(info.version),
        "split": split,
        "keys": list(keys),
    }
    return stream_pairs(pairs, name=f"{name}/{split}", identity=identity)
