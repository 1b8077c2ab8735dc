"""A tenant's stored experiences, on the tenant's session: list, read (with the details an
experience's page shows), expire, delete and prune. Verdicts, trust and history are the trust
service's (:mod:`livingrag.experience.feedback`); the operator's maintenance across tenants is
:mod:`livingrag.services.maintenance`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from livingrag.db.repositories import experiences as repo
from livingrag.db.repositories import insights
from livingrag.db.repositories.experiences import ExperienceRecord as ExperienceRecord
from livingrag.db.repositories.experiences import PruneCriteria as PruneCriteria
from livingrag.db.repositories.insights import ExperienceDetail as ExperienceDetail

if TYPE_CHECKING:
    from livingrag.db.engine import Database
    from livingrag.experience.trust import Actor


def list_experiences(
    db: Database,
    tenant_id: int,
    *,
    corpus_id: int | None,
    include_inactive: bool,
    now: datetime,
    limit: int,
    offset: int,
    status: str | None = None,
    min_confidence: float | None = None,
    trust: str | None = None,
) -> list[ExperienceRecord]:
    """The tenant's experiences, newest first, filtered as
    :func:`~livingrag.db.repositories.experiences.list_experiences` says."""
    with db.tenant_session(tenant_id) as s:
        return repo.list_experiences(
            s,
            tenant_id=tenant_id,
            corpus_id=corpus_id,
            include_inactive=include_inactive,
            now=now,
            limit=limit,
            offset=offset,
            status=status,
            min_confidence=min_confidence,
            trust=trust,
        )


def get_experience(db: Database, tenant_id: int, experience_id: int) -> ExperienceRecord:
    """One of the tenant's experiences (:class:`~livingrag.errors.NotFound` for another's)."""
    with db.tenant_session(tenant_id) as s:
        return repo.get_experience(s, experience_id)


@dataclass(frozen=True)
class ExperienceDetails:
    """One experience as its page shows it: its row, its details, the names of the entities of its
    activation map, the cited passages that still exist (id -> (title, text)) and those a change
    made it stale for."""

    record: ExperienceRecord
    detail: ExperienceDetail
    entity_names: dict[int, tuple[str, str | None]]
    passages: dict[int, tuple[str, str]]
    changed_passage_ids: set[int]


def experience_details(db: Database, tenant_id: int, experience_id: int) -> ExperienceDetails:
    """What an experience's page shows (one transaction)."""
    with db.tenant_session(tenant_id) as s:
        rec = repo.get_experience(s, experience_id)
        d = insights.experience_detail(s, experience_id)
        names = insights.entity_names(s, d.corpus_id, list(d.activation))
        present = insights.passages_by_id(s, d.corpus_id, d.source_passage_ids)
    changed = insights.stale_passage_ids(d.stale_reason) if rec.stale else set()
    return ExperienceDetails(rec, d, names, present, changed)


def prune(
    db: Database,
    tenant_id: int,
    criteria: PruneCriteria,
    *,
    now: datetime,
    corpus_id: int | None,
    dry_run: bool,
    actor: Actor,
    preview: bool,
) -> tuple[list[ExperienceRecord], dict[str, int]]:
    """Delete the tenant's experiences matching ``criteria`` (``dry_run``: only count them), each
    with a ``deleted`` event by ``actor``; returns the experiences that would go (``preview``: at
    most 200 of them, read before; else none) and the count per criterion."""
    with db.tenant_session(tenant_id) as s:
        items = []
        if preview:
            items = repo.prune_preview(s, criteria, now=now, tenant_id=tenant_id, corpus_id=corpus_id)
        counts = repo.prune(
            s,
            criteria,
            now=now,
            tenant_id=tenant_id,
            corpus_id=corpus_id,
            dry_run=dry_run,
            actor=actor.label,
            key_id=actor.key_id,
        )
    return items, counts


def expire_experience(
    db: Database, tenant_id: int, experience_id: int, *, now: datetime, actor: Actor
) -> ExperienceRecord:
    """Expire one experience now (an ``expired`` event by ``actor``); returns it as it now is."""
    with db.tenant_session(tenant_id) as s:
        repo.expire_experience(s, experience_id, now=now, actor=actor.label, key_id=actor.key_id)
        return repo.get_experience(s, experience_id)


def delete_experience(
    db: Database, tenant_id: int, experience_id: int, *, actor: Actor, reason: str | None = None
) -> None:
    """Delete one experience (its history stays, ending with a ``deleted`` event by ``actor``)."""
    with db.tenant_session(tenant_id) as s:
        repo.delete_experience(s, experience_id, actor=actor.label, key_id=actor.key_id, reason=reason)
