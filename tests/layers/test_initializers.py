"""Every sublayer starts from its own weights, whatever initializer is given.

Keras 3 initializers draw statelessly from a seed fixed when they are made:
one object shared by the layers of a stack gave every layer the same
starting feed-forward kernels (the bug these tests guard against).
"""

import itertools
import re

import keras
import numpy as np
import pytest

from keras_transformer.layers import Decoder, DecoderLayer, Encoder, EncoderLayer
from keras_transformer.layers.initializers import clone_initializer
from keras_transformer.models import Transformer

B, S, T, D = 2, 5, 4, 16
INITIALIZERS = {
    "string": lambda: "glorot_uniform",
    "object": lambda: keras.initializers.GlorotUniform(),
    "seeded": lambda: keras.initializers.GlorotUniform(seed=3),
    "normal": lambda: keras.initializers.RandomNormal(stddev=0.05),
}


def build_encoder(initializer):
    encoder = Encoder(
        num_layers=3, num_heads=2, d_ff=24, kernel_initializer=initializer
    )
    encoder(np.ones((B, S, D), "float32"))
    return encoder


def build_decoder(initializer):
    decoder = Decoder(
        num_layers=3, num_heads=2, d_ff=24, kernel_initializer=initializer
    )
    decoder(np.ones((B, T, D), "float32"), np.ones((B, S, D), "float32"))
    return decoder


def build_transformer(initializer):
    del initializer  # The model's layers use their default initializer.
    model = Transformer(vocab_size=64, num_layers=3, d_model=D, num_heads=2, d_ff=24)
    ids = np.array([[3, 4, 5, 0]], "int32")
    model((ids, ids))
    return model


def kernels_by_role(model):
    """`{role: {layer path: kernel}}`, a role being e.g. `feed_forward/inner`.

    The path of a kernel is `.../layer_i/<role>/kernel`; kernels of one role
    in different layers (and different stacks) must differ.
    """
    roles = {}
    for variable in model.weights:
        match = re.match(r"(.*layer_\d+)/(.+)/kernel$", variable.path)
        if match:
            layer, role = match.groups()
            roles.setdefault(role, {})[layer] = np.asarray(variable)
    return roles


@pytest.mark.parametrize("initializer", sorted(INITIALIZERS))
@pytest.mark.parametrize(
    "build", [build_encoder, build_decoder, build_transformer], ids=lambda f: f.__name__
)
def test_layers_of_a_stack_start_from_different_kernels(build, initializer):
    roles = kernels_by_role(build(INITIALIZERS[initializer]()))
    assert "feed_forward/inner" in roles and "feed_forward/outer" in roles
    assert "self_attention/query" in roles
    for role, kernels in roles.items():
        assert len(kernels) >= 3, role
        for (a, ka), (b, kb) in itertools.combinations(kernels.items(), 2):
            assert not np.allclose(ka, kb), f"{role}: {a} == {b}"


@pytest.mark.parametrize("layer_class", [EncoderLayer, DecoderLayer])
def test_sublayers_of_one_layer_differ(layer_class):
    # inner (D, d_ff) and outer (d_ff, D) of a square feed-forward network,
    # with one seeded initializer: same shape, different starting values.
    layer = layer_class(
        num_heads=2, d_ff=D, kernel_initializer=keras.initializers.HeUniform(seed=5)
    )
    args = [np.ones((B, T, D), "float32")]
    if layer_class is DecoderLayer:
        args.append(np.ones((B, S, D), "float32"))
    layer(*args)
    inner = np.asarray(layer.feed_forward.inner.kernel)[0]
    outer = np.asarray(layer.feed_forward.outer.kernel)[0]
    assert inner.shape == outer.shape
    assert not np.allclose(inner, outer)


@pytest.mark.parametrize("build", [build_encoder, build_decoder])
def test_seeded_initializer_is_reproducible(build):
    first = [np.asarray(w) for w in build(keras.initializers.GlorotUniform(7)).weights]
    again = [np.asarray(w) for w in build(keras.initializers.GlorotUniform(7)).weights]
    other = [np.asarray(w) for w in build(keras.initializers.GlorotUniform(8)).weights]
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    assert not all(np.array_equal(a, b) for a, b in zip(first, other, strict=True))


def test_unseeded_models_reproducible_after_set_random_seed():
    keras.utils.set_random_seed(11)
    first = [np.asarray(w) for w in build_encoder("glorot_uniform").weights]
    keras.utils.set_random_seed(11)
    again = [np.asarray(w) for w in build_encoder("glorot_uniform").weights]
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))


def test_clone_initializer():
    seeded = keras.initializers.GlorotUniform(seed=1)
    a, b = clone_initializer(seeded, "a"), clone_initializer(seeded, "b")
    assert a is not seeded and a.get_config()["seed"] != b.get_config()["seed"]
    assert clone_initializer(seeded, "a").get_config() == a.get_config()
    unseeded = keras.initializers.GlorotUniform()
    x, y = clone_initializer(unseeded, "a"), clone_initializer(unseeded, "a")
    assert not np.allclose(x((4, 4)), y((4, 4)))
    zeros = clone_initializer("zeros", "a")
    assert isinstance(zeros, keras.initializers.Zeros)

    def function(shape, dtype=None):
        return np.zeros(shape)

    assert clone_initializer(function, "a") is function
