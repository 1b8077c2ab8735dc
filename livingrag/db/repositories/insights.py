"""Read-only views for the web console: an experience's details, write-back decisions, store health
series, query-log statistics and an entity's neighbourhood in the corpus graph.

Every function runs in a :meth:`Database.tenant_session`: row-level security confines it to the
caller's tenant (the analytics views are ``security_invoker``), so another tenant's rows are
invisible and read as missing. Functions never commit.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from livingrag.errors import NotFound

_STALE_IDS = re.compile(r"source passage (?:updated|deleted): ([0-9, ]+)")


@dataclass(frozen=True)
class ExperienceDetail:
    """What an experience's page shows beyond its list row."""

    id: int
    corpus_id: int
    summary: str
    query_template: str | None
    activation: dict[int, float]
    source_passage_ids: list[int]
    corpus_version: int
    grounding: dict[str, Any]
    stale_reason: str | None


def experience_detail(session: Session, experience_id: int) -> ExperienceDetail:
    """The summary, activation map, cited passages and grounding record of one experience."""
    row = session.execute(
        text(
            "SELECT id, corpus_id, summary, query_template, activation, source_passage_ids, corpus_version,"
            " grounding, stale_reason FROM experiences WHERE id = :i"
        ),
        {"i": int(experience_id)},
    ).one_or_none()
    if row is None:
        raise NotFound(f"no experience with id {experience_id}")
    activation = {int(k): float(v) for k, v in (row[4] or {}).items()}
    return ExperienceDetail(
        int(row[0]), int(row[1]), row[2], row[3], activation, [int(p) for p in row[5] or []], int(row[6]),
        dict(row[7] or {}), row[8],
    )  # fmt: skip


def stale_passage_ids(stale_reason: str | None) -> set[int]:
    """The passage ids named by a staleness reason (``source passage updated: 3, 5``)."""
    m = _STALE_IDS.search(stale_reason or "")
    return {int(p) for p in m.group(1).replace(" ", "").split(",") if p} if m else set()


def entity_names(session: Session, corpus_id: int, entity_ids: Sequence[int]) -> dict[int, tuple[str, str | None]]:
    """Entity id -> (name, NER label) for the ids of one corpus that exist."""
    if not entity_ids:
        return {}
    rows = session.execute(
        text("SELECT id, name, label FROM entities WHERE corpus_id = :c AND id = ANY(:e)"),
        {"c": int(corpus_id), "e": [int(e) for e in entity_ids]},
    ).all()
    return {int(r[0]): (r[1], r[2]) for r in rows}


def passages_by_id(session: Session, corpus_id: int, passage_ids: Sequence[int]) -> dict[int, tuple[str, str]]:
    """Passage id -> (title, text) for the ids of one corpus that still exist."""
    if not passage_ids:
        return {}
    rows = session.execute(
        text("SELECT id, title, text FROM passages WHERE corpus_id = :c AND id = ANY(:p)"),
        {"c": int(corpus_id), "p": [int(p) for p in passage_ids]},
    ).all()
    return {int(r[0]): (r[1], r[2]) for r in rows}


def query_mode(session: Session, query_log_id: int) -> tuple[str, bool] | None:
    """(mode, answered from an earlier experience) of a query-log row; None when the caller cannot
    see it."""
    row = session.execute(
        text("SELECT mode, reused_experience_id IS NOT NULL OR error IS NOT NULL FROM query_log WHERE id = :i"),
        {"i": int(query_log_id)},
    ).one_or_none()
    return (str(row[0]), bool(row[1])) if row is not None else None


def writeback_for_query(session: Session, query_log_id: int) -> dict[str, Any] | None:
    """The latest write-back decision logged for a query (None while it is pending or when the
    question wrote nothing back)."""
    row = (
        session.execute(
            text(
                "SELECT id, corpus_id, decision, novelty, grounding, verifier, reason, experience_id, details,"
                " created_at FROM writeback_log WHERE query_log_id = :q ORDER BY id DESC LIMIT 1"
            ),
            {"q": int(query_log_id)},
        )
        .mappings()
        .one_or_none()
    )
    return dict(row) if row is not None else None


def _corpus_filter(corpus_id: int | None, alias: str = "") -> tuple[str, dict[str, Any]]:
    return (f"{alias}corpus_id = :c", {"c": int(corpus_id)}) if corpus_id is not None else ("true", {})


def store_growth(session: Session, corpus_id: int | None = None) -> list[dict[str, Any]]:
    """``experience_store_growth`` per day, summed over the caller's corpora (or one corpus)."""
    where, params = _corpus_filter(corpus_id)
    rows = session.execute(
        text(
            "SELECT day, sum(stored)::int AS stored, sum(candidates)::int AS candidates, sum(written)::int AS written"
            f" FROM experience_store_growth WHERE {where} GROUP BY day ORDER BY day"
        ),
        params,
    ).mappings()
    out, total = [], 0
    for r in rows:
        total += int(r["stored"])
        out.append(dict(r) | {"cumulative_stored": total})
    return out


def gate_rates_by_day(session: Session, corpus_id: int | None = None) -> list[dict[str, Any]]:
    """Per day: write-back decisions and the novelty (NS) and grounding (GS) pass rates, in percent,
    as ``writeback_gate_stats`` computes them for the whole log."""
    where, params = _corpus_filter(corpus_id)
    rows = session.execute(
        text(
            "SELECT (created_at AT TIME ZONE 'UTC')::date AS day,"
            " count(*) FILTER (WHERE decision IN ('stored', 'rejected_novelty', 'rejected_grounding')) AS questions,"
            " count(*) FILTER (WHERE decision = 'stored') AS stored,"
            " count(*) FILTER (WHERE decision = 'rejected_novelty') AS rejected_novelty,"
            " count(*) FILTER (WHERE decision = 'rejected_grounding') AS rejected_grounding,"
            " round(100.0 * count(*) FILTER (WHERE decision IN ('stored', 'rejected_grounding'))"
            "   / nullif(count(*) FILTER (WHERE decision IN ('stored', 'rejected_novelty', 'rejected_grounding')), 0),"
            "   2)::float AS ns_pass_pct,"
            " round(100.0 * count(*) FILTER (WHERE decision = 'stored')"
            "   / nullif(count(*) FILTER (WHERE decision IN ('stored', 'rejected_grounding')), 0), 2)::float"
            "   AS gs_pass_pct"
            f" FROM writeback_log WHERE {where} GROUP BY 1 ORDER BY 1"
        ),
        params,
    ).mappings()
    return [dict(r) for r in rows]


def health_totals(session: Session, corpus_id: int | None = None) -> list[dict[str, Any]]:
    """Per corpus: ``experience_health`` (active, stale, expired) with ``experience_reuse_coverage``."""
    where, params = _corpus_filter(corpus_id, "h.")
    rows = session.execute(
        text(
            "SELECT h.corpus_id, h.experiences, h.active, h.stale, h.expired, h.avg_confidence::float,"
            " r.fusion_coverage_pct::float, r.scaffold_coverage_pct::float, r.topk_selections, r.scaffold_uses"
            " FROM experience_health h LEFT JOIN experience_reuse_coverage r USING (tenant_id, corpus_id)"
            f" WHERE {where} ORDER BY h.corpus_id"
        ),
        params,
    ).mappings()
    return [dict(r) for r in rows]


def query_stats_by_day(session: Session, corpus_id: int | None = None) -> list[dict[str, Any]]:
    """Per day of the query log: questions, latency percentiles (p50, p90, p99 of ``total`` ms) and
    mean prompt and completion tokens per question."""
    where, params = _corpus_filter(corpus_id)
    rows = session.execute(
        text(
            "SELECT (created_at AT TIME ZONE 'UTC')::date AS day, count(*) AS questions,"
            " percentile_cont(0.5) WITHIN GROUP (ORDER BY (latencies ->> 'total')::float) AS p50_ms,"
            " percentile_cont(0.9) WITHIN GROUP (ORDER BY (latencies ->> 'total')::float) AS p90_ms,"
            " percentile_cont(0.99) WITHIN GROUP (ORDER BY (latencies ->> 'total')::float) AS p99_ms,"
            " avg(prompt_tokens)::float AS prompt_tokens, avg(completion_tokens)::float AS completion_tokens"
            f" FROM query_log WHERE {where} GROUP BY 1 ORDER BY 1"
        ),
        params,
    ).mappings()
    return [dict(r) for r in rows]


@dataclass(frozen=True)
class EntityRow:
    id: int
    name: str
    label: str | None
    passages: int


def search_entities(session: Session, corpus_id: int, q: str, *, limit: int = 20) -> list[EntityRow]:
    """Entities of a corpus whose name contains ``q`` (case-insensitive), most connected first."""
    pattern = "%" + q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    rows = session.execute(
        text(
            "SELECT e.id, e.name, e.label, (SELECT count(*) FROM passage_entities pe WHERE pe.entity_id = e.id)"
            " AS n FROM entities e WHERE e.corpus_id = :c AND e.name ILIKE :p"
            " ORDER BY n DESC, e.name, e.id LIMIT :l"
        ),
        {"c": int(corpus_id), "p": pattern, "l": int(limit)},
    ).all()
    return [EntityRow(int(r[0]), r[1], r[2], int(r[3])) for r in rows]


@dataclass(frozen=True)
class Neighbourhood:
    """An entity, the passages that mention it and the entities that share those passages."""

    entity: EntityRow
    passages: list[dict[str, Any]]
    linked: list[dict[str, Any]]


def entity_neighbourhood(session: Session, corpus_id: int, entity_id: int, *, limit: int = 25) -> Neighbourhood:
    """One entity's neighbourhood: its passages (strongest mention first) and the entities that
    co-occur with it in them, ranked by the passages they share."""
    row = session.execute(
        text("SELECT id, name, label FROM entities WHERE corpus_id = :c AND id = :e"),
        {"c": int(corpus_id), "e": int(entity_id)},
    ).one_or_none()
    if row is None:
        raise NotFound(f"no entity {entity_id} in this corpus")
    passages = session.execute(
        text(
            "SELECT p.id, p.title, left(p.text, 300) AS text, pe.mentions, pe.weight::float AS weight"
            " FROM passage_entities pe JOIN passages p ON p.id = pe.passage_id"
            " WHERE pe.corpus_id = :c AND pe.entity_id = :e ORDER BY pe.weight DESC, p.id LIMIT :l"
        ),
        {"c": int(corpus_id), "e": int(entity_id), "l": int(limit)},
    ).mappings()
    plist = [dict(p) for p in passages]
    linked = session.execute(
        text(
            "SELECT e.id, e.name, e.label, count(*) AS shared, array_agg(o.passage_id ORDER BY o.passage_id)"
            " AS passage_ids FROM passage_entities o JOIN entities e ON e.id = o.entity_id"
            " WHERE o.corpus_id = :c AND o.passage_id = ANY(:p) AND o.entity_id <> :e"
            " GROUP BY e.id, e.name, e.label ORDER BY shared DESC, e.name, e.id LIMIT :l"
        ),
        {"c": int(corpus_id), "e": int(entity_id), "p": [p["id"] for p in plist], "l": int(limit)},
    ).mappings()
    mentioned_in = session.execute(
        text("SELECT count(*) FROM passage_entities WHERE corpus_id = :c AND entity_id = :e"),
        {"c": int(corpus_id), "e": int(entity_id)},
    ).scalar_one()
    entity = EntityRow(int(row[0]), row[1], row[2], int(mentioned_in))
    return Neighbourhood(entity, plist, [dict(r) for r in linked])
