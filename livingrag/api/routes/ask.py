"""``POST /v1/ask``: answer a question over one of the caller's corpora, whole or streamed.

The answer returns as soon as the LLM has answered; the experience write-back is queued on the
pipeline's worker (a full queue drops the candidate and logs the drop). At most
``api.tenant_max_inflight`` questions of one tenant and ``api.max_inflight`` in all are answered
at once; more get 429 (with ``Retry-After``) at once instead of waiting.

With ``"stream": true`` the reply is server-sent events (``text/event-stream``)::

    event: token     data: {"text": "Evidence: ..."}        the model's text as it is made
    event: restart   data: {"reason": "..."}                the text so far is void; asked again
    event: answer    data: {...AskOut, "writeback_decision": {...}}   last, once
    event: error     data: {"error": {"code", "message", "request_id"}, "status": 504}   last, instead

The question runs on a thread of its own and the response starts with its first event, so every
failure before the model's first token (no such corpus, a bad question, 429, the LLM refusing the
request) still answers with its HTTP status and JSON body; after it, a failure is the ``error``
event. A client that goes away stops the generation at the next token. The ``answer`` event waits
up to ``api.stream_writeback_wait_s`` for the write-back decision.
"""

from __future__ import annotations

import contextlib
import json
import queue
import threading
from collections.abc import AsyncIterator
from typing import Any

import anyio
from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse

from livingrag.api.deps import Services, services, tenant_id
from livingrag.api.errors import COMMON_RESPONSES, ApiError, ErrorResponse, error_event
from livingrag.api.routes.store import writeback_out
from livingrag.api.schemas import AskFinal, AskIn, AskOut, AskPassage, Citation, FusedExperience, ScaffoldUsed
from livingrag.corpus import service
from livingrag.errors import LivingRAGError
from livingrag.generation.citations import cite
from livingrag.pipeline.answer_pipeline import Answer

router = APIRouter(prefix="/v1", tags=["ask"])


class StreamClosed(LivingRAGError):
    """The client of a streamed answer went away; the generation stops."""


@router.post(
    "/ask",
    response_model=AskOut,
    summary="Answer a question (write-back of the experience happens afterwards); streamed with stream=true",
    responses=COMMON_RESPONSES
    | {
        200: {
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
            "description": "The answer; with stream=true, server-sent events (token, restart, then answer or "
            "error; the answer event's data is AskFinal).",
        },
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
def ask(
    body: AskIn, request: Request, tid: int = Depends(tenant_id), svc: Services = Depends(services)
) -> AskOut | StreamingResponse:
    _acquire_slots(svc, tid)
    if body.stream:
        return _streamed(body, request, tid, svc)
    try:
        a = _answer(body, tid, svc)
    finally:
        _release_slots(svc, tid)
    return ask_out(a)


def _acquire_slots(svc: Services, tid: int) -> None:
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


def _release_slots(svc: Services, tid: int) -> None:
    svc.ask_slots.release()
    svc.tenant_slots.release(tid)


def _answer(body: AskIn, tid: int, svc: Services, tokens: _QueueSink | None = None) -> Answer:
    ref = body.corpus
    if isinstance(ref, str) and ref.strip().isdigit():
        ref = int(ref.strip())
    # Names resolve here, per request: the pipeline caches by (tenant, corpus), and only ids are
    # never reused (a corpus deleted and created again under its name gets a new id). An id goes
    # as it is: the pipeline finds it (404 for another tenant's or a deleted one, under RLS).
    corpus_id = ref if isinstance(ref, int) else service.get_corpus(svc.db, tid, ref).id
    return svc.rag.answer(body.question, tenant=tid, corpus=corpus_id, mode=body.mode, ablations=body.ablations,
                          top_k=body.top_k, min_corpus_version=body.min_corpus_version, tokens=tokens)  # fmt: skip


def ask_out(a: Answer) -> AskOut:
    """The API's view of an answer."""
    fused = set(a.fused_ids)
    scaffold = None
    if a.scaffold is not None and a.scaffold_id is not None:
        scaffold = ScaffoldUsed(
            experience_id=a.scaffold_id, score=a.scaffold.score, template_similarity=a.scaffold.template_similarity
        )
    citations = [
        Citation(number=n, passage_id=a.passages[n - 1].id, title=a.passages[n - 1].title)
        for n in cite(a.answer, a.explanation, a.passages).numbers
    ]
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
        citations=citations,
    )


class _QueueSink:
    """The pipeline's :class:`~livingrag.pipeline.answer_pipeline.TokenSink` for a streamed reply:
    each piece goes onto the queue the response reads; once the client is gone, the next piece
    raises :class:`StreamClosed`, which ends the generation."""

    def __init__(self, events: queue.Queue[tuple[str, Any]]) -> None:
        self.events = events
        self.closed = threading.Event()

    def token(self, text: str) -> None:
        if self.closed.is_set():
            raise StreamClosed("the client of this streamed answer went away")
        self.events.put(("token", {"text": text}))

    def restart(self, reason: str) -> None:
        self.events.put(("restart", {"reason": reason}))


def _sse(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, default=str)}\n\n".encode()


def _streamed(body: AskIn, request: Request, tid: int, svc: Services) -> StreamingResponse:
    events: queue.Queue[tuple[str, Any]] = queue.Queue()
    sink = _QueueSink(events)

    def work() -> None:
        try:
            events.put(("answer", _answer(body, tid, svc, sink)))
        except BaseException as exc:  # every failure goes to the client, as its status or its event
            events.put(("error", exc))
        finally:
            _release_slots(svc, tid)

    try:
        threading.Thread(target=work, name=f"ask-stream-{tid}", daemon=True).start()
    except BaseException:
        _release_slots(svc, tid)
        raise
    first = events.get()
    if first[0] == "error":
        raise first[1]  # nothing sent yet: the usual status and JSON body

    async def reply() -> AsyncIterator[bytes]:
        # async, so that a client going away cancels it here (at the await), where ``finally`` marks
        # the sink closed; a sync iterator would be left waiting on a thread, and the model ran on
        kind, data = first
        try:
            while True:
                if kind == "answer":
                    final = await anyio.to_thread.run_sync(_final, data, tid, svc)
                    yield _sse("answer", final.model_dump(mode="json"))
                    return
                if kind == "error":
                    yield _sse("error", error_event(request, data))
                    return
                yield _sse(kind, data)
                kind, data = await anyio.to_thread.run_sync(events.get, abandon_on_cancel=True)
        finally:
            sink.closed.set()  # a client gone mid-stream stops the model at its next token

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(reply(), media_type="text/event-stream", headers=headers)


def _final(a: Answer, tid: int, svc: Services) -> AskFinal:
    """The ``answer`` event: the answer as :func:`ask_out` gives it, with the write-back decision
    once taken (waiting up to ``api.stream_writeback_wait_s``)."""
    decision = None
    if a.writeback is not None and a.query_log_id is not None:
        # not decided in time: shown as pending; failed or dropped: the decision row says so
        with contextlib.suppress(Exception):
            a.writeback.result(timeout=svc.settings.api.stream_writeback_wait_s)
        decision = writeback_out(svc, tid, a.query_log_id)
    return AskFinal(**ask_out(a).model_dump(), writeback_decision=decision)
