"""``/v1/experiences``: the caller's stored experiences (list with filters, one with its details,
expire, delete, prune with a dry-run preview), each with who stored it and who vouches for it
(origin, trust). Expiring, deleting and pruning are recorded in each experience's history with the
caller as the actor. Verifying, retracting and the history itself are in :mod:`.feedback`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from fastapi import APIRouter, Depends, Path, Query, Response

from livingrag.api.deps import Caller, Services, services, tenant_id, writer_caller
from livingrag.api.errors import COMMON_RESPONSES, ErrorResponse
from livingrag.api.routes.common import PageParams, corpus_of
from livingrag.api.schemas import (
    CitedPassage,
    ExperienceDetailOut,
    ExperienceList,
    ExperienceOut,
    RankedEntity,
    TenantPruneIn,
    TenantPruneOut,
    Trust,
)
from livingrag.experience import lifecycle
from livingrag.services import experiences
from livingrag.services.experiences import ExperienceRecord, PruneCriteria
from livingrag.services.keys import READ

router = APIRouter(
    prefix="/v1/experiences",
    tags=["experiences"],
    responses=COMMON_RESPONSES | {404: {"model": ErrorResponse, "description": "No such experience or corpus."}},
)


def experience_out(r: ExperienceRecord) -> ExperienceOut:
    """What the API shows of an experience (everything but its tenant)."""
    fields = {k: v for k, v in vars(r).items() if k != "tenant_id"}
    return ExperienceOut(**fields)


@router.get("", response_model=ExperienceList, summary="List the caller's experiences, newest first")
def list_experiences(
    corpus_id: int | None = Query(None, ge=1, description="Only this corpus."),
    active: bool = Query(False, description="Only active experiences (not stale, expired or retracted)."),
    status: Literal["active", "stale", "expired", "retracted"] | None = Query(
        None, description="Only this status (active: neither stale, expired nor retracted)."
    ),
    min_confidence: float | None = Query(
        None, ge=0, le=1, description="Only at or above this confidence (the gate's heuristic GS, not a probability)."
    ),
    trust: Trust | None = Query(None, description="Only this trust: unverified, auto_verified, verified or retracted."),
    page: PageParams = Depends(),
    tid: int = Depends(tenant_id),
    svc: Services = Depends(services),
) -> ExperienceList:
    if corpus_id is not None:
        corpus_of(svc, tid, corpus_id)
    rows = experiences.list_experiences(
        svc.db,
        tid,
        corpus_id=corpus_id,
        include_inactive=not active,
        now=datetime.now(UTC),
        limit=page.limit,
        offset=page.offset,
        status=status,
        min_confidence=min_confidence,
        trust=trust,
    )
    return ExperienceList(
        items=[experience_out(r) for r in rows],
        limit=page.limit,
        offset=page.offset,
        next_offset=page.next_offset(len(rows)),
    )


@router.post(
    "/prune",
    response_model=TenantPruneOut,
    summary="Delete the caller's experiences by criteria (dry_run, the default, only shows what would go)",
    description="Needs the write scope. A dry run (the default) deletes nothing and answers the counts per "
    "criterion; it lists the experiences that would go (question, answer and the rest, at most 200) only to a "
    "key that also has the read scope: a write-only key gets the counts and `items_shown: false`, since pruning "
    "must not be a way to read what a key may not read.",
    responses={422: {"model": ErrorResponse, "description": "No criterion, or an unreadable or too long duration."}},
)
def prune(
    body: TenantPruneIn, caller: Caller = Depends(writer_caller), svc: Services = Depends(services)
) -> TenantPruneOut:
    tid = caller.tenant_id
    if body.corpus_id is not None:
        corpus_of(svc, tid, body.corpus_id)
    now = datetime.now(UTC)
    since = lifecycle.since(now, body.unused_for, "unused_for") if body.unused_for is not None else None
    show_items = body.dry_run and caller.may(READ)
    criteria = PruneCriteria(
        max_per_tenant=body.keep,
        min_confidence=body.min_confidence,
        unused_since=since,
        expired=body.expired,
        stale=body.stale,
    )
    items, counts = experiences.prune(
        svc.db,
        tid,
        criteria,
        now=now,
        corpus_id=body.corpus_id,
        dry_run=body.dry_run,
        actor=caller.actor,
        preview=show_items,
    )
    counts = {("keep" if k == "max_per_tenant" else k): v for k, v in counts.items()}
    return TenantPruneOut(
        counts=counts,
        dry_run=body.dry_run,
        items=[experience_out(r) for r in items],
        items_shown=show_items or not body.dry_run,
    )


@router.get("/{experience_id}", response_model=ExperienceOut, summary="One experience")
def get_experience(
    experience_id: int = Path(..., ge=1), tid: int = Depends(tenant_id), svc: Services = Depends(services)
) -> ExperienceOut:
    return experience_out(experiences.get_experience(svc.db, tid, experience_id))


@router.get(
    "/{experience_id}/details",
    response_model=ExperienceDetailOut,
    summary="One experience with its summary, ranked activation map and cited passages",
)
def get_experience_details(
    experience_id: int = Path(..., ge=1), tid: int = Depends(tenant_id), svc: Services = Depends(services)
) -> ExperienceDetailOut:
    details = experiences.experience_details(svc.db, tid, experience_id)
    rec, d, names, present = details.record, details.detail, details.entity_names, details.passages
    ranked = sorted(d.activation.items(), key=lambda kv: (-kv[1], kv[0]))
    changed_ids = details.changed_passage_ids
    cited = [
        CitedPassage(
            id=pid,
            title=present[pid][0] if pid in present else None,
            text=present[pid][1] if pid in present else None,
            exists=pid in present,
            changed=pid not in present or pid in changed_ids,
        )
        for pid in d.source_passage_ids
    ]
    return ExperienceDetailOut(
        **experience_out(rec).model_dump(),
        summary=d.summary,
        query_template=d.query_template,
        corpus_version=d.corpus_version,
        activation=[
            RankedEntity(
                entity_id=e,
                name=names[e][0] if e in names else None,
                label=names[e][1] if e in names else None,
                weight=w,
            )
            for e, w in ranked
        ],
        cited_passages=cited,
        grounding=d.grounding,
    )


@router.post("/{experience_id}/expire", response_model=ExperienceOut, summary="Expire one experience now")
def expire_experience(
    experience_id: int = Path(..., ge=1), caller: Caller = Depends(writer_caller), svc: Services = Depends(services)
) -> ExperienceOut:
    rec = experiences.expire_experience(
        svc.db, caller.tenant_id, experience_id, now=datetime.now(UTC), actor=caller.actor
    )
    return experience_out(rec)


@router.delete("/{experience_id}", status_code=204, summary="Delete one experience")
def delete_experience(
    experience_id: int = Path(..., ge=1), caller: Caller = Depends(writer_caller), svc: Services = Depends(services)
) -> Response:
    experiences.delete_experience(svc.db, caller.tenant_id, experience_id, actor=caller.actor)
    return Response(status_code=204)
