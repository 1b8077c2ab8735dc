"""Experience lifecycle: expiry, pruning and store statistics.

Staleness is not here: changing or deleting a passage marks the experiences that cited it stale in
the same transaction (:func:`livingrag.corpus.hooks.fire_passage_change`), whichever process
changes it, and matching and novelty skip stale experiences from then on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from livingrag.db.repositories import experiences as repo
from livingrag.errors import InvalidInput

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|d|w|y)?\s*$", re.IGNORECASE)
_UNITS = {
    "s": timedelta(seconds=1),
    "sec": timedelta(seconds=1),
    "m": timedelta(minutes=1),
    "min": timedelta(minutes=1),
    "h": timedelta(hours=1),
    "d": timedelta(days=1),
    "w": timedelta(weeks=1),
    "y": timedelta(days=365),
}


def parse_duration(value: str) -> timedelta:
    """``"30d"``, ``"12h"``, ``"2w"``, ``"90m"``, ``"1y"`` (a bare number means days)."""
    m = _DURATION.match(value or "")
    if not m:
        raise InvalidInput(f"cannot read duration {value!r}; write e.g. 30d, 12h, 2w, 90m or 1y")
    return float(m.group(1)) * _UNITS[(m.group(2) or "d").lower()]


def parse_timestamp(value: str) -> datetime:
    """An ISO-8601 date or timestamp; without a zone it is UTC."""
    try:
        ts = datetime.fromisoformat(value.strip())
    except (AttributeError, ValueError):
        raise InvalidInput(
            f"cannot read timestamp {value!r}; write e.g. 2026-01-31 or 2026-01-31T12:00:00+00:00"
        ) from None
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)


def cutoff(*, before: str | None, older_than: str | None, now: datetime) -> datetime:
    """The instant named by exactly one of ``--before TIMESTAMP`` and ``--older-than DURATION``."""
    if (before is None) == (older_than is None):
        raise InvalidInput("give exactly one of --before TIMESTAMP and --older-than DURATION")
    return parse_timestamp(before) if before is not None else now - parse_duration(older_than or "")


@dataclass(frozen=True)
class Scope:
    """Which experiences a maintenance command touches (None: all tenants / corpora)."""

    tenant_id: int | None = None
    corpus_id: int | None = None


def expire(session: Session, *, created_before: datetime, scope: Scope, now: datetime, dry_run: bool) -> int:
    """Expire experiences created before ``created_before`` (see :func:`repo.expire`)."""
    return repo.expire(
        session,
        created_before=created_before,
        now=now,
        tenant_id=scope.tenant_id,
        corpus_id=scope.corpus_id,
        dry_run=dry_run,
    )


def prune(
    session: Session, criteria: repo.PruneCriteria, *, scope: Scope, now: datetime, dry_run: bool
) -> dict[str, int]:
    """Delete experiences by ``criteria`` (see :func:`repo.prune`)."""
    return repo.prune(session, criteria, now=now, tenant_id=scope.tenant_id, corpus_id=scope.corpus_id, dry_run=dry_run)


def stats(session: Session, *, scope: Scope) -> list[dict[str, Any]]:
    """Per (tenant, corpus): store health, Table 6 gate statistics and Table 16 reuse coverage."""
    rows = repo.store_stats(session, tenant_id=scope.tenant_id)
    if scope.corpus_id is not None:
        rows = [r for r in rows if r["corpus_id"] == scope.corpus_id]
    return rows
