"""The Transformer of "Attention Is All You Need" as Keras 3 layers.

Subpackages: `layers`, `models`, `data`, `schedules`, `losses`, `metrics`,
`training`, `decoding`, `visualization`; `jobs` (one module per command)
and `cli`, the command line.
Importing the top level imports the Keras classes (`layers`, `models`,
`losses`, `metrics`, `schedules`), which registers them for
`keras.models.load_model`, and Keras; on the JAX and PyTorch backends it
imports no TensorFlow. The other subpackages (data, training, decoding,
...) are TensorFlow's and load when imported.

Importing the package sets no environment variable. The `keras-transformer` command sets
`TF_CPU_ALLOCATOR_USE_BFC=true` for its own process (see `cli.main`); set it
yourself before TensorFlow creates its first tensor to get the same pooled
CPU allocator in your programs (docs/training.md).
"""

__version__ = "0.1.0"

# The Keras classes register themselves when imported.
from keras_transformer import (  # noqa: E402, F401
    layers,
    losses,
    metrics,
    models,
    schedules,
)
