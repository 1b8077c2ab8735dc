"""Scaffold selection (paper eq. 12-13).

    s_k^scaf = (1 - lambda) * s_k^ret + lambda * cos(Emb(T(q_t)), Emb(T(q_k)))   (eq. 12)
    e^scaf   = argmax_k s_k^scaf                                                  (eq. 13)

No scaffold is selected when there is no candidate or when the best score is under a floor (the
paper's "no useful scaffold"). With ``lambda = 0`` the scaffold is the best retrieval match.
"""

from __future__ import annotations

import numpy as np


def scaffold_scores(retrieval_scores: np.ndarray, template_similarities: np.ndarray, lam: float) -> np.ndarray:
    """Eq. 12 for every candidate."""
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lambda must lie in [0, 1], got {lam}")
    r = np.asarray(retrieval_scores, dtype=np.float64)
    t = np.asarray(template_similarities, dtype=np.float64)
    if r.shape != t.shape:
        raise ValueError(f"{r.size} retrieval scores but {t.size} template similarities")
    return (1.0 - lam) * r + lam * t


def select_scaffold(scores: np.ndarray, floor: float) -> int | None:
    """Eq. 13: index of the highest score (the first one on ties), or ``None`` when there is no
    candidate or the best score is below ``floor``."""
    s = np.asarray(scores, dtype=np.float64)
    if s.size == 0:
        return None
    best = int(np.argmax(s))
    return best if s[best] >= floor else None
