"""The Transformer of "Attention Is All You Need" as Keras 3 layers.

Subpackages: `layers`, `models`, `data`, `schedules`, `losses`, `metrics`,
`training`, `decoding`, `visualization`; `jobs` (one module per command)
and `cli`, the command line.

Importing the package imports Keras and the modules that define its Keras
classes (`layers`, `losses`, `metrics`, `models`, `schedules`), which
registers them: a `.keras` file loads with `keras.models.load_model` after
`import keras_transformer` alone, without `custom_objects`. Keras imports its
backend: TensorFlow by default, none of it on the JAX and PyTorch backends,
where these modules import no TensorFlow either.

Importing the package sets no environment variable. The `keras-transformer`
command sets `TF_CPU_ALLOCATOR_USE_BFC=true` and quiets TensorFlow's logs
for its own process before TensorFlow is imported (see `keras_transformer_cli`);
set the variable yourself before TensorFlow creates its first tensor to get
the same pooled CPU allocator in your programs (docs/training.md).
"""

__version__ = "0.1.0"

from keras_transformer import layers, losses, metrics, models, schedules  # noqa: E402

__all__ = ["__version__", "layers", "losses", "metrics", "models", "schedules"]
