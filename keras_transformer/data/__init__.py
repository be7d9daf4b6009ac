"""Data: the subword tokenizer, corpora and teacher-forcing batches.

- `Tokenizer`: a shared source+target SentencePiece vocabulary, as a
  `tf.Module` usable inside a SavedModel; reserved ids `PAD_ID`, `UNK_ID`,
  `START_ID`, `END_ID`.
- Corpora, all giving `(source, target)` string pairs as `tf.data`:
  `builtin_corpus` (offline, generated), `load_multi30k`,
  `load_parallel_files`, `load_tfds`.
- `make_batches`: `((source_ids, target_in), target_out)` batches bucketed by
  length under a token budget.
"""

from keras_transformer.data.batching import (
    BatchStats,
    default_bucket_lengths,
    make_batches,
)
from keras_transformer.data.builtin import (
    BUILTIN_CATEGORIES,
    builtin_corpus,
    builtin_corpus_info,
)
from keras_transformer.data.corpus import ParallelCorpus
from keras_transformer.data.files import load_parallel_files, read_lines
from keras_transformer.data.multi30k import (
    MULTI30K_SPLITS,
    default_cache_dir,
    load_multi30k,
)
from keras_transformer.data.tfds_corpora import TFDS_TRANSLATION_DATASETS, load_tfds
from keras_transformer.data.tokenizer import (
    END_ID,
    PAD_ID,
    START_ID,
    UNK_ID,
    Tokenizer,
)

__all__ = [
    "BUILTIN_CATEGORIES",
    "END_ID",
    "MULTI30K_SPLITS",
    "PAD_ID",
    "START_ID",
    "TFDS_TRANSLATION_DATASETS",
    "UNK_ID",
    "BatchStats",
    "ParallelCorpus",
    "Tokenizer",
    "builtin_corpus",
    "builtin_corpus_info",
    "default_bucket_lengths",
    "default_cache_dir",
    "load_multi30k",
    "load_parallel_files",
    "load_tfds",
    "make_batches",
    "read_lines",
]
