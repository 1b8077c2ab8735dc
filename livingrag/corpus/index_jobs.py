"""Index jobs in the database: any worker answers for any job, and a restart loses none.

The HTTP service's background indexing (:mod:`livingrag.api.routes.passages` runs each job through
the corpus indexer); here are the queue, its worker, the jobs' states, the progress a running job
reports, the message a failed job gives its tenant and :class:`JobQueueFull`.

``POST .../index-jobs`` stores the job with its documents (table ``index_jobs``, migration 0013)
and answers 202 with its id at once; ``GET /v1/index-jobs/{id}`` reads the row, so every worker of
``serve --workers N`` (and every replica on the database) answers the same. Each app instance runs
one :class:`IndexJobs` worker thread that takes the next queued job of any tenant (the tenants in
turn, then the oldest), indexes it (each batch of passages in its own transaction, so a crash
leaves whole batches or nothing, and a rerun skips what is stored), reports its progress and a
heartbeat to the row every :data:`HEARTBEAT_S` seconds and ends it as ``succeeded`` (with the
report) or ``failed`` (with what was wrong).

A worker proves it is alive by holding an advisory lock on a database connection of its own for
as long as its process runs; the row of the job it runs names that lock. Every worker, when it
starts and then every :data:`RECOVER_EVERY_S` seconds, puts back the running jobs whose worker is
gone (its lock free: the process exited, was killed, lost its connection; or its heartbeat older
than ``stale_after_s``, :data:`STALE_AFTER_S` by default): queued again, with their documents, to
be taken by a live worker (indexing skips the batches already committed), or ``failed`` with the
reason once tried :data:`MAX_ATTEMPTS` times. Jobs still queued when a process stops stay queued
and are taken by the next worker that starts (or by another one already running).

Everything runs as the application role: a job is read, reported and ended in its tenant's
session (RLS); taking the next job of any tenant, putting orphans back and counting all pending jobs
go through the ``SECURITY DEFINER`` functions of migration 0013, never the owner route.

At most ``api.max_pending_jobs`` jobs wait or run in all and ``api.tenant_max_pending_jobs`` per
tenant (:class:`JobQueueFull`, 429, past either; the tenant's count is taken
under a per-tenant lock, the global one is not, so replicas submitting at the same moment may pass
it by a job each). The newest :data:`KEEP` finished jobs of a tenant are kept.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from sqlalchemy import Connection

from livingrag.db.repositories import index_jobs as repo
from livingrag.db.repositories.index_jobs import IndexJobRecord as IndexJobRecord
from livingrag.db.sql_errors import hide_sql_parameters
from livingrag.errors import AlreadyExists, InvalidInput, LivingRAGError, NotFound, QuotaExceeded

if TYPE_CHECKING:
    from livingrag.db.engine import Database

log = logging.getLogger(__name__)

HEARTBEAT_S = 2.0
"""How often a running job's worker writes its progress and heartbeat to the row."""
STALE_AFTER_S = 120.0
"""A running job whose heartbeat is older than this is taken from its worker even if the worker's
lock is still held (a process that hangs, a lock left on a connection pooler's session)."""
MAX_ATTEMPTS = 2
"""Times a job is started before a lost worker fails it instead of queueing it again."""
RECOVER_EVERY_S = 5.0
POLL_S = 1.0
"""How often an idle worker looks for queued jobs (a job submitted to this instance wakes it at once)."""
KEEP = 1000
"""Finished jobs kept per tenant (the newest)."""
JOB_ID = re.compile(r"[0-9a-f]{32}")

FAILED = (
    "the index job was interrupted twice: the server running it stopped before it finished ({why}); the passages "
    "it had indexed are kept, and submitting the documents again indexes the rest"
)

JobState = Literal["queued", "running", "succeeded", "failed"]


def job_error_message(job_id: str, exc: BaseException) -> str:
    """What the tenant reads of a failed job: what was wrong with its documents (invalid input, a
    duplicate, something missing) in full; any other failure as a fixed message naming the job,
    whose detail is in the server log."""
    if isinstance(exc, InvalidInput | AlreadyExists | NotFound | QuotaExceeded):
        return f"{type(exc).__name__}: {exc}"[:2000]
    return f"the index job failed on the server ({type(exc).__name__}); the detail is logged under job {job_id}"


class JobQueueFull(LivingRAGError):
    """Too many index jobs are waiting; retry later."""


class JobProgress:
    """A :class:`~livingrag.corpus.progress.Progress` that keeps each stage's done/total counts for
    the job's JSON (``GET /v1/index-jobs/{id}``: ``progress``), so a client can draw a bar."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stages: dict[str, list[int]] = {}

    def add(self, description: str, total: int) -> str:
        name = description.strip()
        with self._lock:
            done, old_total = self._stages.get(name, [0, 0])
            self._stages[name] = [done, old_total + int(total)]
        return name

    def advance(self, task: Any, n: int = 1) -> None:
        with self._lock:
            if task in self._stages:
                self._stages[task][0] += int(n)

    def snapshot(self) -> dict[str, dict[str, int]]:
        """Stage name -> ``{"done", "total"}``."""
        with self._lock:
            return {k: {"done": min(d, t), "total": t} for k, (d, t) in self._stages.items()}

    def __enter__(self) -> JobProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


Execute = Callable[[IndexJobRecord, list[dict[str, Any]], JobProgress], dict[str, Any]]
"""What runs one job: the job, its documents and the progress to report to; returns its result."""


class IndexJobs:
    """The index jobs of one app instance's database and the worker that runs them (see the module)."""

    def __init__(
        self,
        db: Database,
        *,
        max_pending: int = 100,
        tenant_max_pending: int | None = None,
        keep: int = KEEP,
        heartbeat_s: float = HEARTBEAT_S,
        stale_after_s: float = STALE_AFTER_S,
        max_attempts: int = MAX_ATTEMPTS,
        poll_s: float = POLL_S,
    ) -> None:
        self.db = db
        self.max_pending = max_pending
        self.tenant_max_pending = tenant_max_pending if tenant_max_pending is not None else max_pending
        self.keep = keep
        self.heartbeat_s = heartbeat_s
        self.stale_after_s = stale_after_s
        self.max_attempts = max_attempts
        self.poll_s = poll_s
        self.worker = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        """This worker's name in the rows of the jobs it runs (not shown to tenants)."""
        self._execute: Execute | None = None
        self._lock_conn: Connection | None = None
        self._lock_key: int | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._submitted: set[tuple[int, str]] = set()
        self._guard = threading.Lock()

    # ------------------------------------------------------------ tenants' side

    def submit(self, tenant_id: int, corpus_id: int, documents: list[dict[str, Any]]) -> IndexJobRecord:
        """Queue a job of ``documents`` (each as ``livingrag.api.routes.passages.job_document`` stores
        it: title, text, external id, and source, sections and ``title_is_entity`` where set) and
        return it; :class:`JobQueueFull` past the tenant's or the global cap."""
        with self.db.app_session() as s:
            active = repo.count_all_active(s)
        if active >= self.max_pending:
            raise JobQueueFull(
                f"{active} index jobs are pending (the limit is {self.max_pending}: api.max_pending_jobs); retry later"
            )
        with self.db.tenant_session(tenant_id) as s:
            repo.lock_submissions(s, tenant_id)
            mine = repo.count_active(s)
            if mine >= self.tenant_max_pending:
                raise JobQueueFull(
                    f"this tenant has {mine} index jobs pending (the limit is {self.tenant_max_pending}: "
                    "api.tenant_max_pending_jobs); retry later"
                )
            job = repo.insert(s, tenant_id, corpus_id, uuid.uuid4().hex, documents)
        with self._guard:
            self._submitted.add((tenant_id, job.id))
        self._wake.set()
        return job

    def get(self, tenant_id: int, job_id: str) -> IndexJobRecord | None:
        """The job if it exists *and* belongs to ``tenant_id`` (another tenant's job is None)."""
        if not JOB_ID.fullmatch(job_id):
            return None  # no job has such an id: not worth a query
        with self.db.tenant_session(tenant_id) as s:
            return repo.get(s, job_id)

    def of_tenant(self, tenant_id: int, limit: int = 100) -> list[IndexJobRecord]:
        """The tenant's jobs, newest first."""
        with self.db.tenant_session(tenant_id) as s:
            return repo.list_jobs(s, limit=limit)

    def wait(self, timeout: float | None = None) -> None:
        """Wait until the jobs submitted through this instance so far have ended, whichever worker
        runs them (tests, shutdown); TimeoutError after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._guard:
            keys = set(self._submitted)
        by_tenant: dict[int, list[str]] = {}
        for tenant, job in keys:
            by_tenant.setdefault(tenant, []).append(job)
        while True:
            left = 0
            for tenant, jobs in by_tenant.items():
                with self.db.tenant_session(tenant) as s:
                    left += repo.unfinished(s, jobs)
            if not left:
                with self._guard:
                    self._submitted -= keys
                return
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"{left} index jobs still pending after {timeout} s")
            time.sleep(0.05)

    # ------------------------------------------------------------ the worker

    def start(self, execute: Execute) -> None:
        """Start this instance's worker thread, which runs each job with ``execute``."""
        if self._thread is not None:
            raise RuntimeError("the index-job worker is running already")
        self._execute = execute
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="index-jobs", daemon=True)
        self._thread.start()

    def close(self, timeout: float = 60.0) -> None:
        """Stop taking jobs, wait up to ``timeout`` s for the running one, and give up the worker's
        lock; jobs still queued stay queued for the next worker."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("index job still running at shutdown; another worker will take it over")
            self._thread = None
        self._drop_lock()

    def _loop(self) -> None:
        next_recovery = 0.0
        while not self._stop.is_set():
            self._wake.clear()
            try:
                self._hold_lock()
                if time.monotonic() >= next_recovery:
                    self.recover()
                    next_recovery = time.monotonic() + RECOVER_EVERY_S
                claimed = self._claim()
            except Exception as exc:
                hide_sql_parameters(exc)
                log.warning("index-job worker: %s: %s (retrying)", type(exc).__name__, exc)
                self._drop_lock()
                self._stop.wait(max(self.poll_s, 1.0))
                continue
            if claimed is not None:
                self._run(*claimed)
                continue
            self._wake.wait(self.poll_s)

    def recover(self) -> list[repo.Orphan]:
        """Put back (or fail) the running jobs of any tenant whose worker is gone; returns them."""
        with self.db.app_session() as s:
            orphans = repo.recover_orphans(
                s, stale_after_s=self.stale_after_s, max_attempts=self.max_attempts, failed_reason=FAILED
            )
        for o in orphans:
            what = "queued again" if o.state == "queued" else "failed"
            log.warning(
                "index job %s of tenant %d %s: its worker %s stopped (%s)", o.id, o.tenant_id, what, o.worker, o.why
            )
        return orphans

    def _claim(self) -> tuple[IndexJobRecord, list[dict[str, Any]]] | None:
        """The next queued job of any tenant, now running for this worker, with its documents."""
        assert self._lock_key is not None
        with self.db.app_session() as s:
            claimed = repo.claim_next(s, worker=self.worker, worker_lock=self._lock_key)
        if claimed is None:
            return None
        tenant, job_id = claimed
        with self.db.tenant_session(tenant) as s:
            return repo.get_with_documents(s, job_id)  # None: deleted with its corpus meanwhile

    def _run(self, job: IndexJobRecord, documents: list[dict[str, Any]]) -> None:
        assert self._execute is not None
        progress = JobProgress()
        beat_stop = threading.Event()

        def beat() -> None:
            while not beat_stop.wait(self.heartbeat_s):
                try:
                    with self.db.tenant_session(job.tenant_id) as s:
                        mine = repo.heartbeat(s, job.id, worker=self.worker, progress=progress.snapshot())
                    if not mine:
                        log.warning("index job %s was taken from this worker (recovered elsewhere or deleted)", job.id)
                        return
                except Exception as exc:
                    hide_sql_parameters(exc)
                    log.warning("index job %s: heartbeat failed: %s", job.id, exc)

        beater = threading.Thread(target=beat, name=f"index-job-{job.id[:8]}-heartbeat", daemon=True)
        beater.start()
        result: dict[str, Any] | None = None
        error: str | None = None
        try:
            result = self._execute(job, documents, progress)
        except Exception as exc:
            hide_sql_parameters(exc)
            log.warning("index job %s failed: %s", job.id, exc, exc_info=not isinstance(exc, LivingRAGError))
            error = job_error_message(job.id, exc)
        finally:
            beat_stop.set()
            beater.join()
        try:
            with self.db.tenant_session(job.tenant_id) as s:
                ended = repo.finish(
                    s,
                    job.id,
                    worker=self.worker,
                    state="failed" if error is not None else "succeeded",
                    progress=progress.snapshot(),
                    result=result,
                    error=error,
                )
                if ended:
                    repo.trim(s, keep=self.keep)
        except Exception as exc:  # the row says running: a worker's recovery takes it over
            hide_sql_parameters(exc)
            log.warning("index job %s: could not record its end: %s", job.id, exc)

    def _hold_lock(self) -> None:
        """Hold this worker's lock on a connection of its own (again, after a lost connection)."""
        if self._lock_conn is not None:
            try:
                repo.ping(self._lock_conn)
                return
            except Exception:
                self._drop_lock()
        conn = self.db.app_engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        try:
            keys = [self._lock_key] if self._lock_key is not None else []
            keys += [random.randrange(1, 2**31 - 1) for _ in range(8)]
            for key in keys:
                if repo.try_worker_lock(conn, key):
                    self._lock_conn, self._lock_key = conn, key
                    return
            raise RuntimeError("could not take a worker lock")
        except BaseException:
            conn.close()
            raise

    def _drop_lock(self) -> None:
        conn, self._lock_conn = self._lock_conn, None
        if conn is not None:
            try:
                if self._lock_key is not None:
                    repo.release_worker_lock(conn, self._lock_key)
            except Exception:
                pass  # a lost connection holds nothing any more
            finally:
                with contextlib.suppress(Exception):
                    conn.invalidate()  # never back to the pool: its session held the lock
                conn.close()
