"""Experience matching (paper eq. 7) and optional time decay.

    s_k^ret = alpha * cos(Emb(q_t), v_k) + (1 - alpha) * cos(a_base, a~_k)      (eq. 7)

The same score with the base activation is eta_k of the novelty gate (eq. 17).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from livingrag.experience.similarity import SparseVector, dense_cosines, pack, sparse_cosines_flat
from livingrag.sparse import concat_sparse


@dataclass(frozen=True)
class Scores:
    """Per-candidate scores: the combined score and its two terms."""

    combined: np.ndarray
    embedding: np.ndarray
    activation: np.ndarray


def retrieval_scores(
    query_embedding: np.ndarray,
    embeddings: np.ndarray,
    base_activation: SparseVector,
    maps: Sequence[SparseVector],
    alpha: float,
) -> Scores:
    """Eq. 7 for every candidate: ``alpha * cos(q, v_k) + (1 - alpha) * cos(a_base, a~_k)``, from
    the embeddings themselves (see :func:`retrieval_scores_from_cosines` for the matching path)."""
    n = len(maps)
    packed = [pack(m) for m in maps]
    flat_ids, flat_w, lengths = concat_sparse([ids for ids, _ in packed], [w for _, w in packed])
    emb = np.asarray(embeddings, dtype=np.float64).reshape(n, -1) if n else np.zeros((0, 1))
    if emb.shape[0] != n:
        raise ValueError(f"{emb.shape[0]} embeddings for {n} activation maps")
    e = dense_cosines(query_embedding, emb) if n else np.zeros(0)
    return retrieval_scores_from_cosines(e, base_activation, flat_ids, flat_w, lengths, alpha)


def retrieval_scores_from_cosines(
    embedding_cosines: np.ndarray,
    base_activation: SparseVector,
    entity_ids: np.ndarray,
    weights: np.ndarray,
    lengths: np.ndarray,
    alpha: float,
) -> Scores:
    """Eq. 7, ``alpha * cos(q, v_k) + (1 - alpha) * cos(a_base, a~_k)``, given the embedding
    cosines ``cos(q, v_k)`` (as preselection returns them) and the candidates' maps concatenated
    (candidate ``k`` owns the next ``lengths[k]`` id/weight pairs): no per-candidate arrays to
    gather."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha}")
    e = np.asarray(embedding_cosines, dtype=np.float64)
    if e.shape != (len(lengths),):
        raise ValueError(f"{e.shape[0] if e.ndim else 0} embedding cosines for {len(lengths)} activation maps")
    a = sparse_cosines_flat(base_activation, entity_ids, weights, lengths)
    return Scores(combined=alpha * e + (1.0 - alpha) * a, embedding=e, activation=a)


def decay_factors(ages_days: np.ndarray, half_life_days: float | None) -> np.ndarray:
    """Time decay of an experience's matching weight: ``0.5 ** (age / half_life)``.

    ``None`` switches decay off (all factors 1), which reproduces the paper. Negative ages (clock
    skew) count as zero.
    """
    ages = np.maximum(np.asarray(ages_days, dtype=np.float64), 0.0)
    if half_life_days is None:
        return np.ones_like(ages)
    if half_life_days <= 0:
        raise ValueError(f"half-life must be positive, got {half_life_days}")
    return np.power(0.5, ages / half_life_days)


def apply_decay(scores: np.ndarray, factors: np.ndarray) -> np.ndarray:
    """Decayed score: ``s_k * d_k`` for ``s_k >= 0``; a negative score is left as it is (decay
    must never raise a score towards the others)."""
    s = np.asarray(scores, dtype=np.float64)
    return np.where(s >= 0, s * factors, s)


def top_k(ids: Sequence[int], scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` highest scores, best first; ties go to the smaller id (deterministic)."""
    if k <= 0 or len(ids) == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((np.asarray(ids), -np.asarray(scores, dtype=np.float64)))
    return order[:k]
