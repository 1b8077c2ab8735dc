"""What the experience store takes and returns (the pipeline's interface to it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from livingrag.types import RetrievalResult

Decision = Literal["stored", "rejected_novelty", "rejected_grounding", "error", "dropped"]
"""``dropped``: not stored for want of room (the tenant's experience quota, ``api.max_experiences_per_tenant``)."""


@dataclass(frozen=True)
class UsedPassage:
    """A passage given to the answer prompt: the evidence the grounding gate checks against."""

    id: int
    text: str
    title: str = ""


@dataclass(frozen=True)
class ExperienceCandidate:
    """C_t of the paper: one answered query offered for write-back.

    ``base_activation`` is a_base (before fusion; novelty uses it, eq. 17) and
    ``final_activation`` a_final (after propagation; sparsified into the stored map, eq. 5, and
    anchoring KeySent, eq. 6). ``corpus_version`` is the version of the corpus graph the retrieval
    read (``from_retrieval`` takes it from the encoding): the store checks the cited passages
    against it and refuses a candidate without one, so no experience is stored with evidence that
    changed after its retrieval. ``mentions`` are the question's entity mentions (masked in the stored template,
    eq. 11). ``entity_names`` optionally gives surface forms of activated entities for KeySent;
    missing ones are read from the corpus's entities table. ``template_text`` and
    ``template_embedding``, when the question's template was embedded in its forward pass
    (living mode), let the store cache that vector for eq. 12 instead of embedding it again.
    """

    tenant_id: int
    corpus_id: int
    query: str
    query_embedding: Any  # np.ndarray (dim,) or a sequence of floats
    base_activation: Mapping[int, float]
    final_activation: Mapping[int, float]
    explanation: str
    answer: str
    passages: tuple[UsedPassage, ...]
    corpus_version: int | None = None
    mentions: tuple[str, ...] = ()
    query_log_id: int | None = None
    entity_names: Mapping[int, Sequence[str]] | None = None
    template_text: str | None = None
    template_embedding: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def from_retrieval(
        cls,
        tenant_id: int,
        corpus_id: int,
        retrieval: RetrievalResult,
        *,
        explanation: str,
        answer: str,
        corpus_version: int | None = None,
        query_log_id: int | None = None,
    ) -> ExperienceCandidate:
        """Build the candidate from a retrieval result (its encoding gives query, embedding, base
        activation, mentions and the corpus version the retrieval read, unless ``corpus_version``
        is given) and the generated explanation and answer."""
        enc = retrieval.encoding
        return cls(
            tenant_id=tenant_id,
            corpus_id=corpus_id,
            query=enc.question,
            query_embedding=enc.embedding,
            base_activation=dict(enc.base_activation),
            final_activation=dict(retrieval.final_activation),
            explanation=explanation,
            answer=answer,
            passages=tuple(UsedPassage(id=p.id, text=p.text, title=p.title) for p in retrieval.passages),
            corpus_version=corpus_version if corpus_version is not None else enc.graph_version,
            mentions=tuple(enc.mentions),
            query_log_id=query_log_id,
            template_text=enc.template_text,
            template_embedding=enc.template_embedding,
        )


@dataclass(frozen=True)
class MatchedExperience:
    """One of the top-K experiences (eq. 7) and its fusion weight (eq. 10)."""

    id: int
    query: str
    score: float  # s_k^ret, after decay when decay is on
    embedding_similarity: float
    activation_similarity: float
    confidence: float
    weight: float  # w_k = softmax(s/tau_s)_k * conf_k; 0 when fusion did not apply
    created_at: datetime | None = None
    trust: str = "unverified"
    """unverified, auto_verified, verified or retracted (livingrag.experience.trust)."""
    gated: bool = True
    """Stored through the gates (False: the "w/o quality gate" ablation)."""


@dataclass(frozen=True)
class ScaffoldChoice:
    """The selected reasoning scaffold (eq. 13) and the summary text that goes to the prompt."""

    experience_id: int
    score: float  # s^scaf (eq. 12)
    retrieval_score: float
    template_similarity: float
    summary: str


@dataclass(frozen=True)
class Finding:
    """An earlier experience stated in the prompt as a fact (beyond the paper): its summary (eq. 6),
    with names, and its eq. 7 score."""

    experience_id: int
    retrieval_score: float
    summary: str


@dataclass(frozen=True)
class MatchResult:
    """What :meth:`~livingrag.experience.store_matching.ExperienceMatcher.match` returns before retrieval.

    ``start_activation`` is a0 (eq. 8), or exactly the base activation when nothing was fused.
    ``top`` holds the top-K matches (eq. 7); ``fused_ids`` are those whose maps were fused: a
    positive weight, i.e. s_ret at or above the fusion floor (empty when fusion did not apply: no
    experience over the floor, or no seed entity) and ``added_entities`` the entities that fusion made active
    (at or above the threshold given to match) that were not active in the base. ``findings`` are
    the top-K experiences at or above ``findings_floor`` (at most ``findings_k``), best first; the
    scaffold's experience may be one of them (the pipeline then shows it only as a finding).
    """

    start_activation: dict[int, float]
    top: tuple[MatchedExperience, ...] = ()
    scaffold: ScaffoldChoice | None = None
    findings: tuple[Finding, ...] = ()
    fusion_applied: bool = False
    added_entities: tuple[int, ...] = ()
    candidates: int = 0
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def fused(self) -> tuple[MatchedExperience, ...]:
        """The top-K experiences whose maps were fused (a positive weight)."""
        return tuple(m for m in self.top if m.weight > 0.0) if self.fusion_applied else ()

    @property
    def fused_ids(self) -> tuple[int, ...]:
        return tuple(m.id for m in self.fused)

    @property
    def scaffold_id(self) -> int | None:
        return self.scaffold.experience_id if self.scaffold else None

    @property
    def finding_ids(self) -> tuple[int, ...]:
        return tuple(f.experience_id for f in self.findings)

    @property
    def scaffold_summary(self) -> str | None:
        return self.scaffold.summary if self.scaffold else None


@dataclass(frozen=True)
class ClaimVerdict:
    """One claim's support g_i (eq. 15) and the evidence that gave it."""

    claim: str
    source: str
    score: float
    passage_id: int | None = None
    evidence: str | None = None


@dataclass(frozen=True)
class WriteBackResult:
    """The gate decision for one candidate, as logged in ``writeback_log``."""

    decision: Decision
    novelty: float | None
    grounding: float | None
    verifier: str | None
    experience_id: int | None = None
    log_id: int | None = None
    reason: str | None = None
    claims: tuple[ClaimVerdict, ...] = ()
    timings: dict[str, float] = field(default_factory=dict)
    gate: str = "fixed"
    """Which gate decided: ``fixed`` or ``learned`` (the tenant's calibrator)."""
    probability: float | None = None
    """The learned gate's P(right), when a calibrator decided or watched."""
    trust: str = "unverified"
    """The trust of the stored experience (``auto_verified`` above an earned serve threshold)."""

    @property
    def stored(self) -> bool:
        return self.decision == "stored"
