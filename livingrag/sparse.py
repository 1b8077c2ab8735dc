"""Sparse vectors in their flat array form, the one layout that the experience repository reads
from PostgreSQL and the experience matcher scores (a pure module: numpy only, below the database
layer so that both may import it)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def concat_sparse(
    ids: Sequence[np.ndarray], weights: Sequence[np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Many sparse vectors (id and weight arrays each) as one ``(ids, weights, lengths)`` triple:
    vector ``k`` is the ``lengths[k]`` pairs after those of vectors ``0..k-1`` (the form of
    :func:`livingrag.experience.similarity.sparse_cosines_flat`). ``ids`` and ``weights`` must
    have the same number of vectors, and each vector as many ids as weights."""
    if len(ids) != len(weights):
        raise ValueError(f"{len(ids)} id arrays and {len(weights)} weight arrays: one of each per vector")
    n = len(ids)
    lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=n)
    weight_lengths = np.fromiter((len(x) for x in weights), dtype=np.int64, count=n)
    if not np.array_equal(lengths, weight_lengths):
        k = int(np.flatnonzero(lengths != weight_lengths)[0])
        raise ValueError(f"sparse vector {k} has {lengths[k]} ids and {weight_lengths[k]} weights")
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0), lengths
    return np.concatenate(ids), np.concatenate(weights), lengths
