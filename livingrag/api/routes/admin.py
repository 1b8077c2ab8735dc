"""``/v1/admin``: experience-store maintenance with the admin key (the HTTP face of ``livingrag admin``)."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Depends, Query
from sqlalchemy.orm import Session

from livingrag.api.deps import Services, admin, services
from livingrag.api.errors import COMMON_RESPONSES, ErrorResponse
from livingrag.api.schemas import ExpireIn, ExpireOut, PruneIn, PruneOut, StatsOut
from livingrag.db.repositories.experiences import PruneCriteria
from livingrag.errors import InvalidInput, NotFound
from livingrag.experience import lifecycle
from livingrag.experience.lifecycle import Scope

router = APIRouter(
    prefix="/v1/admin",
    tags=["admin"],
    dependencies=[Depends(admin)],
    responses=COMMON_RESPONSES | {403: {"model": ErrorResponse, "description": "Not the admin key."}},
)


def _scope(s: Session, tenant_id: int | None, corpus_id: int | None) -> Scope:
    from sqlalchemy import text

    if corpus_id is not None:
        if tenant_id is None:
            raise InvalidInput("corpus_id needs tenant_id")
        found = s.execute(
            text("SELECT 1 FROM corpora WHERE tenant_id = :t AND id = :c"), {"t": tenant_id, "c": corpus_id}
        ).scalar()
        if found is None:
            raise NotFound(f"tenant {tenant_id} has no corpus {corpus_id}")
    return Scope(tenant_id=tenant_id, corpus_id=corpus_id)


@router.post("/expire", response_model=ExpireOut, summary="Expire experiences created before a cutoff")
def expire(body: ExpireIn, svc: Services = Depends(services)) -> ExpireOut:
    now = datetime.now(UTC)
    cut = lifecycle.cutoff(before=body.before, older_than=body.older_than, now=now, names=("before", "older_than"))
    with svc.db.owner_session() as s:
        scope = _scope(s, body.tenant_id, body.corpus_id)
        n = lifecycle.expire(s, created_before=cut, scope=scope, now=now, dry_run=body.dry_run)
    return ExpireOut(expired=n, created_before=cut, dry_run=body.dry_run)


@router.post("/prune", response_model=PruneOut, summary="Delete experiences by criteria")
def prune(body: PruneIn, svc: Services = Depends(services)) -> PruneOut:
    now = datetime.now(UTC)
    since = lifecycle.since(now, body.unused_for, "unused_for") if body.unused_for is not None else None
    criteria = PruneCriteria(
        max_per_tenant=body.max_per_tenant,
        min_confidence=body.min_confidence,
        unused_since=since,
        expired=body.expired,
        stale=body.stale,
    )
    with svc.db.owner_session() as s:
        scope = _scope(s, body.tenant_id, body.corpus_id)
        counts = lifecycle.prune(s, criteria, scope=scope, now=now, dry_run=body.dry_run)
    return PruneOut(counts=counts, dry_run=body.dry_run)


@router.get("/stats", response_model=StatsOut, summary="Store statistics per tenant and corpus")
def stats(
    tenant_id: int | None = Query(None, ge=1),
    corpus_id: int | None = Query(None, ge=1),
    svc: Services = Depends(services),
) -> StatsOut:
    with svc.db.owner_session() as s:
        rows = lifecycle.stats(s, scope=_scope(s, tenant_id, corpus_id))
    return StatsOut(rows=rows)
