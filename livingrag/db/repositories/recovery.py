"""Crash recovery of the write-back queue.

The write-back queue lives in memory: a process killed (kill -9, OOM) loses the candidates it had
queued. Their questions were answered and logged in ``query_log`` but have no ``writeback_log``
decision. :func:`log_lost_candidates` records each as ``dropped`` (reason: lost in a crash), so
every answered question of a writing mode ends with exactly one decision. It runs with the owner
session (across tenants), at startup of the HTTP service.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import text
from sqlalchemy.orm import Session

from livingrag.db.repositories.rows import rowcount

LOST_REASON = "lost: the server stopped before the write-back ran (recovered at startup)"


def log_lost_candidates(session: Session, *, before: datetime, since: datetime) -> int:
    """Log as ``dropped`` every answered question of a writing mode asked in ``[since, before)``
    that has no write-back decision; returns how many. ``before`` should leave live replicas time
    to work off their queues."""
    res = session.execute(
        text(
            "INSERT INTO writeback_log (tenant_id, corpus_id, query_log_id, query, decision, reason, details)"
            " SELECT q.tenant_id, q.corpus_id, q.id, q.query, 'dropped', :reason, '{\"recovered\": true}'::jsonb"
            " FROM query_log q"
            " WHERE q.mode LIKE 'living%' AND q.error IS NULL AND coalesce(btrim(q.answer), '') <> ''"
            " AND q.created_at >= :since AND q.created_at < :before"
            " AND NOT EXISTS (SELECT 1 FROM writeback_log w"
            "   WHERE w.tenant_id = q.tenant_id AND w.corpus_id = q.corpus_id AND w.query_log_id = q.id)"
        ),
        {"reason": LOST_REASON, "before": before, "since": since},
    )
    return rowcount(res)
