"""Data: the subword tokenizer, corpora and teacher-forcing batches.

- `Tokenizer`: a shared source+target SentencePiece vocabulary, as a
  `tf.Module` usable inside a SavedModel; reserved ids `PAD_ID`, `UNK_ID`,
  `START_ID`, `END_ID`.
- Corpora, all giving `(source, target)` string pairs as `tf.data`:
  `builtin_corpus` (offline, generated), `load_multi30k`,
  `load_parallel_files`, `load_tfds`.
- `make_batches`: `((source_ids, target_in), target_out)` batches bucketed by
  length under a token budget, from pairs in memory.
- Corpora too large for memory: `stream_parallel_files`, `stream_pairs` and
  `stream_tfds` read them as a `PairStream`; `prepare_corpus` tokenizes one
  once into length-bucketed shards on disk; `prepared_batches` reads
  `make_batches`'s batches from them, in bounded memory.
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
    multi30k_files,
)
from keras_transformer.data.prepared import (
    PreparedCorpus,
    SubwordSampling,
    prepare_corpus,
)
from keras_transformer.data.sampling import reservoir_sample
from keras_transformer.data.shard_batches import prepared_batches
from keras_transformer.data.streams import (
    PairStream,
    stream_pairs,
    stream_parallel_files,
)
from keras_transformer.data.tfds_corpora import (
    TFDS_TRANSLATION_DATASETS,
    load_tfds,
    stream_tfds,
)
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
    "PairStream",
    "ParallelCorpus",
    "PreparedCorpus",
    "SubwordSampling",
    "Tokenizer",
    "builtin_corpus",
    "builtin_corpus_info",
    "default_bucket_lengths",
    "default_cache_dir",
    "load_multi30k",
    "load_parallel_files",
    "load_tfds",
    "make_batches",
    "multi30k_files",
    "prepare_corpus",
    "prepared_batches",
    "read_lines",
    "reservoir_sample",
    "stream_pairs",
    "stream_parallel_files",
    "stream_tfds",
]
