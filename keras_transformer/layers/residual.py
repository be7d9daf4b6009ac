"""Private helpers shared by the encoder and decoder layers."""

import keras


def head_dim(d_model, num_heads):
    if d_model % num_heads:
        raise ValueError(
            "d_model must be divisible by num_heads. "
            f"Received: d_model={d_model}, num_heads={num_heads}"
        )
    return d_model // num_heads


def layer_norm(layer, name, input_shape):
    norm = keras.layers.LayerNormalization(
        epsilon=layer.layer_norm_epsilon, dtype=layer.dtype_policy, name=name
    )
    norm.build(input_shape)
    return norm


def pre_norm(layer, norm, x):
    """Pre-LN normalizes the sublayer's input; post-LN leaves it."""
    return norm(x) if layer.norm_first else x


def add_norm(layer, norm, residual, x, training):
    """Dropout, residual add and, for post-LN, LayerNorm(x + Sublayer(x))."""
    x = residual + layer.residual_dropout(x, training=training)
    return x if layer.norm_first else norm(x)
