"""Passage scoring around PPR (pure numpy/scipy): dense scores, passage reset, eq. 27.

Passage reset (LinearRAG; docs/corpora-and-retrieval.md, LinearRAG's reference):

    reset(p) = w_p * ( ratio * minmax(cos(q, p)) + ln(1 + sum_e score(e) * ln(1 + c(p, e)) / tier(e)) )

over the activated entities e, with c(p, e) the mention count from the index-time sparse matrix,
``ratio`` = passage_ratio and w_p = passage_node_weight.

Length normalisation (paper eq. 27, appendix F.2):

    score'(p) = score(p) / ((1 - b) + b * |p| / mean|p|)

with b = 0 leaving scores unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import scipy.sparse as sp


def dense_scores(passage_embeddings: np.ndarray, question_embedding: np.ndarray) -> np.ndarray:
    """cos(q, p) for every passage (rows and question are unit vectors)."""
    scores: np.ndarray = passage_embeddings @ np.asarray(question_embedding, dtype=passage_embeddings.dtype)
    return scores


def max_scaled(x: np.ndarray) -> np.ndarray:
    """x / max|x| (float64); x itself when every value is 0 (title pages and the feedback re-ranking
    put a ranking's scores on this scale before they add to them)."""
    x = np.asarray(x, dtype=np.float64)
    top = float(np.max(np.abs(x))) if x.size else 0.0
    return x / top if top > 0 else x


def min_max(x: np.ndarray) -> np.ndarray:
    """(x - min) / (max - min); all ones when every value is equal (as LinearRAG's helper)."""
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return x
    lo, hi = float(x.min()), float(x.max())
    if hi - lo == 0:
        return np.ones_like(x)
    return (x - lo) / (hi - lo)


def entity_bonus(
    entity_mention_log: sp.csr_matrix, scores: Mapping[int, float], tiers: Mapping[int, int]
) -> np.ndarray:
    """sum_e score(e) * ln(1 + c(p, e)) / tier(e) for every passage p.

    ``entity_mention_log`` is the (n_e x n_p) CSR matrix ln(1 + c(e, p)); only the rows of the
    activated entities are read (a few dozen of tens of thousands), so the cost follows their
    mentions, not the corpus.
    """
    n_p = entity_mention_log.shape[1]
    if not scores:
        return np.zeros(n_p, dtype=np.float64)
    rows = np.fromiter(scores.keys(), dtype=np.int64, count=len(scores))
    w = np.fromiter((s / max(tiers.get(e, 1), 1) for e, s in scores.items()), dtype=np.float64, count=len(scores))
    ip = entity_mention_log.indptr
    starts = ip[rows].astype(np.int64)
    lens = ip[rows + 1].astype(np.int64) - starts
    n = int(lens.sum())
    if n == 0:
        return np.zeros(n_p, dtype=np.float64)
    # positions of every stored value of the chosen rows, row after row
    at = np.repeat(starts - (np.cumsum(lens) - lens), lens) + np.arange(n)
    vals = entity_mention_log.data[at].astype(np.float64) * np.repeat(w, lens)
    return np.bincount(entity_mention_log.indices[at], weights=vals, minlength=n_p)


def passage_reset(
    dense: np.ndarray, bonus: np.ndarray, *, passage_ratio: float, passage_node_weight: float
) -> np.ndarray:
    """w_p * (ratio * minmax(dense) + ln(1 + bonus)): LinearRAG's passage reset (see the module docstring)."""
    reset: np.ndarray = passage_node_weight * (passage_ratio * min_max(dense) + np.log1p(np.maximum(bonus, 0.0)))
    return reset


def length_normalize(scores: np.ndarray, lengths: np.ndarray, b: float) -> np.ndarray:
    """Eq. 27: score / ((1 - b) + b * |p| / mean|p|); b = 0 returns the scores unchanged."""
    if b == 0 or len(scores) == 0:
        return np.asarray(scores, dtype=np.float64)
    lengths = np.asarray(lengths, dtype=np.float64)
    mean = float(lengths.mean()) or 1.0
    return np.asarray(scores, dtype=np.float64) / ((1.0 - b) + b * lengths / mean)


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest scores, best first; ties go to the lower index (content order)."""
    k = min(k, len(scores))
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    if k < len(scores):
        part = np.argpartition(-scores, k - 1)[:k]
        # include every index tied with the k-th score so the tie-break is by index
        kth = scores[part].min()
        part = np.flatnonzero(scores >= kth)
    else:
        part = np.arange(len(scores))
    order = np.lexsort((part, -scores[part]))
    return part[order][:k]


__all__ = ["dense_scores", "entity_bonus", "length_normalize", "min_max", "passage_reset", "top_k"]
