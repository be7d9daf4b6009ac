"""The Transformer of "Attention Is All You Need" as Keras 3 layers."""

__version__ = "0.1.0"
