"""The experience store service: matching before retrieval and gated write-back after answering.

:class:`ExperienceStore` is the one object the pipeline, the feedback service, the command line and
the benchmarks hold; it composes the two halves of the LivingRAG method, each in its own module:

* :class:`~livingrag.experience.store_matching.ExperienceMatcher` (eq. 7-13): candidate
  preselection in SQL, exact rescoring, fusion of the start activation, the scaffold and the
  findings, and the tenants' question-template vectors;
* :class:`~livingrag.experience.store_writeback.ExperienceWriter` (eq. 5-6, 15-19): the novelty and
  grounding gates (or the tenant's learned gate), the transactional insert under the corpus's
  locks, and the decision log.

The pipeline calls, per query::

    m = store.match(tenant_id, corpus_id, encoding, activation_threshold=delta)   # before retrieval
    ... retrieval starts from m.start_activation; the prompt gets m.scaffold_summary ...
    store.record_use(tenant_id, fused_ids=m.fused_ids, scaffold_id=m.scaffold_id)  # after answering
    store.write_back(ExperienceCandidate.from_retrieval(...))                        # background worker

What callers give the store is checked by :mod:`livingrag.experience.store_input`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime

import numpy as np
from sqlalchemy.orm import Session

from livingrag.config import Settings
from livingrag.db.engine import Database
from livingrag.experience.gate_learning import GateLearner
from livingrag.experience.store_matching import ExperienceMatcher
from livingrag.experience.store_writeback import ExperienceWriter
from livingrag.experience.types import ExperienceCandidate, MatchResult, WriteBackResult
from livingrag.experience.verifiers import ResolvedVerifier, TextEncoder, Verifier
from livingrag.generation.llm import LLM
from livingrag.types import QueryEncoding


class ExperienceStore:
    """Match, fuse, select scaffolds (:attr:`matcher`) and write back experiences (:attr:`writer`)
    of one database."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        *,
        encoder: TextEncoder | None = None,
        verifier: Verifier | ResolvedVerifier | None = None,
        llm: LLM | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        """``encoder`` embeds question templates and evidence (default: the configured embedding
        model, loaded on first need). ``verifier`` overrides ``gates.verifier``; ``llm`` is what
        the ``llm`` verifier asks. ``clock`` gives the current time (tests)."""
        self.db = db
        self.settings = settings
        clock = clock or (lambda: datetime.now(UTC))
        self.matcher = ExperienceMatcher(db, settings, encoder=encoder, clock=clock)
        """Matching, fusion, scaffolds and findings (eq. 7-13), and the template cache."""
        self.writer = ExperienceWriter(db, settings, self.matcher, verifier=verifier, llm=llm, clock=clock)
        """The gated write-back (eq. 5-6, 15-19)."""

    # ---------------------------------------------------------------- shared pieces

    @property
    def encoder(self) -> TextEncoder:
        """The text encoder (the configured embedding model unless one was given)."""
        return self.matcher.encoder

    @property
    def verifier(self) -> ResolvedVerifier:
        """The grounding verifier, resolved from ``gates.verifier`` on first use."""
        return self.writer.verifier

    @property
    def learner(self) -> GateLearner:
        """The tenants' learned gates (``gates.learn``): which calibrator decides or watches a write-back."""
        return self.writer.learner

    @property
    def templates_needed(self) -> bool:
        """Whether matching compares question templates (eq. 12, the template floors)."""
        return self.matcher.templates_needed

    @property
    def scaffolds_shown(self) -> bool:
        """``experience.scaffold``: False leaves eq. 13's scaffold out of every match (findings stay)."""
        return self.matcher.scaffolds_shown

    # ---------------------------------------------------------------- matching (eq. 7-13)

    def match(
        self,
        tenant_id: int,
        corpus_id: int,
        encoding: QueryEncoding,
        *,
        activation_threshold: float | None = None,
    ) -> MatchResult:
        """:meth:`ExperienceMatcher.match <livingrag.experience.store_matching.ExperienceMatcher.match>`."""
        return self.matcher.match(tenant_id, corpus_id, encoding, activation_threshold=activation_threshold)

    def template_vector(self, tenant_id: int, template: str) -> np.ndarray | None:
        """The unit embedding of a question template (eq. 11) cached for this tenant, or None."""
        return self.matcher.template_vector(tenant_id, template)

    def record_use(
        self,
        tenant_id: int,
        *,
        fused_ids: Sequence[int] = (),
        scaffold_id: int | None = None,
        finding_ids: Sequence[int] = (),
    ) -> int:
        """Count the fusion, scaffold and finding uses of one answered query; returns the
        experiences updated."""
        return self.matcher.record_use(tenant_id, fused_ids=fused_ids, scaffold_id=scaffold_id, finding_ids=finding_ids)

    # ---------------------------------------------------------------- write-back (eq. 5-6, 15-19)

    def write_back(self, candidate: ExperienceCandidate, *, gated: bool = True) -> WriteBackResult:
        """:meth:`ExperienceWriter.write_back <livingrag.experience.store_writeback.ExperienceWriter.write_back>`:
        gate and store one candidate; returns (and logs) the decision."""
        return self.writer.write_back(candidate, gated=gated)

    def write_back_many(self, items: Sequence[tuple[ExperienceCandidate, bool]]) -> list[WriteBackResult | Exception]:
        """:meth:`write_back` of each ``(candidate, gated)`` in order, each one's decision or error."""
        return self.writer.write_back_many(items)

    def held_experiences(self, s: Session, tenant_id: int) -> int | None:
        """The tenant's experiences now, under its quota lock, when a quota applies (else None)."""
        return self.writer.held_experiences(s, tenant_id)

    def quota_refusal(self, tenant_id: int, held: int | None) -> str | None:
        """Why the tenant may store no more experiences, or None."""
        return self.writer.quota_refusal(tenant_id, held)
