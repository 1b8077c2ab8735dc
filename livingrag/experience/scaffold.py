"""Scaffold selection (paper eq. 12-13).

    s_k^scaf = (1 - lambda) * s_k^ret + lambda * cos(Emb(T(q_t)), Emb(T(q_k)))   (eq. 12)
    e^scaf   = argmax_k s_k^scaf                                                  (eq. 13)

No scaffold is selected when there is no candidate or when the best score is under a floor (the
paper's "no useful scaffold"). With ``lambda = 0`` the scaffold is the best retrieval match.

Beyond the paper, a candidate whose template similarity is under a template floor is not eligible
at all: a high s_k^ret from a shared entity can otherwise make the scaffold of a question of
another form win (the demo's "which film came out first" shown as the pattern for "where was the
director born"), and the small offline model follows the scaffold it is given.
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


def select_scaffold(
    scores: np.ndarray,
    floor: float,
    template_similarities: np.ndarray | None = None,
    template_floor: float = 0.0,
) -> int | None:
    """Eq. 13 over the eligible candidates: index of the highest score (the first one on ties)
    among those with ``template_similarities >= template_floor`` (all of them when no similarities
    are given), or ``None`` when none is eligible or the best eligible score is below ``floor``."""
    s = np.asarray(scores, dtype=np.float64)
    if template_similarities is not None:
        t = np.asarray(template_similarities, dtype=np.float64)
        if t.shape != s.shape:
            raise ValueError(f"{s.size} scaffold scores but {t.size} template similarities")
        s = np.where(t >= template_floor, s, -np.inf)
    if s.size == 0 or not np.isfinite(s).any():
        return None
    best = int(np.argmax(s))
    return best if s[best] >= floor else None


def select_findings(
    retrieval_scores: np.ndarray,
    ranked: np.ndarray,
    floor: float,
    k: int,
    exclude: int | None = None,
) -> list[int]:
    """Findings (beyond the paper): the earlier answers stated as facts in the prompt.

        F = the first k of { j in ranked : s_j^ret >= floor, j != exclude }

    ``ranked`` holds candidate indices best first (eq. 7's top K); ``retrieval_scores`` is s^ret of
    eq. 7 for every candidate; ``exclude`` leaves one candidate out (``livingrag bench reuse`` counts
    the findings without the eq. 13 scaffold's experience this way). Where the scaffold shows one
    pattern of the same question form and may mask its names, findings keep the names: an earlier
    question that shares a hop with this one holds that hop's answer, which is what the answer model
    needs when today's passages miss it; the floor keeps questions that share no entity out."""
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    s = np.asarray(retrieval_scores, dtype=np.float64)
    out: list[int] = []
    for j in np.asarray(ranked, dtype=np.int64).tolist():
        if len(out) >= k:
            break
        if j == exclude or not 0 <= j < s.size:
            continue
        if s[j] >= floor:
            out.append(int(j))
    return out
