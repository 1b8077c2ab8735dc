"""Cosine similarity on dense vectors and on sparse activation maps ({entity_id: weight})."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

SparseVector = Mapping[int, float]


def sparse_norm(a: SparseVector) -> float:
    """Euclidean norm ``sqrt(sum_i a_i^2)`` of a sparse vector (0 for an empty one)."""
    return math.sqrt(sum(v * v for v in a.values()))


def sparse_dot(a: SparseVector, b: SparseVector) -> float:
    """``sum_i a_i * b_i`` over the keys both vectors share (iterates over the smaller one)."""
    if len(a) > len(b):
        a, b = b, a
    return float(sum(v * b[k] for k, v in a.items() if k in b))


def sparse_cosine(a: SparseVector, b: SparseVector) -> float:
    """``cos(a, b) = a.b / (|a| |b|)``; 0 when either vector is empty or all zero."""
    na, nb = sparse_norm(a), sparse_norm(b)
    if na == 0.0 or nb == 0.0:
        return 0.0
    return sparse_dot(a, b) / (na * nb)


def unit_sparse(a: SparseVector) -> dict[int, float]:
    """``a / |a|`` (an empty dict for an all-zero vector)."""
    n = sparse_norm(a)
    if n == 0.0:
        return {}
    return {k: v / n for k, v in a.items()}


def dense_cosines(query: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """``cos(query, row_k)`` for every row of ``matrix`` (rows of norm 0 score 0)."""
    q = np.asarray(query, dtype=np.float64)
    m = np.asarray(matrix, dtype=np.float64)
    if m.ndim != 2 or m.shape[1] != q.shape[0]:
        raise ValueError(f"matrix of shape {m.shape} does not match a query of dimension {q.shape[0]}")
    qn = float(np.linalg.norm(q))
    rn = np.linalg.norm(m, axis=1)
    if qn == 0.0:
        return np.zeros(m.shape[0])
    with np.errstate(divide="ignore", invalid="ignore"):
        out = (m @ q) / (rn * qn)
    return np.where(rn > 0, out, 0.0)
