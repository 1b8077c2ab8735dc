"""Semantic bridging: entity activation spread through sentences (pure numpy/scipy).

LinearRAG's propagation as its reference code does it (docs/corpora-and-retrieval.md,
LinearRAG's reference), in one precise form:

* Round 0: the start activation a0 (the seeds; tier 1). weight(e) = a0(e).
* Round t = 1 .. max_iterations - 1, over the frontier F_{t-1} (the entities reached in the
  previous round, with the score that reached them), strongest first: an entity e with score
  s_e >= delta takes its sentences not yet used by this query, keeps the ``top_k_sentence`` most
  similar to the question (cosine sim(q, s)), marks them used, and for every entity e' in each
  kept sentence computes v = s_e * sim(q, s). If v >= delta: weight(e') += v, e' joins F_t with
  score max(v, ...), and its tier is t + 1 unless it already had one (the tier is the round that
  first reached it).
* The final activation (a_final, eq. 5) is the weight vector; the passage reset uses each
  activated entity's strongest score and its tier.

Two deliberate differences from the reference code, both to make the result independent of
dictionary and corpus order: entities of one round are processed strongest first (ties by row,
which is content-ordered), and an entity reached twice in a round keeps its strongest score
instead of the last one; a seed keeps tier 1 and its seed score when a sentence re-reaches it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True)
class BridgeResult:
    """Entity rows -> accumulated weight, strongest score, tier (1 = seed)."""

    weights: dict[int, float]
    scores: dict[int, float]
    tiers: dict[int, int]
    used_sentences: tuple[int, ...]
    rounds: int


def semantic_bridging(
    seeds: Mapping[int, float],
    question_embedding: np.ndarray,
    sentence_embeddings: np.ndarray,
    entity_sentences: sp.csr_matrix,
    sentence_entities: sp.csr_matrix,
    *,
    max_iterations: int,
    delta: float,
    top_k_sentence: int,
) -> BridgeResult:
    """Spread ``seeds`` ({entity row: activation}) through sentences (see the module docstring).

    Sentence similarities are computed only for the sentences of frontier entities.
    """
    weights: dict[int, float] = {int(e): float(s) for e, s in seeds.items()}
    scores: dict[int, float] = dict(weights)
    tiers: dict[int, int] = dict.fromkeys(weights, 1)
    used = np.zeros(sentence_embeddings.shape[0], dtype=bool)
    used_order: list[int] = []
    sims_all = np.full(sentence_embeddings.shape[0], np.nan, dtype=np.float64)
    frontier = dict(weights)
    ep, ei = entity_sentences.indptr, entity_sentences.indices
    sp_, si = sentence_entities.indptr, sentence_entities.indices
    q = np.asarray(question_embedding, dtype=np.float32)
    rounds = 0
    for t in range(1, max_iterations):
        active = sorted(((s, e) for e, s in frontier.items() if s >= delta), key=lambda x: (-x[0], x[1]))
        if not active:
            break
        rounds = t
        # similarities for every sentence the frontier can reach, in one product
        cand_all = np.unique(np.concatenate([ei[ep[e] : ep[e + 1]] for _, e in active]))
        need = cand_all[np.isnan(sims_all[cand_all])]
        if need.size:
            sims_all[need] = sentence_embeddings[need] @ q
        nxt: dict[int, float] = {}
        for s_e, e in active:
            cand = ei[ep[e] : ep[e + 1]]
            cand = cand[~used[cand]]
            if cand.size == 0:
                continue
            sims = sims_all[cand]
            order = np.argsort(-sims, kind="stable")[:top_k_sentence]
            for j in order:
                s = int(cand[j])
                used[s] = True
                used_order.append(s)
                v = s_e * sims[j]
                if v < delta:
                    continue
                for e2 in si[sp_[s] : sp_[s + 1]]:
                    e2 = int(e2)
                    weights[e2] = weights.get(e2, 0.0) + v
                    if v > nxt.get(e2, -np.inf):
                        nxt[e2] = v
                    if e2 not in tiers:
                        tiers[e2] = t + 1
                    if v > scores.get(e2, -np.inf):
                        scores[e2] = v
        frontier = nxt
        if not frontier:
            break
    return BridgeResult(weights=weights, scores=scores, tiers=tiers, used_sentences=tuple(used_order), rounds=rounds)


__all__ = ["BridgeResult", "semantic_bridging"]
