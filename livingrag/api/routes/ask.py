"""``POST /v1/ask``: answer a question over one of the caller's corpora.

The answer returns as soon as the LLM has answered; the experience write-back is queued on the
pipeline's worker (a full queue drops the candidate and logs the drop). At most
``api.tenant_max_inflight`` questions of one tenant and ``api.max_inflight`` in all are answered
at once; more get 429 (with ``Retry-After``) at once instead of waiting.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends

from livingrag.api.deps import Services, services, tenant_id
from livingrag.api.errors import COMMON_RESPONSES, ApiError, ErrorResponse
from livingrag.api.schemas import AskIn, AskOut, AskPassage, FusedExperience, ScaffoldUsed
from livingrag.corpus import service

router = APIRouter(prefix="/v1", tags=["ask"])


@router.post(
    "/ask",
    response_model=AskOut,
    summary="Answer a question (write-back of the experience happens afterwards)",
    responses=COMMON_RESPONSES
    | {
        404: {"model": ErrorResponse, "description": "No such corpus for this tenant."},
        429: {
            "model": ErrorResponse,
            "description": "api.tenant_max_inflight (the tenant's) or api.max_inflight questions are being answered, "
            "or the tenant is over api.tenant_rate_per_s; retry after Retry-After.",
        },
        502: {"model": ErrorResponse, "description": "The LLM answered with an error."},
        503: {"model": ErrorResponse, "description": "The LLM server (or database) is unavailable."},
        504: {"model": ErrorResponse, "description": "The LLM did not answer within llm.timeout_s."},
    },
)
def ask(body: AskIn, tid: int = Depends(tenant_id), svc: Services = Depends(services)) -> AskOut:
    if not svc.tenant_slots.try_acquire(tid):
        raise ApiError(
            429,
            "too_many_requests",
            f"this tenant has {svc.settings.api.tenant_max_inflight} questions being answered "
            "(api.tenant_max_inflight); retry shortly",
            {"Retry-After": "1"},
        )
    if not svc.ask_slots.try_acquire():
        svc.tenant_slots.release(tid)
        raise ApiError(
            429,
            "too_many_requests",
            f"{svc.settings.api.max_inflight} questions are being answered (api.max_inflight); retry shortly",
            {"Retry-After": "1"},
        )
    try:
        ref = body.corpus
        if isinstance(ref, str) and ref.strip().isdigit():
            ref = int(ref.strip())
        # Names resolve here, per request: the pipeline caches by (tenant, corpus), and only ids are
        # never reused (a corpus deleted and created again under its name gets a new id). An id goes
        # as it is: the pipeline finds it (404 for another tenant's or a deleted one, under RLS).
        corpus_id = ref if isinstance(ref, int) else service.get_corpus(svc.db, tid, ref).id
        a = svc.rag.answer(body.question, tenant=tid, corpus=corpus_id, mode=body.mode, ablations=body.ablations,
                           top_k=body.top_k, min_corpus_version=body.min_corpus_version)  # fmt: skip
    finally:
        svc.ask_slots.release()
        svc.tenant_slots.release(tid)
    fused = set(a.fused_ids)
    scaffold = None
    if a.scaffold is not None and a.scaffold_id is not None:
        scaffold = ScaffoldUsed(
            experience_id=a.scaffold_id, score=a.scaffold.score, template_similarity=a.scaffold.template_similarity
        )
    return AskOut(
        answer=a.answer,
        explanation=a.explanation,
        system=a.system,
        passages=[AskPassage(id=p.id, title=p.title, text=p.text, score=p.score) for p in a.passages],
        fused_experience_ids=list(a.fused_ids),
        scaffold_experience_id=a.scaffold_id,
        finding_experience_ids=[f.experience_id for f in a.findings],
        prompt_tokens=a.prompt_tokens,
        completion_tokens=a.completion_tokens,
        cost_usd=a.cost_usd,
        latency_ms={k: round(v, 2) for k, v in a.latency_ms.items()},
        query_log_id=a.query_log_id,
        query_id=a.query_log_id,
        writeback="queued" if a.writeback is not None else "none",
        reused_from=a.reused_from,
        fused_experiences=[
            FusedExperience(id=x.id, query=x.query, weight=x.weight, score=x.score) for x in a.fused if x.id in fused
        ],
        scaffold=scaffold,
    )
