"""What the web console's views read, on the tenant's session: the experience store's health over
time, the write-back decision taken for one question, and a corpus's entity graph."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from livingrag.db.repositories import insights
from livingrag.db.repositories.insights import EntityRow as EntityRow
from livingrag.db.repositories.insights import Neighbourhood as Neighbourhood
from livingrag.errors import NotFound

if TYPE_CHECKING:
    from livingrag.db.engine import Database


def store_health(db: Database, tenant_id: int, corpus_id: int | None) -> dict[str, list[dict[str, Any]]]:
    """Per corpus (``corpus_id``: only that one) the store's totals (``corpora``) and, by day, its
    growth, the gates' pass rates and the questions asked (``growth``, ``gates``, ``queries``)."""
    with db.tenant_session(tenant_id) as s:
        return {
            "corpora": insights.health_totals(s, corpus_id),
            "growth": insights.store_growth(s, corpus_id),
            "gates": insights.gate_rates_by_day(s, corpus_id),
            "queries": insights.query_stats_by_day(s, corpus_id),
        }


def writeback_decision(
    db: Database, tenant_id: int, query_log_id: int
) -> tuple[tuple[str, bool], dict[str, Any] | None]:
    """The question's mode and whether it was answered from memory, and its write-back decision
    (None while pending, or when it writes none back); :class:`NotFound` for no such question."""
    with db.tenant_session(tenant_id) as s:
        mode = insights.query_mode(s, query_log_id)
        if mode is None:
            raise NotFound(f"no question with query log id {query_log_id}")
        return mode, insights.writeback_for_query(s, query_log_id)


def search_entities(db: Database, tenant_id: int, corpus_id: int, q: str, *, limit: int) -> list[EntityRow]:
    """The corpus's entities whose name contains ``q``, most connected first."""
    with db.tenant_session(tenant_id) as s:
        return insights.search_entities(s, corpus_id, q, limit=limit)


def entity_neighbourhood(db: Database, tenant_id: int, corpus_id: int, entity_id: int, *, limit: int) -> Neighbourhood:
    """One entity of the corpus, its passages and the entities that share them."""
    with db.tenant_session(tenant_id) as s:
        return insights.entity_neighbourhood(s, corpus_id, entity_id, limit=limit)
