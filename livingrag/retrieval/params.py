"""The numbers one retrieval runs with (pure data; :mod:`livingrag.retrieval.presets` fills it)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class RetrievalParams:
    """LinearRAG's retrieval settings plus this implementation's own.

    LinearRAG's are described in docs/corpora-and-retrieval.md (LinearRAG's reference).

    max_iterations / passage_ratio / delta / top_k_sentence are the reference's per-dataset
    numbers; passage_node_weight, damping and the PPR tolerance are shared; length_norm_b is the
    b of eq. 27 (0 = off).
    """

    max_iterations: int = 3
    passage_ratio: float = 0.05
    delta: float = 0.4
    top_k_sentence: int = 1
    passage_node_weight: float = 0.05
    damping: float = 0.5
    ppr_tol: float = 1e-4
    ppr_max_iter: int = 100
    length_norm_b: float = 0.0
    top_k: int = 5
    min_link_score: float = 0.0
    question_gazetteer: bool = True
    question_ner: str = "fallback"  # always | fallback (only when the gazetteer finds nothing) | never
    query_threads: int | None = 1
    common_word_share: float = 0.0
    title_boost: float = 0.0
    prf_depth: int = 0
    prf_weight: float = 1.0
    prf_mix: float = 0.3
    prf_pool: int = 10

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


__all__ = ["RetrievalParams"]
