"""The Transformer of "Attention Is All You Need" as Keras 3 layers.

Subpackages: `layers`, `models`, `data`, `schedules`, `losses`, `metrics`,
`training`, `decoding`, `visualization`; `pipeline` and `cli` for the jobs.
Importing the top level stays light: import the subpackage you need, e.g.
`from keras_transformer.layers import MultiHeadAttention`.
"""

__version__ = "0.1.0"
