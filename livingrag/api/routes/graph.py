"""``/v1/corpora/{id}/entities``: find entities of a corpus and an entity's neighbourhood in the
graph (its passages and the entities that share them), for the web console's graph view."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query

from livingrag.api.deps import Services, services, tenant_id
from livingrag.api.errors import COMMON_RESPONSES, ErrorResponse
from livingrag.api.routes.common import corpus_of
from livingrag.api.schemas import EntityOut, EntityPassage, LinkedEntity, NeighbourhoodOut, Text
from livingrag.services import insights

router = APIRouter(
    prefix="/v1/corpora",
    tags=["corpora"],
    responses=COMMON_RESPONSES | {404: {"model": ErrorResponse, "description": "No such corpus or entity."}},
)


@router.get("/{corpus_id}/entities", response_model=list[EntityOut], summary="Entities whose name contains q")
def search_entities(
    corpus_id: int = Path(..., ge=1),
    q: Annotated[Text, Query(max_length=200, description="Part of the name (empty: the most connected).")] = "",
    limit: int = Query(20, ge=1, le=100),
    tid: int = Depends(tenant_id),
    svc: Services = Depends(services),
) -> list[EntityOut]:
    info = corpus_of(svc, tid, corpus_id)
    return [EntityOut(**vars(e)) for e in insights.search_entities(svc.db, tid, info.id, q, limit=limit)]


@router.get(
    "/{corpus_id}/entities/{entity_id}",
    response_model=NeighbourhoodOut,
    summary="An entity's neighbourhood: its passages and linked entities",
)
def entity_neighbourhood(
    corpus_id: int = Path(..., ge=1),
    entity_id: int = Path(..., ge=1),
    limit: int = Query(25, ge=1, le=100, description="At most this many passages and linked entities."),
    tid: int = Depends(tenant_id),
    svc: Services = Depends(services),
) -> NeighbourhoodOut:
    info = corpus_of(svc, tid, corpus_id)
    n = insights.entity_neighbourhood(svc.db, tid, info.id, entity_id, limit=limit)
    return NeighbourhoodOut(
        entity=EntityOut(**vars(n.entity)),
        passages=[EntityPassage(**p) for p in n.passages],
        linked=[LinkedEntity(**e) for e in n.linked],
    )
