"""``/v1/corpora/{id}/passages`` and index jobs: add, update and delete passages of a corpus.

Every change goes through the corpus indexer (:func:`livingrag.corpus.service.indexer`), which
writes each batch in one transaction. Changes of one corpus in one app instance are serialised by
its lock in ``Services.index_locks`` (:func:`~livingrag.api.routes.common.corpus_change`: a
request waits at most ``api.index_lock_wait_s``, then 429 ``index_busy``; other corpora never
wait); corpora are also locked in the database, so several replicas stay consistent. A batch that
would take the corpus past ``api.max_passages_per_corpus`` is refused whole (409
``quota_exceeded``).

Concurrent passage adds of one corpus are committed together (:mod:`livingrag.api.add_queue`):
the adds that arrive while the corpus is being changed are indexed in one run when it is free.
An update or deletion answers once this worker's graph cache holds it (read your writes); so does
an add with ``api.add_waits_for_graph`` "always", or "auto" in a process that is the only worker.
Otherwise an add answers at commit and this worker loads it on a thread of its own
(:meth:`GraphCache.load_in_background`); a client that must see it passes the returned
``version`` as ``min_corpus_version``. While a newer graph loads, questions are answered from the
previous one instead of waiting.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import Annotated, Any, cast

from fastapi import APIRouter, Depends, Path, Query, Response

from livingrag.api.add_queue import QueueFull
from livingrag.api.deps import Services, require, services, tenant_id, tenant_writer
from livingrag.api.errors import COMMON_RESPONSES, ApiError, ErrorResponse
from livingrag.api.routes.common import PageParams, corpus_change, corpus_of
from livingrag.api.schemas import (
    Deleted,
    DocumentBatch,
    DocumentIn,
    IndexResult,
    JobOut,
    PassageBatch,
    PassageDelete,
    PassageIn,
    PassageList,
    PassageOut,
    PassageUpdate,
    Text,
)
from livingrag.corpus import service
from livingrag.corpus.graph_loader import current_version
from livingrag.corpus.index_jobs import IndexJobRecord, JobProgress, JobState
from livingrag.corpus.indexer import IndexReport
from livingrag.corpus.ingest import Document
from livingrag.corpus.service import PassageRecord
from livingrag.io.documents import Section
from livingrag.io.readers.structure import render
from livingrag.quotas import check_quota
from livingrag.retrieval.retriever import shared_graph_cache
from livingrag.services.keys import READ, WRITE
from livingrag.types import CorpusInfo

router = APIRouter(
    prefix="/v1",
    tags=["passages"],
    responses=COMMON_RESPONSES
    | {404: {"model": ErrorResponse, "description": "No such corpus, passage or job for this tenant."}},
)

job_reader = require(READ, WRITE)
"""Index jobs are read with either scope: a write key polls the jobs it submitted."""


def _clean(text: str, what: str) -> str:
    if "\x00" in text:
        raise ApiError(422, "invalid_input", f"{what} contains a NUL character")
    return text


def _documents(items: Sequence[PassageIn | DocumentIn], what: str) -> list[Document]:
    docs = []
    for i, p in enumerate(items):
        text = _clean(p.text, f"{what}[{i}].text").strip()
        if not text:
            raise ApiError(422, "invalid_input", f"{what}[{i}].text is empty (only whitespace)")
        title = _clean(p.title, f"{what}[{i}].title").strip()
        if isinstance(p, DocumentIn):
            sections = _sections(p, f"{what}[{i}]", text)
            docs.append(
                Document(
                    title=title,
                    text=text,
                    external_id=p.external_id,
                    title_is_entity=p.title_is_entity,
                    sections=sections,
                )
            )
        else:
            docs.append(Document(title=title, text=text, external_id=p.external_id))
    return docs


def _sections(doc: DocumentIn, where: str, text: str) -> tuple[Section, ...]:
    """A document's sections as the readers make them (:mod:`livingrag.io.readers.structure`): each
    heading one line, each text not blank, and the document's text the one they render to."""
    sections = []
    for j, section in enumerate(doc.sections):
        at = f"{where}.sections[{j}]"
        body = section.text.strip()
        if not body:
            raise ApiError(422, "invalid_input", f"{at}.text is empty (only whitespace)")
        path = tuple(heading.strip() for heading in section.path)
        for k, heading in enumerate(path):
            if len(heading.splitlines()) != 1:
                raise ApiError(422, "invalid_input", f"{at}.path[{k}] must be one line of text (a heading)")
        sections.append(Section(path, body))
    if sections and render(sections) != text:
        raise ApiError(
            422,
            "invalid_input",
            f"{where}.text is not the text of its sections: with sections, give the text they render to (each "
            "section's last heading on a line above its text, the sections separated by a blank line)",
        )
    return tuple(sections)


def job_document(doc: Document) -> dict[str, Any]:
    """``doc`` as an index job stores it (JSON); :func:`_job_document` reads it back unchanged, its
    sections and whether its title is an entity included."""
    out: dict[str, Any] = {"title": doc.title, "text": doc.text, "external_id": doc.external_id}
    if doc.source:
        out["source"] = doc.source
    if not doc.title_is_entity:
        out["title_is_entity"] = False
    if doc.sections:
        out["sections"] = [{"path": list(s.path), "text": s.text} for s in doc.sections]
    return out


def _job_document(d: dict[str, Any]) -> Document:
    """A document of a stored job (jobs stored before sections were kept have title, text and
    external id only)."""
    return Document(
        title=d["title"],
        text=d["text"],
        external_id=d.get("external_id"),
        source=d.get("source") or "",
        title_is_entity=bool(d.get("title_is_entity", True)),
        sections=tuple(Section(tuple(s["path"]), s["text"]) for s in d.get("sections") or ()),
    )


def _result(r: IndexReport) -> IndexResult:
    return IndexResult(
        indexed=r.indexed,
        skipped_existing=r.skipped_existing,
        duplicates_in_input=r.duplicates_in_input,
        new_entities=r.new_entities,
        version=r.version,
        passage_ids=list(r.passage_ids),
    )


def _passage_out(p: PassageRecord) -> PassageOut:
    return PassageOut(id=p.id, corpus_id=p.corpus_id, title=p.title, text=p.text, external_id=p.external_id)


@router.post(
    "/corpora/{corpus_id}/passages",
    status_code=201,
    response_model=IndexResult,
    summary="Add passages (indexed now; each is one passage, never chunked further than the chunk size)",
    responses={
        409: {"model": ErrorResponse, "description": "The batch would pass api.max_passages_per_corpus."},
        429: {"model": ErrorResponse, "description": "The corpus is being changed (index_busy) or rate limit."},
    },
)
def add_passages(
    body: PassageBatch,
    response: Response,
    corpus_id: int = Path(..., ge=1),
    tid: int = Depends(tenant_writer),
    svc: Services = Depends(services),
) -> IndexResult:
    docs = _documents(body.passages, "passages")
    info = corpus_of(svc, tid, corpus_id)
    indexer = service.indexer(svc.db, tid, info, svc.settings)
    try:
        out = svc.add_queue.add(info.id, docs, indexer, lambda: corpus_change(svc, info.id))
    except QueueFull as exc:
        raise ApiError(
            429,
            "index_busy",
            f"corpus {info.id} has {exc.queued} passage adds waiting already; retry",
            {"Retry-After": "1"},
        ) from None
    timings = dict(out.timings_ms)
    if out.indexed and _add_waits_for_graph(svc):  # read your writes: this worker's questions see it
        t = time.perf_counter()
        _load_graph(svc, tid, info)
        timings["graph"] = round((time.perf_counter() - t) * 1000.0, 1)
    elif out.indexed:  # this worker's questions see it once loaded; min_corpus_version=version waits for it
        shared_graph_cache().load_in_background(svc.db.reader, tid, info.id, info.embedding_dim, out.version)
    response.headers["Server-Timing"] = server_timing(timings)
    fields = asdict(out)
    fields.pop("timings_ms")
    return IndexResult(**fields)  # the same fields, batched_with included


def server_timing(timings_ms: dict[str, float]) -> str:
    """A ``Server-Timing`` header value: ``name;dur=ms`` for each stage, comma-separated."""
    return ", ".join(f"{name};dur={ms:g}" for name, ms in timings_ms.items())


def _add_waits_for_graph(svc: Services) -> bool:
    """``api.add_waits_for_graph``: auto waits only when this process is the only worker."""
    mode = svc.settings.api.add_waits_for_graph
    return mode == "always" or (mode == "auto" and not svc.several_workers)


def _load_graph(svc: Services, tid: int, info: CorpusInfo) -> None:
    """Load the corpus's graph at its committed version into the shared cache if the corpus is
    cached, before the change is answered (read your writes on this replica): other questions are
    answered from the previous version meanwhile (:meth:`GraphCache.get`)."""
    cache = shared_graph_cache()
    if (tid, info.id) in cache:
        version = current_version(svc.db, tid, info.id)
        if version is not None:  # from a read standby once it has replayed the change (read your writes)
            with svc.db.corpus_version_floor(tid, info.id, version):
                cache.get(svc.db.reader, tid, info.id, info.embedding_dim, min_version=version)


@router.get("/corpora/{corpus_id}/passages", response_model=PassageList, summary="List a corpus's passages")
def list_passages(
    corpus_id: int = Path(..., ge=1),
    q: Annotated[
        Text | None, Query(max_length=200, description="Only passages whose title or text contains this.")
    ] = None,
    page: PageParams = Depends(),
    tid: int = Depends(tenant_id),
    svc: Services = Depends(services),
) -> PassageList:
    info = corpus_of(svc, tid, corpus_id)
    rows = service.list_passages(svc.db, tid, info.id, limit=page.limit, offset=page.offset, q=q)
    return PassageList(
        items=[_passage_out(p) for p in rows],
        limit=page.limit,
        offset=page.offset,
        next_offset=page.next_offset(len(rows)),
    )


@router.get("/corpora/{corpus_id}/passages/{passage_id}", response_model=PassageOut, summary="One passage")
def get_passage(
    corpus_id: int = Path(..., ge=1),
    passage_id: int = Path(..., ge=1),
    tid: int = Depends(tenant_id),
    svc: Services = Depends(services),
) -> PassageOut:
    info = corpus_of(svc, tid, corpus_id)
    return _passage_out(service.get_passage(svc.db, tid, info.id, passage_id))


@router.patch(
    "/corpora/{corpus_id}/passages/{passage_id}",
    response_model=PassageOut,
    summary="Replace a passage's text and/or title (re-indexed in one transaction)",
    responses={409: {"model": ErrorResponse, "description": "Another passage already has this title and text."}},
)
def update_passage(
    body: PassageUpdate,
    corpus_id: int = Path(..., ge=1),
    passage_id: int = Path(..., ge=1),
    tid: int = Depends(tenant_writer),
    svc: Services = Depends(services),
) -> PassageOut:
    if body.text is None and body.title is None:
        raise ApiError(422, "invalid_input", "body: give text and/or title")
    text = None if body.text is None else _clean(body.text, "text")
    if text is not None and not text.strip():
        raise ApiError(422, "invalid_input", "text is empty (only whitespace)")
    title = None if body.title is None else _clean(body.title, "title")
    info = corpus_of(svc, tid, corpus_id)
    with corpus_change(svc, info.id):
        pid = service.indexer(svc.db, tid, info, svc.settings).update_passage(passage_id, text=text, title=title)
    _load_graph(svc, tid, info)
    return _passage_out(service.get_passage(svc.db, tid, info.id, pid))


@router.delete("/corpora/{corpus_id}/passages/{passage_id}", response_model=Deleted, summary="Delete one passage")
def delete_passage(
    corpus_id: int = Path(..., ge=1),
    passage_id: int = Path(..., ge=1),
    tid: int = Depends(tenant_writer),
    svc: Services = Depends(services),
) -> Deleted:
    return _delete(svc, tid, corpus_id, [passage_id])


@router.post(
    "/corpora/{corpus_id}/passages/delete",
    response_model=Deleted,
    summary="Delete several passages (all or none: an unknown id deletes nothing)",
)
def delete_passages(
    body: PassageDelete,
    corpus_id: int = Path(..., ge=1),
    tid: int = Depends(tenant_writer),
    svc: Services = Depends(services),
) -> Deleted:
    return _delete(svc, tid, corpus_id, body.ids)


def _delete(svc: Services, tid: int, corpus_id: int, ids: Sequence[int]) -> Deleted:
    info = corpus_of(svc, tid, corpus_id)
    with corpus_change(svc, info.id):
        deleted = service.indexer(svc.db, tid, info, svc.settings).delete_passages(list(ids))
    _load_graph(svc, tid, info)
    return Deleted(deleted=deleted)


# ---------------------------------------------------------------- index jobs


def _job_out(job: IndexJobRecord) -> JobOut:
    state = cast(JobState, job.state)
    return JobOut(
        id=job.id,
        corpus_id=job.corpus_id,
        documents=job.documents,
        state=state,
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        result=IndexResult(**job.result) if job.result is not None else None,
        error=job.error,
        progress=job.progress or {},
        attempts=job.attempts,
    )


def run_index_job(
    svc: Services, job: IndexJobRecord, documents: list[dict[str, Any]], progress: JobProgress
) -> dict[str, Any]:
    """Index one job's documents (what the worker of :mod:`livingrag.corpus.index_jobs` runs, in any
    app instance): the corpus's change lock of this instance is held for it (the job's thread may
    wait; request threads never do), and questions asked once it is done see its passages."""
    info = service.get_corpus(svc.db, job.tenant_id, job.corpus_id)
    docs = [_job_document(d) for d in documents]
    with svc.index_locks.hold(info.id, None):
        report = service.indexer(svc.db, job.tenant_id, info, svc.settings, progress=progress).index_documents(docs)
    if report.indexed:
        _load_graph(svc, job.tenant_id, info)
    return _result(report).model_dump()


@router.post(
    "/corpora/{corpus_id}/index-jobs",
    status_code=202,
    response_model=JobOut,
    summary="Index a batch of documents in the background (chunked); poll the returned job",
    description="The job and its documents are stored in the database: any worker or replica answers for it, "
    "and a restart does not lose it (a queued job is taken by the next worker; a running one whose worker stopped is "
    "taken over, skipping the passages already indexed, or failed with the reason after two tries).",
    responses={
        409: {"model": ErrorResponse, "description": "The corpus is full (api.max_passages_per_corpus)."},
        429: {"model": ErrorResponse, "description": "Too many index jobs pending (the tenant's or in all)."},
    },
)
def submit_index_job(
    body: DocumentBatch,
    corpus_id: int = Path(..., ge=1),
    tid: int = Depends(tenant_writer),
    svc: Services = Depends(services),
) -> JobOut:
    docs = _documents(body.documents, "documents")
    info = corpus_of(svc, tid, corpus_id)
    return submit_documents(svc, tid, info, docs)


def submit_documents(svc: Services, tid: int, info: CorpusInfo, docs: Sequence[Document]) -> JobOut:
    """Queue an index job of ``docs`` for the corpus ``info`` (the documents are checked already):
    what ``POST .../index-jobs`` and ``POST .../uploads`` answer."""
    _refuse_full_corpus(svc, tid, info.id)
    return _job_out(svc.jobs.submit(tid, info.id, [job_document(d) for d in docs]))


def _refuse_full_corpus(svc: Services, tid: int, corpus_id: int) -> None:
    """409 ``quota_exceeded`` at once when the corpus already holds ``api.max_passages_per_corpus``
    passages (the job itself refuses, whole, a batch that would pass the quota)."""
    limit = svc.settings.api.max_passages_per_corpus
    if limit is None:
        return
    held = service.count_passages(svc.db, tid, corpus_id)
    check_quota("api.max_passages_per_corpus", limit, held, 1 if held >= limit else 0, "passages per corpus")


@router.get("/index-jobs/{job_id}", response_model=JobOut, summary="An index job's state and result")
def get_index_job(
    job_id: str = Path(..., max_length=64), tid: int = Depends(job_reader), svc: Services = Depends(services)
) -> JobOut:
    job = svc.jobs.get(tid, job_id)
    if job is None:
        raise ApiError(404, "not_found", f"no index job {job_id[:64]!r}")
    return _job_out(job)


@router.get("/index-jobs", response_model=list[JobOut], summary="The caller's recent index jobs, newest first")
def list_index_jobs(tid: int = Depends(job_reader), svc: Services = Depends(services)) -> list[JobOut]:
    return [_job_out(j) for j in svc.jobs.of_tenant(tid, 100)]
