"""Experience lifecycle: staleness on passage changes, expiry, pruning and store statistics.

Importing this module registers :func:`mark_stale_on_passage_change` as a passage-change hook
(:mod:`livingrag.corpus.hooks`): when a corpus update changes or deletes passages, the experiences
that cited them are marked stale in the same transaction and are skipped by matching and
novelty from then on. :mod:`livingrag.experience.store` imports it, so any process that uses the
store has the hook; a process that only updates corpora must import this module too.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from livingrag.corpus.hooks import ChangeKind, register_passage_change_hook
from livingrag.db.repositories import experiences as repo
from livingrag.errors import InvalidInput

log = logging.getLogger(__name__)


@register_passage_change_hook
def mark_stale_on_passage_change(
    session: Session, corpus_id: int, passage_ids: Sequence[int], kind: ChangeKind
) -> None:
    """Mark experiences citing ``passage_ids`` stale (runs in the corpus update's transaction)."""
    ids = sorted({int(p) for p in passage_ids})
    shown = ", ".join(str(p) for p in ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
    n = repo.mark_stale_for_passages(session, corpus_id, ids, f"source passage {kind}: {shown}")
    if n:
        log.info("marked %d experiences of corpus %d stale (%s passages %s)", n, corpus_id, kind, shown)


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
