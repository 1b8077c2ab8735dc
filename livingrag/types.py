"""Frozen dataclasses that cross module borders."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class CorpusInfo:
    id: int
    tenant_id: int
    name: str
    embedding_model: str
    embedding_dim: int
    ner_model: str
    extractor: str
    version: int
    settings: dict[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None


Activation = dict[int, float]
"""A sparse activation vector over a corpus's entity ids: {entity_id: weight}."""


@dataclass(frozen=True)
class SeedEntity:
    """A question mention linked to its nearest graph entity (score = cosine)."""

    mention: str
    entity_id: int
    name: str
    score: float


@dataclass(frozen=True)
class QueryEncoding:
    """Everything computed from the question alone, before any experience is used.

    ``base_activation`` is a_base of eq. 7/17: the seed entities with their linking scores.
    """

    question: str
    embedding: Any  # np.ndarray (dim,), unit norm
    mentions: tuple[str, ...]
    seeds: tuple[SeedEntity, ...]
    base_activation: Activation
    timings: dict[str, float] = field(default_factory=dict)
    passage_scores: Any = field(default=None, repr=False, compare=False)
    """Optional cache: cos(question, passage) for every passage of graph version ``graph_version``
    (the retriever computes it on its embedding thread after the forward pass, and ``retrieve``
    waits for it only when the ranking needs it)."""
    graph_version: int | None = None
    template_text: str | None = None
    """The question template (eq. 11) embedded with the question when the caller asked for it."""
    template_embedding: Any = field(default=None, repr=False, compare=False)
    """Its embedding (np.ndarray (dim,), unit norm), from the same forward pass as ``embedding``."""
    common_words: tuple[str, ...] = ()
    """Entities the question's mentions linked to that are common words of the corpus ("Film", a year:
    ``retrieval.common_word_share``), by name: found, and not seeds."""


@dataclass(frozen=True)
class RetrievedPassage:
    id: int
    title: str
    text: str
    score: float


@dataclass(frozen=True)
class RetrievalResult:
    """Ranked passages plus the activation vectors the experience store needs.

    ``start_activation`` is what propagation started from (a_base, or a0 of eq. 8 when
    experiences were fused); ``final_activation`` is the entity activation after semantic
    bridging (a_final of eq. 5).
    """

    encoding: QueryEncoding
    passages: tuple[RetrievedPassage, ...]
    start_activation: Activation
    final_activation: Activation
    entity_tiers: dict[int, int]
    dense_fallback: bool
    timings: dict[str, float] = field(default_factory=dict)


MAX_HNSW_DIM = 4000
"""pgvector's largest dimension for an HNSW index over halfvec."""


@dataclass(frozen=True)
class ScopeSize:
    """A (tenant, corpus) pair, its embedding dimension and how many experiences it holds."""

    tenant_id: int
    corpus_id: int
    dim: int
    experiences: int


@dataclass(frozen=True)
class ScopeIndex:
    """An existing scope index; ``valid`` is false for one whose build was interrupted."""

    name: str
    tenant_id: int
    corpus_id: int
    dim: int
    valid: bool
    size_bytes: int
