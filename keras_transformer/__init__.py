"""The Transformer of "Attention Is All You Need" as Keras 3 layers.

Subpackages: `layers`, `models`, `data`, `schedules`, `losses`, `metrics`,
`training`, `decoding`, `visualization`; `jobs` (one module per command)
and `cli`, the command line.
Importing the top level stays light: import the subpackage you need, e.g.
`from keras_transformer.layers import MultiHeadAttention`.

Importing the package sets no environment variable. The `keras-transformer` command sets
`TF_CPU_ALLOCATOR_USE_BFC=true` for its own process (see `cli.main`); set it
yourself before TensorFlow creates its first tensor to get the same pooled
CPU allocator in your programs (docs/training.md).
"""

__version__ = "0.1.0"
