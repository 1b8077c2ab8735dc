"""People correct memory over HTTP: a verdict on a question's answer
(``POST /v1/queries/{query_id}/feedback``), verifying or retracting one experience
(``POST /v1/experiences/{id}/verify``, ``.../retract``) and an experience's history
(``GET /v1/experiences/{id}/history``). The effects are :class:`~livingrag.experience.feedback.TrustService`'s;
each change is recorded with the caller as its actor (``key <id>``, or ``admin`` for the operator
acting for the tenant).
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Path, Query

from livingrag.api.deps import Caller, Services, feedback_caller, services, tenant_id
from livingrag.api.errors import COMMON_RESPONSES, ApiError, ErrorResponse
from livingrag.api.routes.experiences import experience_out
from livingrag.api.schemas import (
    CorrectionCheckOut,
    FeedbackIn,
    FeedbackOut,
    HistoryEventOut,
    HistoryOut,
    TrustChangeOut,
    TrustIn,
)
from livingrag.errors import Conflict
from livingrag.experience.feedback import FeedbackOutcome, TrustChange
from livingrag.services import experiences as experience_service

MAX_ID = 2**63 - 1
"""Ids are PostgreSQL bigints: a larger one is 422, not a database error."""
PENDING_RETRY_S = 1

router = APIRouter(
    prefix="/v1",
    responses=COMMON_RESPONSES | {404: {"model": ErrorResponse, "description": "No such question or experience."}},
)


def _feedback_out(o: FeedbackOutcome) -> FeedbackOut:
    check = None
    if o.check is not None:
        check = CorrectionCheckOut(
            verifier=o.check.verifier, gs=o.check.gs, grounded=o.check.grounded, claims=list(o.check.claims)
        )
    return FeedbackOut(
        feedback_id=o.feedback_id,
        query_log_id=o.query_log_id,
        corpus_id=o.corpus_id,
        verdict=o.verdict,  # type: ignore[arg-type]  # right or wrong: checked by the service
        answer=o.answer,
        actor=o.actor,
        repeated=o.repeated,
        verified_ids=list(o.verified_ids),
        retracted_ids=list(o.retracted_ids),
        stored_experience_id=o.stored_experience_id,
        remembered_wrong=o.remembered_wrong,
        check=check,
        messages=list(o.messages),
        created_at=o.created_at,
    )


@router.post(
    "/queries/{query_id}/feedback",
    response_model=FeedbackOut,
    tags=["feedback"],
    summary="Say whether a question's answer was right or wrong, optionally with the right answer",
    responses={
        409: {
            "model": ErrorResponse,
            "description": "The question's write-back is still pending (code writeback_pending): give the verdict "
            "again after Retry-After (1 s).",
        },
        422: {
            "model": ErrorResponse,
            "description": "A bad verdict, an empty or overlong answer or note, a correction equal to the answer "
            "given, a correction with verdict right, or a question that has no answer.",
        },
    },
)
def give_feedback(
    body: FeedbackIn,
    query_id: int = Path(..., ge=1, le=MAX_ID, description="The question's query_log_id (from POST /v1/ask)."),
    caller: Caller = Depends(feedback_caller),
    svc: Services = Depends(services),
) -> FeedbackOut:
    try:
        outcome = svc.trust.feedback(
            caller.tenant_id, query_id, body.verdict, actor=caller.actor, answer=body.answer, note=body.note
        )
    except Conflict as exc:
        if type(exc) is not Conflict:
            raise
        raise ApiError(409, "writeback_pending", str(exc), {"Retry-After": str(PENDING_RETRY_S)}) from None
    return _feedback_out(outcome)


def _change_out(svc: Services, tid: int, change: TrustChange) -> TrustChangeOut:
    rec = experience_service.get_experience(svc.db, tid, change.experience_id)
    return TrustChangeOut(
        experience_id=change.experience_id,
        trust=change.trust,  # type: ignore[arg-type]  # one of TRUSTS
        previous=change.previous,  # type: ignore[arg-type]
        changed=change.changed,
        actor=change.actor,
        reason=change.reason,
        experience=experience_out(rec),
    )


@router.post(
    "/experiences/{experience_id}/verify",
    response_model=TrustChangeOut,
    tags=["experiences"],
    summary="Vouch for an experience's answer (verified; a retracted one is restored)",
)
def verify_experience(
    body: TrustIn | None = None,
    experience_id: int = Path(..., ge=1, le=MAX_ID),
    caller: Caller = Depends(feedback_caller),
    svc: Services = Depends(services),
) -> TrustChangeOut:
    reason = body.reason if body is not None else None
    change = svc.trust.verify(caller.tenant_id, experience_id, actor=caller.actor, reason=reason)
    return _change_out(svc, caller.tenant_id, change)


@router.post(
    "/experiences/{experience_id}/retract",
    response_model=TrustChangeOut,
    tags=["experiences"],
    summary="Say an experience's answer is wrong (retracted: inactive, never served for its question again)",
)
def retract_experience(
    body: TrustIn | None = None,
    experience_id: int = Path(..., ge=1, le=MAX_ID),
    caller: Caller = Depends(feedback_caller),
    svc: Services = Depends(services),
) -> TrustChangeOut:
    reason = body.reason if body is not None else None
    change = svc.trust.retract(caller.tenant_id, experience_id, actor=caller.actor, reason=reason)
    return _change_out(svc, caller.tenant_id, change)


@router.get(
    "/experiences/{experience_id}/history",
    response_model=HistoryOut,
    tags=["experiences"],
    summary="What happened to an experience, oldest first (kept after it is deleted)",
)
def experience_history(
    experience_id: int = Path(..., ge=1, le=MAX_ID),
    limit: int = Query(1000, ge=1, le=10_000, description="At most this many events (the newest)."),
    tid: int = Depends(tenant_id),
    svc: Services = Depends(services),
) -> HistoryOut:
    events = svc.trust.history(tid, experience_id, limit=limit)
    return HistoryOut(
        experience_id=experience_id,
        events=[
            HistoryEventOut(
                id=e.id,
                event=e.event,
                actor=e.actor,
                key_id=e.key_id,
                query_log_id=e.query_log_id,
                reason=e.reason,
                details=dict(e.details or {}),
                created_at=e.created_at,
            )
            for e in events
        ],
    )
