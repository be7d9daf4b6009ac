"""One initializer copy per sublayer, so no two sublayers start alike."""

import zlib

import keras


def clone_initializer(initializer, name):
    """A copy of `initializer` for the sublayer called `name`.

    Keras 3 initializers draw statelessly from a seed fixed when they are
    made, so one object given to several layers gives them the same
    starting weights. Each sublayer gets its own copy instead (as Keras's
    `MultiHeadAttention` and keras-hub do): an unseeded initializer's copy
    draws a seed of its own (reproducible after
    `keras.utils.set_random_seed`), and a seeded one's copy gets a seed
    derived from its seed and `name`, so that sublayers differ and a model
    built twice starts the same.

    Args:
        initializer: a Keras initializer, its name or its config.
        name: the sublayer's name, unique among its siblings.

    Returns:
        A new initializer object (a plain function is returned as is).

    Example:

    >>> import numpy as np
    >>> seeded = keras.initializers.GlorotUniform(seed=7)
    >>> a = clone_initializer(seeded, "layer_0")((2, 2))
    >>> b = clone_initializer(seeded, "layer_1")((2, 2))
    >>> again = clone_initializer(seeded, "layer_0")((2, 2))
    >>> bool(np.any(a != b)), bool(np.all(a == again))
    (True, True)
    """
    initializer = keras.initializers.get(initializer)
    if not isinstance(initializer, keras.initializers.Initializer):
        return initializer
    config = initializer.get_config()
    if isinstance(config.get("seed"), int):
        config["seed"] = zlib.crc32(f"{config['seed']}/{name}".encode()) % 2**31
    return initializer.__class__.from_config(config)
