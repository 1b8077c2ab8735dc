"""Dropped write-back candidates, logged in batches off the answer path.

A candidate the write-back queue cannot take (full, or closed) still gets its ``writeback_log``
decision ``dropped``, so that every answered query has one write-back outcome. Writing that row in
the request's own thread made each drop cost a transaction exactly when the service is busiest
(measured: 13 % of an answer's wall time under 32 clients). Here a drop is appended to an
in-process list and a flusher thread writes each tenant's list with one INSERT at most every
``experience.drop_log_flush_s`` seconds; each row keeps the time of its drop.

What a killed process loses is what it had not flushed; the next start logs such candidates as
lost (``repositories.recovery``), so the outcome is still recorded, with that reason. A clean
close, and :meth:`DropRecorder.flush`, write everything pending. A failed flush keeps its rows for
the next one, up to ``max_pending`` rows; past that the oldest are given up (and counted in the
server log), so an unreachable database cannot exhaust memory. ``flush_s = 0`` writes each drop
in its own transaction, in the caller's thread.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from datetime import UTC, datetime

from livingrag.db.engine import Database
from livingrag.db.repositories import experiences as experience_repo
from livingrag.db.repositories import recovery
from livingrag.db.repositories.experiences import DroppedRow
from livingrag.errors import InvalidInput
from livingrag.experience.flusher import PeriodicFlusher
from livingrag.experience.store_input import positive_id

log = logging.getLogger(__name__)

MAX_PENDING = 100_000
"""Drops kept in memory while the database cannot take them (each a query and a reason)."""


def dropped_row(
    *, tenant_id: object, corpus_id: object, query: object, reason: str, query_log_id: object, at: datetime
) -> tuple[int, DroppedRow]:
    """The tenant and the row of one drop; :class:`InvalidInput` naming a tenant or corpus id that
    is not a positive integer, or a query log id that is not an integer."""
    t = positive_id(tenant_id, "tenant_id")
    c = positive_id(corpus_id, "corpus_id")
    if query_log_id is not None and (isinstance(query_log_id, bool) or not isinstance(query_log_id, int)):
        raise InvalidInput(f"query_log_id must be an integer or None, got {query_log_id!r}")
    return t, DroppedRow(corpus_id=c, query=str(query or ""), reason=str(reason), query_log_id=query_log_id, at=at)


def log_lost_candidates(db: Database, *, before: datetime, since: datetime) -> int:
    """Log as dropped the candidates a stopped process lost: the answered questions of a writing
    mode asked in ``[since, before)`` with no write-back decision (owner's session, across
    tenants; :func:`~livingrag.db.repositories.recovery.log_lost_candidates`); returns how many."""
    with db.owner_session() as s:
        return recovery.log_lost_candidates(s, before=before, since=since)


class DropRecorder:
    """Keeps dropped candidates per tenant and writes them every ``flush_s`` seconds (0: at once)."""

    def __init__(self, db: Database, flush_s: float, *, max_pending: int = MAX_PENDING) -> None:
        if flush_s < 0:
            raise ValueError(f"flush_s must be >= 0, got {flush_s}")
        if max_pending < 1:
            raise ValueError(f"max_pending must be >= 1, got {max_pending}")
        self.db = db
        self.flush_s = flush_s
        self.max_pending = max_pending
        self._pending: deque[tuple[int, DroppedRow]] = deque()
        self._given_up = 0
        self._lock = threading.Lock()
        self._flushing = threading.Lock()
        self._flusher = PeriodicFlusher(self.flush, flush_s or 1.0, name="dropped-writeback-logger")

    def record(
        self, *, tenant_id: object, corpus_id: object, query: object, reason: str, query_log_id: object = None
    ) -> None:
        """Log one dropped candidate (now when ``flush_s`` is 0 or the recorder is closed, else by
        the next flush). An invalid id is logged as a warning and the drop is not recorded: a drop
        happens on the answer path, which must not fail for it."""
        try:
            tenant, row = dropped_row(
                tenant_id=tenant_id,
                corpus_id=corpus_id,
                query=query,
                reason=reason,
                query_log_id=query_log_id,
                at=datetime.now(UTC),
            )
        except InvalidInput as exc:
            log.warning("could not log a dropped write-back candidate: %s", exc)
            return
        if self.flush_s == 0 or self._flusher.closed:
            self._write({tenant: [row]})
            return
        with self._lock:
            self._pending.append((tenant, row))
            self._trim()
        self._flusher.start()

    @property
    def pending(self) -> int:
        """Drops not written yet."""
        with self._lock:
            return len(self._pending)

    def _trim(self) -> None:
        """Give up the oldest drops beyond ``max_pending`` (called with the lock held)."""
        over = len(self._pending) - self.max_pending
        for _ in range(max(0, over)):
            self._pending.popleft()
        if over > 0:
            self._given_up += over
            log.error("%d dropped write-back candidates could not be logged (database unreachable)", self._given_up)

    def flush(self) -> int:
        """Write every pending drop now, one INSERT per tenant; returns the rows written. A tenant
        whose write fails keeps its rows (before newer ones) for the next flush."""
        with self._flushing:
            with self._lock:
                taken = list(self._pending)
                self._pending.clear()
            by_tenant: dict[int, list[DroppedRow]] = {}
            for tenant, row in taken:
                by_tenant.setdefault(tenant, []).append(row)
            return self._write(by_tenant, keep_failed=True)

    def _write(self, by_tenant: dict[int, list[DroppedRow]], *, keep_failed: bool = False) -> int:
        written = 0
        failed: list[tuple[int, DroppedRow]] = []
        for tenant, rows in by_tenant.items():
            try:
                with self.db.tenant_session(tenant, read_floor=False) as s:
                    written += experience_repo.insert_dropped_logs(s, tenant_id=tenant, rows=rows)
            except Exception as exc:
                log.warning("%d dropped write-back decisions of tenant %s not logged yet: %s", len(rows), tenant, exc)
                failed.extend((tenant, r) for r in rows)
        if failed and keep_failed:
            with self._lock:
                self._pending.extendleft(reversed(failed))
                self._trim()
        return written

    def close(self) -> None:
        """Stop the flusher and write what is pending (later drops are written at once)."""
        self._flusher.close()
