"""Personalized PageRank by sparse power iteration (pure numpy/scipy).

With reset distribution r (the reset vector scaled to sum 1), damping d (the probability of
following an edge; LinearRAG uses d = 0.5) and the column-stochastic walk T of
:func:`livingrag.retrieval.graph.transition_matrix`, the scores are the fixed point of

    p = (1 - d) r + d (T p + (sum_{j dangling} p_j) r)

i.e. a walker at a node without edges restarts from r. Iteration stops when the L1 change
||p_{k+1} - p_k||_1 falls below ``tol``; since the map contracts by d, the error left is at most
tol * d / (1 - d). Scores sum to 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True)
class PPRResult:
    scores: np.ndarray
    iterations: int
    converged: bool
    residual: float


def personalized_pagerank(
    transition: sp.csr_matrix,
    reset: np.ndarray,
    *,
    damping: float = 0.5,
    tol: float = 1e-7,
    max_iter: int = 100,
    dangling: np.ndarray | None = None,
) -> PPRResult:
    """Solve p = (1 - d) r + d (T p + dangling mass * r) by power iteration from p0 = r.

    Negative or NaN reset entries are treated as 0 (as LinearRAG does). An all-zero reset gives
    all-zero scores.
    """
    if not 0.0 < damping < 1.0:
        raise ValueError(f"damping must lie in (0, 1), got {damping}")
    r = np.asarray(reset, dtype=np.float64)
    r = np.where(np.isnan(r) | (r < 0), 0.0, r)
    total = r.sum()
    if total <= 0:
        return PPRResult(np.zeros_like(r), 0, True, 0.0)
    r = r / total
    teleport = (1.0 - damping) * r
    dangling_idx = np.flatnonzero(dangling) if dangling is not None and np.any(dangling) else None
    p = r.copy()
    residual = float("inf")
    for k in range(1, max_iter + 1):
        nxt = transition @ p
        if dangling_idx is not None:
            nxt += p[dangling_idx].sum() * r
        nxt *= damping
        nxt += teleport
        residual = float(np.abs(nxt - p).sum())
        p = nxt
        if residual < tol:
            return PPRResult(p, k, True, residual)
    return PPRResult(p, max_iter, False, residual)


__all__ = ["PPRResult", "personalized_pagerank"]
