"""`python -m keras_transformer_cli` runs the `keras-transformer` command."""

from keras_transformer_cli import run

run()
