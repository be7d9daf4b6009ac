"""`python -m keras_transformer` runs the command line."""

from keras_transformer.cli import run

run()
