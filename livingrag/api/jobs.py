"""Index jobs: an in-process registry with one worker thread.

``POST .../index-jobs`` hands a batch of documents to :meth:`JobRegistry.submit` and answers 202
with the job's id at once; the worker indexes jobs one at a time, the tenants taking turns (indexing already writes each
batch of passages in its own transaction, so a crash leaves whole batches or nothing, and a rerun
skips what is stored). Jobs live in memory: after a restart their ids are unknown (404) and a
client resubmits; the content hashes make that idempotent.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from livingrag.errors import AlreadyExists, InvalidInput, LivingRAGError, NotFound, QuotaExceeded

log = logging.getLogger(__name__)

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


@dataclass
class Job:
    """One index job and what became of it."""

    id: str
    tenant_id: int
    corpus_id: int
    documents: int
    state: JobState = "queued"
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    started_at: datetime | None = None
    finished_at: datetime | None = None
    result: dict[str, Any] | None = None
    error: str | None = None
    progress: JobProgress | None = None


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


class JobRegistry:
    """Queue, run and remember index jobs (the newest ``keep`` finished ones are kept).

    Fair between tenants: at most ``max_pending`` jobs wait or run in all and ``tenant_max_pending``
    per tenant (:class:`JobQueueFull` past either), and the worker takes the tenants' queues in
    turn (round robin), so a tenant that queued many jobs delays another's by one job at most.
    """

    def __init__(self, *, max_pending: int = 100, keep: int = 1000, tenant_max_pending: int | None = None) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="index-job")
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._queues: OrderedDict[int, deque[tuple[Job, Callable[[], dict[str, Any]]]]] = OrderedDict()
        self._lock = threading.Lock()
        self.max_pending = max_pending
        self.tenant_max_pending = tenant_max_pending if tenant_max_pending is not None else max_pending
        self.keep = keep

    def submit(
        self,
        tenant_id: int,
        corpus_id: int,
        documents: int,
        work: Callable[[], dict[str, Any]],
        *,
        progress: JobProgress | None = None,
    ) -> Job:
        """Queue ``work`` (returns the job's result) and return the queued job; ``progress`` is what
        ``work`` reports its stages to."""
        with self._lock:
            active = [j for j in self._jobs.values() if j.state in ("queued", "running")]
            mine = sum(1 for j in active if j.tenant_id == tenant_id)
            if mine >= self.tenant_max_pending:
                raise JobQueueFull(
                    f"this tenant has {mine} index jobs pending (the limit is {self.tenant_max_pending}: "
                    "api.tenant_max_pending_jobs); retry later"
                )
            if len(active) >= self.max_pending:
                raise JobQueueFull(
                    f"{len(active)} index jobs are pending (the limit is {self.max_pending}: api.max_pending_jobs); "
                    "retry later"
                )
            job = Job(
                id=uuid.uuid4().hex, tenant_id=tenant_id, corpus_id=corpus_id, documents=documents, progress=progress
            )
            self._jobs[job.id] = job
            self._queues.setdefault(tenant_id, deque()).append((job, work))
            self._trim()
        self._pool.submit(self._run_next)  # one turn per job: each turn runs the next tenant's oldest
        return job

    def _next(self) -> tuple[Job, Callable[[], dict[str, Any]]] | None:
        """The oldest job of the tenant whose turn it is (that tenant goes to the back)."""
        with self._lock:
            if not self._queues:
                return None
            tenant, q = next(iter(self._queues.items()))
            item = q.popleft()
            del self._queues[tenant]
            if q:
                self._queues[tenant] = q
            return item

    def _run_next(self) -> None:
        item = self._next()
        if item is not None:
            self._run(*item)

    def _run(self, job: Job, work: Callable[[], dict[str, Any]]) -> None:
        job.state, job.started_at = "running", datetime.now(UTC)
        try:
            job.result = work()
            job.state = "succeeded"
        except Exception as exc:
            log.warning("index job %s failed: %s", job.id, exc, exc_info=not isinstance(exc, LivingRAGError))
            job.error = job_error_message(job.id, exc)
            job.state = "failed"
        finally:
            job.finished_at = datetime.now(UTC)

    def _trim(self) -> None:
        finished = [k for k, j in self._jobs.items() if j.state in ("succeeded", "failed")]
        for k in finished[: max(0, len(self._jobs) - self.keep)]:
            del self._jobs[k]

    def get(self, tenant_id: int, job_id: str) -> Job | None:
        """The job if it exists *and* belongs to ``tenant_id`` (another tenant's job is None)."""
        with self._lock:
            job = self._jobs.get(job_id)
        return job if job is not None and job.tenant_id == tenant_id else None

    def list(self, tenant_id: int) -> list[Job]:
        with self._lock:
            return [j for j in reversed(self._jobs.values()) if j.tenant_id == tenant_id]

    def wait(self, timeout: float | None = None) -> None:
        """Wait for the jobs queued so far (tests, shutdown)."""
        self._pool.submit(lambda: None).result(timeout)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
