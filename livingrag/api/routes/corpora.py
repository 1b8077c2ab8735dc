"""``/v1/corpora``: the caller's corpora."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Path, Response

from livingrag.api.deps import Services, services, tenant_id, tenant_writer
from livingrag.api.errors import COMMON_RESPONSES, ErrorResponse
from livingrag.api.routes.common import PageParams, corpus_change, corpus_of
from livingrag.api.schemas import CorpusCreate, CorpusList, CorpusOut, CorpusPatch
from livingrag.corpus import service
from livingrag.types import CorpusInfo

router = APIRouter(
    prefix="/v1/corpora",
    tags=["corpora"],
    responses=COMMON_RESPONSES | {404: {"model": ErrorResponse, "description": "No such corpus for this tenant."}},
)


def corpus_out(c: CorpusInfo, counts: dict[str, int] | None = None) -> CorpusOut:
    return CorpusOut(
        id=c.id,
        name=c.name,
        embedding_model=c.embedding_model,
        embedding_dim=c.embedding_dim,
        extractor=c.extractor,
        version=c.version,
        created_at=c.created_at,
        counts=counts,
        retrieval_preset=(c.settings or {}).get("retrieval_preset"),
    )


@router.post(
    "",
    status_code=201,
    response_model=CorpusOut,
    summary="Create a corpus for the caller's tenant",
    responses={
        409: {
            "model": ErrorResponse,
            "description": "The tenant already has a corpus of that name, or api.max_corpora_per_tenant corpora.",
        }
    },
)
def create_corpus(
    body: CorpusCreate, tid: int = Depends(tenant_writer), svc: Services = Depends(services)
) -> CorpusOut:
    return corpus_out(service.create_corpus(svc.db, tid, body.name, svc.settings))


@router.get("", response_model=CorpusList, summary="List the caller's corpora")
def list_corpora(
    page: PageParams = Depends(), tid: int = Depends(tenant_id), svc: Services = Depends(services)
) -> CorpusList:
    rows = service.list_corpora(svc.db, tid)
    items = [corpus_out(c) for c in rows[page.offset : page.offset + page.limit]]
    return CorpusList(items=items, limit=page.limit, offset=page.offset, next_offset=page.next_offset(len(items)))


@router.get("/{corpus_id}", response_model=CorpusOut, summary="One corpus with its graph sizes")
def get_corpus(
    corpus_id: int = Path(..., ge=1), tid: int = Depends(tenant_id), svc: Services = Depends(services)
) -> CorpusOut:
    c, counts = service.corpus_with_counts(svc.db, tid, corpus_id)
    return corpus_out(c, {k: counts[k] for k in ("passages", "sentences", "entities")})


@router.patch(
    "/{corpus_id}",
    response_model=CorpusOut,
    summary="Change a corpus's settings (its retrieval preset); the graph and version stay as they are",
)
def patch_corpus(
    body: CorpusPatch,
    corpus_id: int = Path(..., ge=1),
    tid: int = Depends(tenant_writer),
    svc: Services = Depends(services),
) -> CorpusOut:
    if body.retrieval_preset is None:
        c = corpus_of(svc, tid, corpus_id)
    else:
        c = service.set_retrieval_preset(svc.db, tid, corpus_id, body.retrieval_preset)
    return corpus_out(c)


@router.delete("/{corpus_id}", status_code=204, summary="Delete a corpus, its graph and its experiences")
def delete_corpus(
    corpus_id: int = Path(..., ge=1), tid: int = Depends(tenant_writer), svc: Services = Depends(services)
) -> Response:
    corpus_of(svc, tid, corpus_id)
    with corpus_change(svc, corpus_id):
        service.delete_corpus(svc.db, tid, corpus_id)
    return Response(status_code=204)
