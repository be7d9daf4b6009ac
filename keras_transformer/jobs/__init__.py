"""The jobs behind the `keras-transformer` command, one module each."""
