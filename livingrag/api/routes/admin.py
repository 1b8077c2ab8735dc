"""``/v1/admin``: experience-store maintenance with the admin key (the HTTP face of ``livingrag admin``)."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Depends, Query

from livingrag.api.deps import Services, admin, services
from livingrag.api.errors import COMMON_RESPONSES, ErrorResponse
from livingrag.api.schemas import ExpireIn, ExpireOut, PruneIn, PruneOut, StatsOut
from livingrag.experience import lifecycle
from livingrag.services import maintenance
from livingrag.services.experiences import PruneCriteria

router = APIRouter(
    prefix="/v1/admin",
    tags=["admin"],
    dependencies=[Depends(admin)],
    responses=COMMON_RESPONSES | {403: {"model": ErrorResponse, "description": "Not the admin key."}},
)


FIELDS = ("tenant_id", "corpus_id")
"""What the messages call the scope's tenant and corpus (:mod:`livingrag.services.maintenance`)."""


@router.post("/expire", response_model=ExpireOut, summary="Expire experiences created before a cutoff")
def expire(body: ExpireIn, svc: Services = Depends(services)) -> ExpireOut:
    now = datetime.now(UTC)
    cut = lifecycle.cutoff(before=body.before, older_than=body.older_than, now=now, names=("before", "older_than"))
    n = maintenance.expire(
        svc.db,
        tenant=body.tenant_id,
        corpus=body.corpus_id,
        created_before=cut,
        now=now,
        dry_run=body.dry_run,
        names=FIELDS,
    )
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
    counts = maintenance.prune(
        svc.db, criteria, tenant=body.tenant_id, corpus=body.corpus_id, now=now, dry_run=body.dry_run, names=FIELDS
    )
    return PruneOut(counts=counts, dry_run=body.dry_run)


@router.get("/stats", response_model=StatsOut, summary="Store statistics per tenant and corpus")
def stats(
    tenant_id: int | None = Query(None, ge=1),
    corpus_id: int | None = Query(None, ge=1),
    svc: Services = Depends(services),
) -> StatsOut:
    rows = maintenance.stats(svc.db, tenant=tenant_id, corpus=corpus_id, names=FIELDS)
    return StatsOut(rows=rows)
