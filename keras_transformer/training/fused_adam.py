"""Adam whose update of each weight is one fused kernel."""

import keras
import tensorflow as tf
from keras import ops


@keras.saving.register_keras_serializable(package="keras_transformer")
class FusedAdam(keras.optimizers.Adam):
    """`keras.optimizers.Adam`, with each weight's update one TensorFlow kernel.

    Same arguments, same update, same saved state. Keras's Adam updates a
    weight with about ten element-wise ops (moments, square root, division,
    assignments), each a pass over the weight's memory; this one calls
    TensorFlow's `ResourceApplyAdam` kernel, which does it all in one pass.
    The rule is the one Keras applies (`epsilon` added to `sqrt(v)` before
    bias correction is folded into the step size):

        m <- m + (1 - beta_1) (g - m)
        v <- v + (1 - beta_2) (g^2 - v)
        w <- w - lr sqrt(1 - beta_2^t) / (1 - beta_1^t) m / (sqrt(v) + epsilon)

    Where that kernel does not apply (`amsgrad=True`, sparse gradients,
    another backend) it falls back to Keras's update.

    Example:

    >>> import numpy as np
    >>> w = keras.Variable(np.ones(3, "float32"))
    >>> FusedAdam(0.1).apply([np.array([1.0, -1.0, 0.0], "float32")], [w])
    >>> np.round(np.asarray(w), 3)
    array([0.9, 1.1, 1. ], dtype=float32)
    """

    def update_step(self, gradient, variable, learning_rate):
        if (
            self.amsgrad
            or keras.backend.backend() != "tensorflow"
            or isinstance(gradient, tf.IndexedSlices)
        ):
            return super().update_step(gradient, variable, learning_rate)
        dtype = variable.dtype
        step = ops.cast(self.iterations + 1, dtype)
        index = self._get_variable_index(variable)
        m, v = self._momentums[index], self._velocities[index]
        tf.raw_ops.ResourceApplyAdam(
            var=_handle(variable),
            m=_handle(m),
            v=_handle(v),
            beta1_power=ops.power(ops.cast(self.beta_1, dtype), step),
            beta2_power=ops.power(ops.cast(self.beta_2, dtype), step),
            lr=ops.cast(learning_rate, dtype),
            beta1=ops.cast(self.beta_1, dtype),
            beta2=ops.cast(self.beta_2, dtype),
            epsilon=ops.cast(self.epsilon, dtype),
            grad=ops.cast(gradient, dtype),
        )


def _handle(variable):
    """The resource handle of a Keras or TensorFlow variable."""
    if isinstance(variable, keras.Variable):
        variable = variable.value
    return variable.handle
