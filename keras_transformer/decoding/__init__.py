"""Greedy and beam search, and the exportable `Translator`."""

from keras_transformer.decoding.beam_search import beam_search, length_penalty
from keras_transformer.decoding.greedy import greedy_search
from keras_transformer.decoding.translator import Translator

__all__ = ["Translator", "beam_search", "greedy_search", "length_penalty"]
