"""The Transformer of "Attention Is All You Need" as Keras 3 layers.

Subpackages: `layers`, `models`, `data`, `schedules`, `losses`, `metrics`,
`training`, `decoding`, `visualization`; `pipeline` and `cli` for the jobs.
Importing the top level stays light: import the subpackage you need, e.g.
`from keras_transformer.layers import MultiHeadAttention`.

Importing the package also sets `TF_CPU_ALLOCATOR_USE_BFC=true` unless it
is set already: TensorFlow then keeps the memory of freed tensors in a pool
for the next ones instead of returning it to the system. A training step
allocates the same large tensors every time (the logits alone are
tokens x vocabulary floats), and without the pool each one costs a page
fault per 4 KiB page: an addition over 2048 x 8000 floats took 29 ms with
them and 6 ms without (docs/benchmarks.md). TensorFlow reads the variable
when it first creates a tensor on the CPU, so it takes effect only if no
tensor exists yet; set it in the environment yourself otherwise.
`TF_CPU_ALLOCATOR_USE_BFC=false` turns it off.
"""

import os

os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")

__version__ = "0.1.0"
