"""One retrieval over a :class:`~livingrag.retrieval.corpus_graph.CorpusGraph` (pure numpy/scipy).

    seeds (a_base, or a0 of eq. 8)
      -> semantic bridging (propagation.py)           entity weights, scores, tiers
      -> passage reset (scoring.py)                    dense term + entity bonus from the mention matrix
      -> Personalized PageRank (ppr.py, BipartitePPR)  reset = entity weights ++ passage resets
                                                       (only the passages' scores are solved for)
      -> eq. 27 length normalisation
      -> title pages of the activated entities lifted (title_pages.py; title_boost 0: off), ranking
      -> pseudo-relevance re-ranking of the first ``prf_pool`` (pseudo_relevance.py; prf_depth 0: off)

With no seed, passages are ranked by the dense score alone (LinearRAG's fallback).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from livingrag.retrieval.corpus_graph import CorpusGraph
from livingrag.retrieval.params import RetrievalParams
from livingrag.retrieval.propagation import semantic_bridging
from livingrag.retrieval.pseudo_relevance import pseudo_relevance_rerank
from livingrag.retrieval.scoring import dense_scores, entity_bonus, length_normalize, passage_reset, top_k
from livingrag.retrieval.title_pages import title_boost


@dataclass(frozen=True)
class Ranking:
    """Passage rows best first with their scores, and the entity activations (by entity row)."""

    passages: np.ndarray
    scores: np.ndarray
    final_activation: dict[int, float]
    entity_scores: dict[int, float]
    tiers: dict[int, int]
    dense_fallback: bool
    ppr_iterations: int = 0
    timings: dict[str, float] = field(default_factory=dict)


def rank_passages(
    graph: CorpusGraph,
    question_embedding: np.ndarray,
    seeds: Mapping[int, float],
    params: RetrievalParams,
    *,
    k: int | None = None,
    dense: np.ndarray | Callable[[], np.ndarray] | None = None,
    adjust_passages: Callable[[np.ndarray], np.ndarray] | None = None,
) -> Ranking:
    """Rank the graph's passages for one question starting from ``seeds`` ({entity row: weight}).

    ``dense``: cos(q, p) of every passage, computed here when None. A callable is called only when
    the scores are needed, after the propagation: a caller computing them on another thread (the
    retriever) waits for them as late as possible (``dense_wait_ms`` in the timings).

    ``adjust_passages`` (None: unchanged) maps the passages' PPR reset vector (or, with no seed, the
    length-normalised dense scores) to the one used; the reuse benchmark adds a passage memory there.
    """
    k = params.top_k if k is None else k
    timings: dict[str, float] = {}

    def dense_term() -> np.ndarray:
        t0 = time.perf_counter()
        if dense is None:
            out = dense_scores(graph.passage_embeddings, question_embedding)
            timings["dense_ms"] = (time.perf_counter() - t0) * 1000
            return out
        if callable(dense):
            out = dense()
            timings["dense_wait_ms"] = (time.perf_counter() - t0) * 1000
            return out
        return dense

    seeds = {int(e): float(w) for e, w in seeds.items() if w > 0}
    if not seeds:
        scores = length_normalize(dense_term(), graph.passage_lengths, params.length_norm_b)
        if adjust_passages is not None:
            scores = adjust_passages(scores)
        order, top = _ranked(graph, question_embedding, scores, params, k)
        return Ranking(order, top, {}, {}, {}, True, 0, timings)

    t1 = time.perf_counter()
    bridge = semantic_bridging(
        seeds,
        question_embedding,
        graph.sentence_embeddings,
        graph.entity_sentences,
        graph.sentence_entities,
        max_iterations=params.max_iterations,
        delta=params.delta,
        top_k_sentence=params.top_k_sentence,
    )
    timings["propagation_ms"] = (time.perf_counter() - t1) * 1000
    cosines = dense_term()

    t2 = time.perf_counter()
    bonus = entity_bonus(graph.entity_mention_log, bridge.scores, bridge.tiers)
    p_reset = passage_reset(
        cosines, bonus, passage_ratio=params.passage_ratio, passage_node_weight=params.passage_node_weight
    )
    if adjust_passages is not None:
        p_reset = adjust_passages(p_reset)
    rows = np.fromiter(bridge.weights.keys(), dtype=np.int64, count=len(bridge.weights))
    weights = np.fromiter(bridge.weights.values(), dtype=np.float64, count=len(bridge.weights))
    t3 = time.perf_counter()
    timings["passage_scoring_ms"] = (t3 - t2) * 1000

    ppr = graph.ppr.solve_passages(
        rows, weights, p_reset, damping=params.damping, tol=params.ppr_tol, max_iter=params.ppr_max_iter
    )
    scores = length_normalize(ppr.scores, graph.passage_lengths, params.length_norm_b)
    timings["ppr_ms"] = (time.perf_counter() - t3) * 1000
    if params.title_boost > 0:
        t_title = time.perf_counter()
        scores = title_boost(scores, bridge.weights, graph.entity_title_passages, params.title_boost)
        timings["title_ms"] = (time.perf_counter() - t_title) * 1000
    t4 = time.perf_counter()
    order, top = _ranked(graph, question_embedding, scores, params, k)
    if params.prf_depth > 0:
        timings["prf_ms"] = (time.perf_counter() - t4) * 1000
    return Ranking(
        passages=order,
        scores=top,
        final_activation=dict(bridge.weights),
        entity_scores=dict(bridge.scores),
        tiers=dict(bridge.tiers),
        dense_fallback=False,
        ppr_iterations=ppr.iterations,
        timings=timings,
    )


def _ranked(
    graph: CorpusGraph, question_embedding: np.ndarray, scores: np.ndarray, params: RetrievalParams, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best passage rows and their scores: by ``scores``, or, with ``prf_depth`` > 0, the
    first max(k, prf_pool) re-ranked by pseudo-relevance feedback (their scores are then s')."""
    if params.prf_depth <= 0:
        order = top_k(scores, k)
        return order, scores[order]
    pool = top_k(scores, max(k, params.prf_pool))
    rows, combined = pseudo_relevance_rerank(
        pool,
        scores[pool],
        graph.passage_embeddings,
        question_embedding,
        depth=params.prf_depth,
        weight=params.prf_weight,
        mix=params.prf_mix,
    )
    return rows[:k], combined[:k]


__all__ = ["Ranking", "rank_passages"]
