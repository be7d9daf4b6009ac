"""A uniform random sample of a stream of unknown length, in bounded memory."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np


def reservoir_sample(
    chunks: Iterable[Sequence], size: int, seed: int = 0
) -> tuple[list, int]:
    """`size` items drawn uniformly without replacement from a stream.

    Reservoir sampling (Li's "Algorithm L", 1994): one pass, `size` items in
    memory, and the random numbers drawn only for the items taken, so the
    items skipped are never touched (a chunk may be a NumPy array of bytes
    that is never decoded). The stream comes in chunks, e.g. the batches of
    a `tf.data` pipeline.

    When the stream holds at most `size` items the sample is all of them, in
    their order; otherwise the reservoir's order, which is not the stream's.
    The same stream and seed give the same sample.

    Args:
        chunks: the stream, as sequences of items (lists, tuples, arrays).
        size: the number of items to keep, at least 1.
        seed: seed of the draw.

    Returns:
        `(sample, total)`: the items kept (a list) and the number of items
        the stream held.

    Raises:
        ValueError: `size` is not positive.

    Example:
        >>> reservoir_sample([["a", "b"], ["c"]], size=5)
        (['a', 'b', 'c'], 3)
        >>> sample, total = reservoir_sample([range(1000)] * 3, size=10, seed=1)
        >>> len(sample), total, all(0 <= x < 1000 for x in sample)
        (10, 3000, True)
    """
    if size < 1:
        raise ValueError(f"size must be positive. Received: size={size}")
    rng = np.random.default_rng(seed)
    sample: list = []
    total = 0
    weight = 1.0
    next_index = size  # the next item to take once the reservoir is full

    def uniform() -> float:
        return 1.0 - rng.random()  # in (0, 1]: its logarithm is finite

    def skip() -> int:
        # The gap to the next item taken: geometric in `weight`.
        if weight >= 1.0:
            return 1
        return int(math.log(uniform()) / math.log1p(-weight)) + 1

    for chunk in chunks:
        n = len(chunk)
        start = total
        total += n
        if len(sample) < size:
            sample.extend(chunk[: size - len(sample)])
            if len(sample) < size:
                continue
            weight = math.exp(math.log(uniform()) / size)
            next_index = size - 1 + skip()
        while next_index < total:
            sample[int(rng.integers(size))] = chunk[next_index - start]
            weight *= math.exp(math.log(uniform()) / size)
            next_index += skip()
    return sample, total
