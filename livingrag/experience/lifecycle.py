"""Experience lifecycle: expiry, pruning and store statistics.

Staleness is not here: changing or deleting a passage marks the experiences that cited it stale in
the same transaction (:func:`livingrag.corpus.hooks.fire_passage_change`), whichever process
changes it, and matching and novelty skip stale experiences from then on.
"""

from __future__ import annotations

import math
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


MAX_DURATION = timedelta(days=100 * 365)
"""The longest duration :func:`parse_duration` reads (100 years): anything longer reaches before any
row was stored, and far enough and ``now - duration`` is no date at all (``OverflowError``)."""


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def parse_duration(value: str, what: str | None = None) -> timedelta:
    """``"30d"``, ``"12h"``, ``"2w"``, ``"90m"``, ``"1y"`` (a bare number means days), at most
    :data:`MAX_DURATION`; else :class:`InvalidInput`, whose message starts with ``what`` (the field
    or option) when given."""
    field = f"{what}: " if what else ""
    m = _DURATION.match(value) if isinstance(value, str) else None
    if not m:
        raise InvalidInput(f"{field}cannot read duration {_shown(value)}; write e.g. 30d, 12h, 2w, 90m or 1y")
    amount, unit = float(m.group(1)), _UNITS[(m.group(2) or "d").lower()]
    if not math.isfinite(amount) or amount * unit.total_seconds() > MAX_DURATION.total_seconds():
        raise InvalidInput(f"{field}duration {_shown(value)} is too long (at most {MAX_DURATION.days}d, 100 years)")
    return amount * unit


def since(now: datetime, value: str, what: str | None = None) -> datetime:
    """The instant ``value`` (a duration, see :func:`parse_duration`) before ``now``."""
    return now - parse_duration(value, what)


def parse_timestamp(value: str, what: str | None = None) -> datetime:
    """An ISO-8601 date or timestamp; without a zone it is UTC (``what``: as in :func:`parse_duration`)."""
    try:
        ts = datetime.fromisoformat(value.strip())
    except (AttributeError, ValueError):
        field = f"{what}: " if what else ""
        raise InvalidInput(
            f"{field}cannot read timestamp {_shown(value)}; write e.g. 2026-01-31 or 2026-01-31T12:00:00+00:00"
        ) from None
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)


def cutoff(
    *, before: str | None, older_than: str | None, now: datetime, names: tuple[str, str] = ("--before", "--older-than")
) -> datetime:
    """The instant named by exactly one of ``--before TIMESTAMP`` and ``--older-than DURATION``
    (``names``: what the caller calls the two, for the messages)."""
    if (before is None) == (older_than is None):
        raise InvalidInput(f"give exactly one of {names[0]} TIMESTAMP and {names[1]} DURATION")
    if before is not None:
        return parse_timestamp(before, names[0])
    return since(now, older_than or "", names[1])


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
