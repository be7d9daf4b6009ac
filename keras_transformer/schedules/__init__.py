"""Learning-rate schedules."""

from keras_transformer.schedules.transformer_schedule import TransformerSchedule

__all__ = ["TransformerSchedule"]


# The package's other Keras classes, if this module was imported first.
from keras_transformer import _import_keras_classes  # noqa: E402

_import_keras_classes(done=__name__)
