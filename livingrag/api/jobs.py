"""What index jobs share: their states, the progress a running job reports, the message a failed
job gives its tenant and :class:`JobQueueFull`.

The service's index jobs live in the database (:mod:`livingrag.api.index_jobs`): any worker or
replica answers for any job, and a restart neither loses a queued job nor leaves one running.
"""

from __future__ import annotations

import logging
import threading
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
