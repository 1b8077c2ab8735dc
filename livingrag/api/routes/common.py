"""Helpers shared by the routers: pagination parameters and the caller's corpus."""

from __future__ import annotations

from fastapi import Query

from livingrag.api.deps import Services
from livingrag.db.repositories import corpora
from livingrag.types import CorpusInfo

MAX_PAGE = 500


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
    with svc.db.tenant_session(tenant_id) as s:
        return corpora.get_corpus(s, corpus_id)
