"""``/v1/store``, ``/v1/queries``: the health of the caller's experience store over time and the
write-back decision taken for one question (the web console's views; tenant-scoped)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Path, Query

from livingrag.api.deps import Services, services, tenant_id
from livingrag.api.errors import COMMON_RESPONSES, ErrorResponse
from livingrag.api.routes.common import corpus_of
from livingrag.api.schemas import ClaimOut, StoreHealthOut, WritebackOut
from livingrag.services import insights

router = APIRouter(
    prefix="/v1",
    tags=["experiences"],
    responses=COMMON_RESPONSES | {404: {"model": ErrorResponse, "description": "No such corpus or question."}},
)


@router.get("/store/health", response_model=StoreHealthOut, summary="Store growth, gate pass rates, reuse, queries")
def store_health(
    corpus_id: int | None = Query(None, ge=1, description="Only this corpus."),
    tid: int = Depends(tenant_id),
    svc: Services = Depends(services),
) -> StoreHealthOut:
    if corpus_id is not None:
        corpus_of(svc, tid, corpus_id)
    return StoreHealthOut(**insights.store_health(svc.db, tid, corpus_id))


@router.get(
    "/queries/{query_log_id}/writeback",
    response_model=WritebackOut,
    summary="The write-back decision for one question (pending until the worker has decided)",
)
def writeback_decision(
    query_log_id: int = Path(..., ge=1), tid: int = Depends(tenant_id), svc: Services = Depends(services)
) -> WritebackOut:
    return writeback_out(svc, tid, query_log_id)


def writeback_out(svc: Services, tid: int, query_log_id: int) -> WritebackOut:
    """The write-back decision for one of tenant ``tid``'s questions as the API shows it (pending
    while the worker has not decided; none where nothing is written back)."""
    gates = svc.settings.gates
    mode, row = insights.writeback_decision(svc.db, tid, query_log_id)
    base: dict[str, Any] = {
        "query_log_id": query_log_id,
        "tau_novel": gates.tau_novel,
        "tau_gs": gates.tau_gs,
        "tau_nli": gates.tau_nli,
    }
    if row is None:
        writes_back = mode[0] == "living" and not mode[1]
        return WritebackOut(decision="pending" if writes_back else "none", **base)
    details = row["details"] or {}
    claims = [
        ClaimOut(**{k: c.get(k) for k in ("claim", "source", "g", "passage_id", "evidence")})
        for c in details.get("claims", [])
    ]
    return WritebackOut(
        decision=row["decision"],
        novelty=row["novelty"],
        grounding=row["grounding"],
        verifier=row["verifier"],
        reason=row["reason"],
        stage=details.get("stage"),
        experience_id=row["experience_id"],
        claims=claims,
        created_at=row["created_at"],
        **base,
    )
