"""``/v1/experiences``: the caller's stored experiences (list with filters, get, delete)."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Depends, Path, Query, Response

from livingrag.api.deps import Services, services, tenant_id, tenant_writer
from livingrag.api.errors import COMMON_RESPONSES, ErrorResponse
from livingrag.api.routes.common import PageParams, corpus_of
from livingrag.api.schemas import ExperienceList, ExperienceOut
from livingrag.db.repositories import experiences as repo

router = APIRouter(
    prefix="/v1/experiences",
    tags=["experiences"],
    responses=COMMON_RESPONSES | {404: {"model": ErrorResponse, "description": "No such experience or corpus."}},
)


def _out(r: repo.ExperienceRecord) -> ExperienceOut:
    fields = {k: v for k, v in vars(r).items() if k != "tenant_id"}
    return ExperienceOut(**fields)


@router.get("", response_model=ExperienceList, summary="List the caller's experiences, newest first")
def list_experiences(
    corpus_id: int | None = Query(None, ge=1, description="Only this corpus."),
    active: bool = Query(False, description="Only active experiences (not stale, not expired)."),
    page: PageParams = Depends(),
    tid: int = Depends(tenant_id),
    svc: Services = Depends(services),
) -> ExperienceList:
    if corpus_id is not None:
        corpus_of(svc, tid, corpus_id)
    with svc.db.tenant_session(tid) as s:
        rows = repo.list_experiences(
            s,
            tenant_id=tid,
            corpus_id=corpus_id,
            include_inactive=not active,
            now=datetime.now(UTC),
            limit=page.limit,
            offset=page.offset,
        )
    return ExperienceList(
        items=[_out(r) for r in rows], limit=page.limit, offset=page.offset, next_offset=page.next_offset(len(rows))
    )


@router.get("/{experience_id}", response_model=ExperienceOut, summary="One experience")
def get_experience(
    experience_id: int = Path(..., ge=1), tid: int = Depends(tenant_id), svc: Services = Depends(services)
) -> ExperienceOut:
    with svc.db.tenant_session(tid) as s:
        return _out(repo.get_experience(s, experience_id))


@router.delete("/{experience_id}", status_code=204, summary="Delete one experience")
def delete_experience(
    experience_id: int = Path(..., ge=1), tid: int = Depends(tenant_writer), svc: Services = Depends(services)
) -> Response:
    with svc.db.tenant_session(tid) as s:
        repo.delete_experience(s, experience_id)
    return Response(status_code=204)
