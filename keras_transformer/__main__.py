"""`python -m keras_transformer` runs the `keras-transformer` command.

Python imports the package before this module, so TensorFlow has started
by then: its start-up lines show and `TF_CPU_ALLOCATOR_USE_BFC` may come
too late. `python -m keras_transformer_cli` sets them first, as the
`keras-transformer` executable does.
"""

from keras_transformer_cli import run

run()
