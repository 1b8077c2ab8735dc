"""Second-hop re-ranking by pseudo-relevance feedback (pure numpy).

The passages a multi-hop question misses are mostly second hops ranked 6-10: the passage of the
director whose name the first hop's passage gives. Rocchio's pseudo-relevance feedback moves the
question toward the passages ranked first, so that a passage close to "question + first hop"
rises, with no model call (the passage vectors are in the graph already):

    q' = (q + a * sum_{i < m} p_i) / ||q + a * sum_{i < m} p_i||     (p_i: the i-th ranked passage)
    s'_j = s_j / max_i |s_i| + b * cos(q', p_j)                       for the N ranked first

and the N passages are ordered by s' (ties keep the first order). m = ``prf_depth`` (0: off),
a = ``prf_weight``, b = ``prf_mix``, N = ``prf_pool``. s is the ranking's score (eq. 27's
length-normalised PPR score, or the dense score of the fallback), so the first term keeps the
graph's order and b decides how far the feedback may move a passage.
"""

from __future__ import annotations

import numpy as np

from livingrag.retrieval.scoring import max_scaled


def feedback_query(question_embedding: np.ndarray, feedback: np.ndarray, weight: float) -> np.ndarray:
    """q' = (q + a * sum_i p_i) / ||.|| for the rows p_i of ``feedback`` (q when the sum is the zero
    vector)."""
    q = np.asarray(question_embedding, dtype=np.float64) + weight * np.asarray(feedback, dtype=np.float64).sum(axis=0)
    norm = float(np.linalg.norm(q))
    out: np.ndarray = q / norm if norm > 0 else q
    return out


def pseudo_relevance_rerank(
    rows: np.ndarray,
    scores: np.ndarray,
    passage_embeddings: np.ndarray,
    question_embedding: np.ndarray,
    *,
    depth: int,
    weight: float,
    mix: float,
) -> tuple[np.ndarray, np.ndarray]:
    """The passages ``rows`` (ranked, with their ``scores``) ordered by s' (module docstring), with s'.

    Unchanged when ``depth`` is 0 or fewer than two passages are given. ``passage_embeddings`` are
    the graph's unit rows, indexed by ``rows``.
    """
    rows = np.asarray(rows, dtype=np.int64)
    scores = np.asarray(scores, dtype=np.float64)
    if depth <= 0 or rows.size < 2:
        return rows, scores
    vecs = np.asarray(passage_embeddings[rows], dtype=np.float64)
    q2 = feedback_query(question_embedding, vecs[:depth], weight)
    combined = max_scaled(scores) + mix * (vecs @ q2)
    order = np.argsort(-combined, kind="stable")
    return rows[order], combined[order]


__all__ = ["feedback_query", "pseudo_relevance_rerank"]
