"""Helpers shared by the routers: pagination parameters, the caller's corpus and the corpus's
change lock."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from fastapi import Query

from livingrag.api.deps import Services
from livingrag.api.errors import ApiError
from livingrag.api.fairness import LockBusy, retry_after_s
from livingrag.corpus import service
from livingrag.types import CorpusInfo

MAX_PAGE = 500
INDEX_WAITERS = 4
"""Requests that may wait for one corpus's lock at once; more are refused at once (429)."""


class PageParams:
    """``limit`` / ``offset`` query parameters."""

    def __init__(
        self,
        limit: int = Query(50, ge=1, le=MAX_PAGE, description="At most this many items."),
        offset: int = Query(0, ge=0, le=10_000_000, description="Skip this many items."),
    ) -> None:
        self.limit = limit
        self.offset = offset

    def next_offset(self, got: int) -> int | None:
        return self.offset + got if got >= self.limit else None


def corpus_of(svc: Services, tenant_id: int, corpus_id: int) -> CorpusInfo:
    """The caller's corpus; another tenant's id is invisible under RLS, so it is 404 like a missing one."""
    return service.get_corpus(svc.db, tenant_id, corpus_id)


@contextmanager
def corpus_change(svc: Services, corpus_id: int) -> Iterator[None]:
    """Hold ``corpus_id``'s change lock for the block (request threads): waits at most
    ``api.index_lock_wait_s`` for the change (or index job) running on that corpus, then answers
    429 ``index_busy`` with ``Retry-After``. Changes to other corpora, another tenant's above all,
    never wait on it."""
    wait = svc.settings.api.index_lock_wait_s
    try:
        with svc.index_locks.hold(corpus_id, wait, max_waiters=INDEX_WAITERS):
            yield
    except LockBusy as exc:
        raise ApiError(
            429,
            "index_busy",
            f"corpus {corpus_id} is being changed by another request or index job (waited {exc.waited_s:g} s, "
            "api.index_lock_wait_s); retry",
            {"Retry-After": str(retry_after_s(max(1.0, wait)))},
        ) from None
