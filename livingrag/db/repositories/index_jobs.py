"""Index jobs in the database (migration 0013): submit, read and list a tenant's jobs, report a
running job's progress and end it (tenant sessions: RLS confines them; a worker changes only the
rows that name it), and, across tenants, take the next queued job, put back the jobs whose worker
is gone and count the pending ones, through the migration's ``SECURITY DEFINER`` functions from an
application session (:func:`claim_next`, :func:`recover_orphans`, :func:`count_all_active`): the
API never takes the owner route for jobs.

A worker proves it lives by holding a session-level advisory lock, ``(WORKER_LOCK_NAMESPACE,
worker_lock)``, on a connection of its own for as long as its process runs (PostgreSQL frees it
when that connection ends: the process exited, was killed or lost the server); the row of a job it
runs names that lock, and ``heartbeat_at`` says when it last reported. A running job whose lock no
session holds, or whose heartbeat is older than the staleness bound, is an orphan.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, text
from sqlalchemy.orm import Session

from livingrag.db.repositories.rows import rowcount

WORKER_LOCK_NAMESPACE = 0x4C524A42
"""The first key of every worker's advisory lock (``pg_advisory_lock(int, int)``: "LRJB")."""
ACTIVE = ("queued", "running")
FINISHED = ("succeeded", "failed")


@dataclass(frozen=True)
class IndexJobRecord:
    """One job as a tenant sees it (its documents are in :func:`claim_next`'s answer only)."""

    id: str
    tenant_id: int
    corpus_id: int
    state: str
    documents: int
    progress: dict[str, dict[str, int]]
    result: dict[str, Any] | None
    error: str | None
    worker: str | None
    attempts: int
    created_at: datetime
    started_at: datetime | None
    heartbeat_at: datetime | None
    finished_at: datetime | None


_COLUMNS = (
    "id, tenant_id, corpus_id, state, documents, progress, result, error, worker, attempts, created_at, started_at,"
    " heartbeat_at, finished_at"
)


def _record(row: Sequence[Any]) -> IndexJobRecord:
    return IndexJobRecord(*row[:14])


def insert(
    session: Session, tenant_id: int, corpus_id: int, job_id: str, documents: list[dict[str, Any]]
) -> IndexJobRecord:
    """Queue a job of ``documents`` (JSON objects: title, text, external id, and source, sections and
    title_is_entity where set)."""
    row = session.execute(
        text(
            "INSERT INTO index_jobs (tenant_id, id, corpus_id, documents, payload)"
            f" VALUES (:t, :i, :c, :n, CAST(:p AS jsonb)) RETURNING {_COLUMNS}"
        ),
        {"t": tenant_id, "i": job_id, "c": corpus_id, "n": len(documents), "p": json.dumps(documents)},
    ).one()
    return _record(row)


def lock_submissions(session: Session, tenant_id: int) -> None:
    """Serialise the submissions of ``tenant_id`` until the transaction ends (so that two workers
    counting the tenant's pending jobs at once cannot both pass its cap)."""
    session.execute(
        text("SELECT pg_advisory_xact_lock(CAST(:ns AS integer), CAST(:t AS integer))"),
        {"ns": WORKER_LOCK_NAMESPACE + 1, "t": int(tenant_id) % (2**31 - 1)},
    )


def count_active(session: Session) -> int:
    """Queued or running jobs of the session's tenant."""
    return int(
        session.execute(text("SELECT count(*) FROM index_jobs WHERE state IN ('queued', 'running')")).scalar_one()
    )


def count_all_active(session: Session) -> int:
    """Queued or running jobs of every tenant (any application session: ``livingrag_index_jobs_active``)."""
    return int(session.execute(text("SELECT livingrag_index_jobs_active()")).scalar_one())


def get(session: Session, job_id: str) -> IndexJobRecord | None:
    row = session.execute(text(f"SELECT {_COLUMNS} FROM index_jobs WHERE id = :i"), {"i": job_id}).first()
    return None if row is None else _record(row)


def list_jobs(session: Session, *, limit: int = 100) -> list[IndexJobRecord]:
    """The session's tenant's jobs, newest first."""
    rows = session.execute(
        text(f"SELECT {_COLUMNS} FROM index_jobs ORDER BY created_at DESC, id DESC LIMIT :n"), {"n": int(limit)}
    ).all()
    return [_record(r) for r in rows]


def claim_next(session: Session, *, worker: str, worker_lock: int) -> tuple[int, str] | None:
    """Mark the next queued job of any tenant running for ``worker`` and return its (tenant id, job
    id), from any application session (``livingrag_index_job_claim``): the tenants take turns (the
    tenant whose last job started longest ago, or never, goes first), then the oldest job of that
    tenant; rows other workers are taking at the same moment are skipped. Read the job with
    :func:`get_with_documents` in its tenant's session."""
    row = session.execute(
        text("SELECT tenant_id, id FROM livingrag_index_job_claim(:w, :l)"), {"w": worker, "l": int(worker_lock)}
    ).first()
    return None if row is None else (int(row[0]), str(row[1]))


def get_with_documents(session: Session, job_id: str) -> tuple[IndexJobRecord, list[dict[str, Any]]] | None:
    """The job and its documents (they are kept until it ends)."""
    row = session.execute(text(f"SELECT {_COLUMNS}, payload FROM index_jobs WHERE id = :i"), {"i": job_id}).first()
    return None if row is None else (_record(row), list(row[14] or []))


def heartbeat(session: Session, job_id: str, *, worker: str, progress: dict[str, Any]) -> bool:
    """Stamp the heartbeat and the progress of ``worker``'s running job; False when the job is no
    longer ``worker``'s (recovered by another worker, deleted with its corpus)."""
    res = session.execute(
        text(
            "UPDATE index_jobs SET heartbeat_at = clock_timestamp(), progress = CAST(:p AS jsonb)"
            " WHERE id = :i AND worker = :w AND state = 'running'"
        ),
        {"i": job_id, "w": worker, "p": json.dumps(progress)},
    )
    return rowcount(res) == 1


def finish(
    session: Session,
    job_id: str,
    *,
    worker: str,
    state: str,
    progress: dict[str, Any],
    result: dict[str, Any] | None = None,
    error: str | None = None,
) -> bool:
    """End ``worker``'s running job as ``state`` (``succeeded`` with ``result`` or ``failed`` with
    ``error``) and drop its documents; False when it is no longer ``worker``'s."""
    if state not in FINISHED:
        raise ValueError(f"a job ends as one of {FINISHED}, not {state!r}")
    res = session.execute(
        text(
            "UPDATE index_jobs SET state = :s, result = CAST(:r AS jsonb), error = :e, progress = CAST(:p AS jsonb),"
            " finished_at = clock_timestamp(), heartbeat_at = clock_timestamp(), payload = NULL"
            " WHERE id = :i AND worker = :w AND state = 'running'"
        ),
        {
            "i": job_id,
            "w": worker,
            "s": state,
            "r": None if result is None else json.dumps(result),
            "e": error,
            "p": json.dumps(progress),
        },
    )
    return rowcount(res) == 1


def trim(session: Session, *, keep: int) -> int:
    """Delete the session's tenant's finished jobs but the newest ``keep``; returns how many."""
    res = session.execute(
        text(
            "DELETE FROM index_jobs WHERE state IN ('succeeded', 'failed') AND (tenant_id, id) NOT IN ("
            "  SELECT tenant_id, id FROM index_jobs WHERE state IN ('succeeded', 'failed')"
            "  ORDER BY created_at DESC, id DESC LIMIT :k)"
        ),
        {"k": int(keep)},
    )
    return rowcount(res)


@dataclass(frozen=True)
class Orphan:
    """A running job whose worker was gone, and what became of it."""

    tenant_id: int
    id: str
    worker: str | None
    state: str  # queued again, or failed
    why: str


def recover_orphans(session: Session, *, stale_after_s: float, max_attempts: int, failed_reason: str) -> list[Orphan]:
    """From any application session (``livingrag_index_job_recover``): every running job whose
    worker's lock no session holds, or whose heartbeat is older than ``stale_after_s`` (at least
    10 s), goes back to ``queued`` (its documents are still there; indexing skips what the worker
    had committed) or, once started ``max_attempts`` times, to ``failed`` with ``failed_reason``
    (``{why}`` in it says what was found: the process gone, or no report for so long)."""
    rows = session.execute(
        text("SELECT tenant_id, id, worker, state, why FROM livingrag_index_job_recover(:s, :n, :r)"),
        {"s": float(stale_after_s), "n": int(max_attempts), "r": failed_reason},
    ).all()
    return [Orphan(int(r[0]), str(r[1]), r[2], str(r[3]), str(r[4])) for r in rows]


def unfinished(session: Session, job_ids: Iterable[str]) -> int:
    """How many of the session's tenant's jobs ``job_ids`` are queued or running."""
    ids = list(job_ids)
    if not ids:
        return 0
    return int(
        session.execute(
            text("SELECT count(*) FROM index_jobs WHERE id = ANY(:i) AND state IN ('queued', 'running')"), {"i": ids}
        ).scalar_one()
    )


def ping(conn: Connection) -> None:
    """A round trip on ``conn`` (the worker lock's connection): raises when the connection is lost."""
    conn.execute(text("SELECT 1"))


def try_worker_lock(conn: Connection, key: int) -> bool:
    """Take the worker lock ``key`` on ``conn`` (session level: held until released or the
    connection ends); False when another session holds it."""
    return bool(
        conn.execute(
            text("SELECT pg_try_advisory_lock(CAST(:ns AS integer), CAST(:k AS integer))"),
            {"ns": WORKER_LOCK_NAMESPACE, "k": int(key)},
        ).scalar_one()
    )


def release_worker_lock(conn: Connection, key: int) -> None:
    conn.execute(
        text("SELECT pg_advisory_unlock(CAST(:ns AS integer), CAST(:k AS integer))"),
        {"ns": WORKER_LOCK_NAMESPACE, "k": int(key)},
    )
