"""Cosine similarity on dense vectors and on sparse activation maps ({entity_id: weight})."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from livingrag.sparse import concat_sparse

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
    rn = np.sqrt(np.einsum("ij,ij->i", m, m))
    if qn == 0.0:
        return np.zeros(m.shape[0])
    # einsum, not BLAS: for a few dozen rows BLAS threads cost more than they save, and on a busy
    # machine their spinning steals CPU from the database.
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.einsum("ij,j->i", m, q) / (rn * qn)
    return np.where(rn > 0, out, 0.0)


def pack(activation: SparseVector) -> tuple[np.ndarray, np.ndarray]:
    """A sparse vector as (entity ids int64, weights float64) arrays."""
    ids = np.fromiter((int(k) for k in activation), dtype=np.int64, count=len(activation))
    w = np.fromiter((float(v) for v in activation.values()), dtype=np.float64, count=len(activation))
    return ids, w


def sparse_cosines(base: SparseVector, ids: Sequence[np.ndarray], weights: Sequence[np.ndarray]) -> np.ndarray:
    """``cos(base, a_k)`` for many sparse vectors given as id/weight arrays (vectorised
    :func:`sparse_cosine`; an empty or all-zero vector on either side scores 0)."""
    return sparse_cosines_flat(base, *concat_sparse(ids, weights))


def sparse_cosines_flat(base: SparseVector, ids: np.ndarray, weights: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """:func:`sparse_cosines` with the vectors concatenated: vector ``k`` is the ``lengths[k]``
    (id, weight) pairs after those of vectors ``0..k-1``. ``cos(base, a_k) = sum_e base[e] a_k[e]
    / (|base| |a_k|)``, 0 where either norm is 0."""
    lengths = np.asarray(lengths, dtype=np.int64)
    n = len(lengths)
    if n == 0:
        return np.zeros(0)
    all_ids = np.asarray(ids).astype(np.int64, copy=False)
    all_w = np.asarray(weights).astype(np.float64, copy=False)
    if all_ids.shape != all_w.shape or all_ids.shape[0] != int(lengths.sum()):
        raise ValueError(f"{all_ids.shape[0]} ids and {all_w.shape[0]} weights for lengths summing to {lengths.sum()}")
    bn = sparse_norm(base)
    if all_ids.shape[0] == 0 or bn == 0.0:
        return np.zeros(n)
    rows = np.repeat(np.arange(n), lengths)
    norms = np.sqrt(np.bincount(rows, weights=all_w * all_w, minlength=n))
    b_ids, b_w = pack(base)
    order = np.argsort(b_ids)
    b_ids, b_w = b_ids[order], b_w[order]
    pos = np.minimum(np.searchsorted(b_ids, all_ids), len(b_ids) - 1)  # searchsorted never returns < 0
    contrib = np.where(b_ids[pos] == all_ids, all_w * b_w[pos], 0.0)
    dots = np.bincount(rows, weights=contrib, minlength=n)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(norms > 0, dots / (norms * bn), 0.0)
