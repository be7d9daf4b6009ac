"""benchmarks/ensemble_bleu.py: the ensemble the search decodes with."""

import numpy as np
import pytest
from helpers import benchmark_script

from keras_transformer.decoding import beam_search
from keras_transformer.models import Transformer

SOURCE = np.array([[5, 6, 7, 3], [8, 9, 3, 0]], "int32")


def _model(seed, layers=1):
    import keras

    keras.utils.set_random_seed(seed)
    model = Transformer(
        vocab_size=24, num_layers=layers, d_model=8, num_heads=2, d_ff=16, max_length=16
    )
    model((SOURCE, SOURCE))
    return model


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.slow
def test_decodes_the_log_of_the_members_mean_probability():
    ensemble_cls = benchmark_script("ensemble_bleu").Ensemble
    a, b = _model(1), _model(2, layers=2)
    ensemble = ensemble_cls([a, b])
    target = np.array([[2, 10, 11], [2, 12, 0]], "int32")
    memory, mask = ensemble.encode(SOURCE)
    out = np.asarray(ensemble.decode(target, memory, mask))
    probs = [
        _softmax(np.asarray(m.decode(target, *m.encode(SOURCE)), "float64"))
        for m in (a, b)
    ]
    np.testing.assert_allclose(out, np.log((probs[0] + probs[1]) / 2), atol=1e-5)


@pytest.mark.slow
def test_cached_search_is_the_uncached_one_and_a_self_ensemble_the_model():
    ensemble_cls = benchmark_script("ensemble_bleu").Ensemble
    a, b = _model(1), _model(2, layers=2)
    ensemble = ensemble_cls([a, b])
    settings = {"beam_size": 3, "alpha": 0.6, "max_length": 8}
    cached = beam_search(ensemble, SOURCE, **settings)
    uncached = beam_search(ensemble, SOURCE, use_cache=False, **settings)
    np.testing.assert_array_equal(cached["ids"], uncached["ids"])
    np.testing.assert_allclose(cached["scores"], uncached["scores"], atol=1e-5)
    alone = beam_search(a, SOURCE, **settings)
    twice = beam_search(ensemble_cls([a, a]), SOURCE, **settings)
    np.testing.assert_array_equal(alone["ids"], twice["ids"])
    np.testing.assert_allclose(alone["log_probs"], twice["log_probs"], atol=1e-5)
    assert ensemble.max_length == 16


def test_refuses_members_with_different_vocabularies(tmp_path):
    script = benchmark_script("ensemble_bleu")
    for name, content in (("a", b"one"), ("b", b"two")):
        (tmp_path / name / "tokenizer").mkdir(parents=True)
        (tmp_path / name / "tokenizer" / "tokenizer.model").write_bytes(content)
    out = str(tmp_path / "out")
    with pytest.raises(SystemExit, match="tokenizers differ"):
        script.main([str(tmp_path / "a"), str(tmp_path / "b"), "--out", out])
