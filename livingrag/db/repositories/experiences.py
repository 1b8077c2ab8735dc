"""Experiences: candidate preselection, gated inserts, use counters, expiry, pruning, staleness.

Functions take a :class:`~sqlalchemy.orm.Session` and never commit. Tenant-scoped functions run
in a :meth:`Database.tenant_session` (RLS confines them); the maintenance functions that take an
optional ``tenant_id`` also work in an owner session across tenants.

Preselection (eq. 7's candidate set) unions two channels, each ranked, and keeps at most ``m``
rows, interleaved by rank:

* **embedding**: the ``ceil(m / 2)`` nearest query embeddings through the partial half-precision
  HNSW index of the embedding's dimension, with ``hnsw.iterative_scan = relaxed_order`` so that the
  tenant/corpus/validity filter does not starve the scan (an HNSW scan's cost grows quickly with
  the rows it must return through a selective filter, hence half of ``m``);
* **entities**: the experiences that share the strongest seed entities of the base activation:
  the ``4 m`` with the largest overlap ``sum_e a_base[e] * w_k[e]`` (``experience_entities.weight``
  holds each map's *unit-normalised* weight ``a~_k[e] / |a~_k|``, so this is
  ``cos(a_base, a~_k) * |a_base|`` over the seed entities), re-ranked by eq. 7 itself with the exact
  embedding cosine, of which the best ``m`` are kept. Each seed entity contributes at most
  ``rows_per_entity`` rows (its strongest), which bounds the cost of very common entities.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import TextClause, text
from sqlalchemy.orm import Session

from livingrag.errors import InvalidInput, NotFound

MAX_HNSW_DIM = 4000  # pgvector's HNSW limit for halfvec
LOCK_NAMESPACE = 0x4C52  # "LR": first key of pg_advisory_xact_lock(int, int) for write-back scopes
_ACTIVE = "NOT {a}stale AND ({a}expires_at IS NULL OR {a}expires_at > :now)"


_PACKED = np.dtype([("e", ">i8"), ("w", ">f8")])


@dataclass(frozen=True)
class CandidateRow:
    """One preselected experience with what rescoring, fusion and scaffolds need. The activation
    map comes as two arrays (entity ids, weights); :attr:`activation` gives it as a dict."""

    id: int
    query: str
    query_template: str | None
    embedding: np.ndarray
    entity_ids: np.ndarray
    weights: np.ndarray
    confidence: float
    created_at: datetime
    summary: str
    channel_rank: int

    @property
    def activation(self) -> dict[int, float]:
        return dict(zip(self.entity_ids.tolist(), self.weights.tolist(), strict=True))


def unpack_activation(data: bytes | None) -> tuple[np.ndarray, np.ndarray]:
    """Decode the packed map of :func:`preselect` (big-endian int8 id, float8 weight pairs)."""
    if not data:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
    arr = np.frombuffer(bytes(data), dtype=_PACKED)
    return arr["e"].astype(np.int64), arr["w"].astype(np.float64)


@dataclass(frozen=True)
class NewExperience:
    """The row :func:`insert_experience` writes."""

    tenant_id: int
    corpus_id: int
    query: str
    query_template: str
    embedding: np.ndarray
    activation: dict[int, float]
    summary: str
    answer: str
    confidence: float
    grounding: dict[str, Any]
    source_passage_ids: list[int]
    corpus_version: int
    created_at: datetime
    expires_at: datetime | None


@dataclass(frozen=True)
class ExperienceRecord:
    """An experience as listed by the admin commands."""

    id: int
    tenant_id: int
    corpus_id: int
    query: str
    answer: str
    confidence: float
    created_at: datetime
    expires_at: datetime | None
    fusion_uses: int
    scaffold_uses: int
    last_used_at: datetime | None
    stale: bool
    stale_reason: str | None
    map_size: int


def from_vector_send(data: bytes) -> np.ndarray:
    """Decode pgvector's binary form (``vector_send``: int16 dim, int16 unused, dim big-endian
    float4) into float32; parsing the text form costs ~0.2 ms per 384-d vector, this ~1 us. (The
    activation map travels packed for the same reason: decoding 64 jsonb maps costs milliseconds.)"""
    buf = bytes(data)
    dim = int.from_bytes(buf[:2], "big")
    return np.frombuffer(buf, dtype=">f4", count=dim, offset=4).astype(np.float32)


def as_array(value: Any) -> np.ndarray:
    """A pgvector value (``Vector`` or array) as a float32 numpy array."""
    to_numpy = getattr(value, "to_numpy", None)
    return np.asarray(to_numpy() if to_numpy is not None else value, dtype=np.float32)


def _dim_sql(dim: int) -> int:
    if not isinstance(dim, int) or isinstance(dim, bool) or not 1 <= dim <= 16000:
        raise InvalidInput(f"embedding dimension must be an integer in [1, 16000], got {dim!r}")
    return dim


def configure_vector_scan(session: Session, *, ef_search: int) -> None:
    """``SET LOCAL`` the HNSW search settings for this transaction: iterative scan in relaxed order
    (so filtered scans keep going until they find enough rows) and ``ef_search``."""
    ef = int(min(max(ef_search, 1), 1000))
    session.execute(
        text(
            "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', :ef, true)"
        ),
        {"ef": str(ef)},
    )


@functools.lru_cache(maxsize=32)
def _preselect_sql(dim: int) -> TextClause:
    """The preselection statement for one embedding dimension (built once: SQLAlchemy parses a
    text() statement's bind parameters every time one is constructed)."""
    vec = f"halfvec({dim})"  # the HNSW indexes are on half precision (migration 0002)
    return text(
        f"""
        WITH emb AS (
          SELECT x.id, row_number() OVER (ORDER BY x.d, x.id) AS r FROM (
            SELECT id, (query_embedding::{vec}) <=> CAST(:q AS {vec}) AS d FROM experiences
            WHERE embedding_dim = {dim} AND tenant_id = :t AND corpus_id = :c AND {_ACTIVE.format(a="")}
            ORDER BY (query_embedding::{vec}) <=> CAST(:q AS {vec})
            LIMIT :m_emb
          ) x
        ),
        hits AS (
          SELECT h.experience_id AS id, sum(h.weight * s.w) AS dot
          FROM unnest(CAST(:eids AS bigint[]), CAST(:ews AS float8[])) AS s(entity_id, w)
          CROSS JOIN LATERAL (
            SELECT ee.experience_id, ee.weight FROM experience_entities ee
            WHERE ee.tenant_id = :t AND ee.corpus_id = :c AND ee.entity_id = s.entity_id
            ORDER BY ee.weight DESC
            LIMIT :per_entity
          ) h
          GROUP BY h.experience_id
          ORDER BY dot DESC, h.experience_id
          LIMIT :m_hits
        ),
        ent AS (
          SELECT h.id, row_number() OVER (
            ORDER BY :alpha * (1 - (x.query_embedding <=> CAST(:q AS vector({dim})))) + (1 - :alpha) * h.dot / :bnorm
              DESC, h.id
          ) AS r
          FROM hits h JOIN experiences x ON x.id = h.id
          WHERE x.embedding_dim = {dim}
          ORDER BY r
          LIMIT :m
        ),
        u AS (
          SELECT id, min(r) AS r FROM (SELECT id, r FROM emb UNION ALL SELECT id, r FROM ent) z GROUP BY id
        )
        SELECT e.id, e.query, e.query_template, vector_send(e.query_embedding),
               (SELECT string_agg(int8send(kv.key::bigint) || float8send(kv.value::float8), ''::bytea)
                FROM jsonb_each_text(e.activation) kv),
               e.confidence, e.created_at, e.summary, u.r
        FROM u JOIN experiences e ON e.id = u.id
        WHERE e.embedding_dim = {dim} AND {_ACTIVE.format(a="e.")}
        ORDER BY u.r, e.id
        LIMIT :m
    """
    )


def preselect(
    session: Session,
    *,
    tenant_id: int,
    corpus_id: int,
    embedding: np.ndarray,
    seeds: Mapping[int, float],
    m: int,
    now: datetime,
    rows_per_entity: int = 256,
    ef_search: int = 40,
    alpha: float = 0.5,
    entity_hits: int | None = None,
) -> list[CandidateRow]:
    """The union of the embedding channel (its ``ceil(m / 2)`` nearest) and the entity channel
    (its ``m`` best): at most ``m`` active experiences (not stale, not expired at ``now``) of this
    tenant and corpus, best channel rank first. The entity channel takes the ``entity_hits``
    (default ``4 m``) experiences with the largest seed overlap and ranks them by eq. 7 itself
    (exact embedding cosine, seed-restricted activation cosine, weight ``alpha``), so experiences
    that share an entity but answer another kind of question do not crowd out the relevant ones."""
    dim = _dim_sql(int(np.asarray(embedding).shape[0]))
    if m < 1:
        return []
    configure_vector_scan(session, ef_search=ef_search)
    seed_ids = [int(e) for e in seeds]
    seed_ws = [float(w) for w in seeds.values()]
    rows = session.execute(
        _preselect_sql(dim),
        {
            "t": tenant_id,
            "c": corpus_id,
            "q": np.asarray(embedding, dtype=np.float32),
            "m": m,
            "m_emb": (m + 1) // 2,
            "m_hits": entity_hits if entity_hits is not None else 4 * m,
            "alpha": float(alpha),
            "bnorm": math.sqrt(sum(w * w for w in seed_ws)) or 1.0,
            "now": now,
            "eids": seed_ids,
            "ews": seed_ws,
            "per_entity": rows_per_entity,
        },
    ).all()
    out = []
    for r in rows:
        ids, weights = unpack_activation(r[4])
        out.append(
            CandidateRow(
                id=int(r[0]),
                query=r[1],
                query_template=r[2],
                embedding=from_vector_send(r[3]),
                entity_ids=ids,
                weights=weights,
                confidence=float(r[5]),
                created_at=r[6],
                summary=r[7],
                channel_rank=int(r[8]),
            )
        )
    return out


def lock_scope(session: Session, corpus_id: int) -> None:
    """Serialise write-backs of one corpus (and so of one (tenant, corpus) pair, corpus ids being
    global) until the end of the transaction: ``pg_advisory_xact_lock``."""
    session.execute(
        text("SELECT pg_advisory_xact_lock(:ns, :k)"), {"ns": LOCK_NAMESPACE, "k": int(corpus_id % 2_147_483_647)}
    )


def corpus_dimension_and_version(session: Session, corpus_id: int) -> tuple[int, int]:
    """The corpus's embedding dimension and current version (``NotFound`` when this session
    cannot see it)."""
    row = session.execute(
        text("SELECT embedding_dim, version FROM corpora WHERE id = :c"), {"c": corpus_id}
    ).one_or_none()
    if row is None:
        raise NotFound(f"no corpus with id {corpus_id} for this tenant")
    return int(row[0]), int(row[1])


def entity_surface_forms(session: Session, corpus_id: int, entity_ids: Sequence[int]) -> dict[int, tuple[str, ...]]:
    """Names and surface forms of the given entities of one corpus (for KeySent anchors)."""
    if not entity_ids:
        return {}
    rows = session.execute(
        text("SELECT id, name, surface_forms FROM entities WHERE corpus_id = :c AND id = ANY(:ids)"),
        {"c": corpus_id, "ids": [int(e) for e in entity_ids]},
    ).all()
    return {int(r[0]): tuple(dict.fromkeys([r[1], *(r[2] or [])])) for r in rows}


def unit_weights(activation: Mapping[int, float]) -> dict[int, float]:
    """``a~[e] / |a~|``: the weights ``experience_entities`` stores."""
    norm = math.sqrt(sum(v * v for v in activation.values()))
    return {int(e): float(v) / norm for e, v in activation.items()} if norm > 0 else {}


def insert_experience(session: Session, new: NewExperience) -> int:
    """Insert the experience and its entity rows (unit-normalised weights); returns its id."""
    emb = np.asarray(new.embedding, dtype=np.float32)
    dim = _dim_sql(int(emb.shape[0]))
    exp_id = session.execute(
        text(
            "INSERT INTO experiences (tenant_id, corpus_id, query, query_template, query_embedding, embedding_dim,"
            " activation, summary, answer, created_at, expires_at, confidence, grounding, source_passage_ids,"
            " corpus_version) VALUES (:t, :c, :q, :tpl, :v, :d, CAST(:a AS jsonb), :s, :ans, :now, :exp, :conf,"
            " CAST(:g AS jsonb),"
            " :src, :ver) RETURNING id"
        ),
        {
            "t": new.tenant_id,
            "c": new.corpus_id,
            "q": new.query,
            "tpl": new.query_template,
            "v": emb,
            "d": dim,
            "a": json.dumps({str(k): v for k, v in new.activation.items()}),
            "s": new.summary,
            "ans": new.answer,
            "now": new.created_at,
            "exp": new.expires_at,
            "conf": new.confidence,
            "g": json.dumps(new.grounding, default=str),
            "src": [int(p) for p in new.source_passage_ids],
            "ver": new.corpus_version,
        },
    ).scalar_one()
    weights = unit_weights(new.activation)
    if weights:
        session.execute(
            text(
                "INSERT INTO experience_entities (experience_id, entity_id, tenant_id, corpus_id, weight)"
                " SELECT :x, e, :t, :c, w FROM unnest(CAST(:es AS bigint[]), CAST(:ws AS float8[])) AS u(e, w)"
            ),
            {"x": exp_id, "t": new.tenant_id, "c": new.corpus_id, "es": list(weights), "ws": list(weights.values())},
        )
    return int(exp_id)


def insert_writeback_log(
    session: Session,
    *,
    tenant_id: int,
    corpus_id: int,
    query: str,
    decision: str,
    novelty: float | None,
    grounding: float | None,
    verifier: str | None,
    reason: str | None,
    timings: Mapping[str, float],
    details: Mapping[str, Any],
    experience_id: int | None = None,
    query_log_id: int | None = None,
) -> int:
    """One decision row of ``writeback_log``; returns its id."""
    return int(
        session.execute(
            text(
                "INSERT INTO writeback_log (tenant_id, corpus_id, query_log_id, experience_id, query, novelty,"
                " grounding, verifier, decision, reason, timings, details) VALUES (:t, :c, :ql, :x, :q, :n, :g, :v,"
                " :d, :r, CAST(:tm AS jsonb), CAST(:det AS jsonb)) RETURNING id"
            ),
            {
                "t": tenant_id,
                "c": corpus_id,
                "ql": query_log_id,
                "x": experience_id,
                "q": query,
                "n": _finite_or_none(novelty),
                "g": _finite_or_none(grounding),
                "v": verifier,
                "d": decision,
                "r": reason,
                "tm": json.dumps(dict(timings)),
                "det": json.dumps(dict(details), default=str),
            },
        ).scalar_one()
    )


def _finite_or_none(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def record_use(
    session: Session, *, fused_ids: Sequence[int], scaffold_id: int | None, now: datetime | None = None
) -> int:
    """Count one fusion use for each of ``fused_ids`` and one scaffold use for ``scaffold_id``,
    and set their ``last_used_at``; returns the number of experiences touched."""
    fused = sorted({int(i) for i in fused_ids})
    ids = sorted(set(fused) | ({int(scaffold_id)} if scaffold_id is not None else set()))
    if not ids:
        return 0
    res = session.execute(
        text(
            "UPDATE experiences SET fusion_uses = fusion_uses + (id = ANY(:f))::int,"
            " scaffold_uses = scaffold_uses + (id = :s)::int, last_used_at = coalesce(:now, now())"
            " WHERE id = ANY(:ids)"
        ),
        {"f": fused, "s": scaffold_id if scaffold_id is not None else -1, "ids": ids, "now": now},
    )
    return int(res.rowcount or 0)


def count_corpus_experiences(session: Session, corpus_id: int) -> int:
    """Experiences of one corpus (active, stale and expired alike)."""
    return int(
        session.execute(
            text("SELECT count(*) FROM experiences WHERE corpus_id = :c"), {"c": int(corpus_id)}
        ).scalar_one()
    )


def delete_corpus_experiences(session: Session, corpus_id: int) -> int:
    """Delete every experience of one corpus (their entity rows cascade; write-back log rows keep
    their decision with ``experience_id`` set to NULL); returns the number deleted."""
    res = session.execute(text("DELETE FROM experiences WHERE corpus_id = :c"), {"c": int(corpus_id)})
    return int(res.rowcount or 0)


def mark_stale_for_passages(session: Session, corpus_id: int, passage_ids: Sequence[int], reason: str) -> int:
    """Mark the active experiences of a corpus that cite any of ``passage_ids`` as stale."""
    if not passage_ids:
        return 0
    res = session.execute(
        text(
            "UPDATE experiences SET stale = true, stale_reason = :r"
            " WHERE corpus_id = :c AND NOT stale AND source_passage_ids && CAST(:p AS bigint[])"
        ),
        {"c": corpus_id, "p": [int(p) for p in passage_ids], "r": reason},
    )
    return int(res.rowcount or 0)


def _scope(tenant_id: int | None, corpus_id: int | None, alias: str = "") -> tuple[str, dict[str, Any]]:
    conds, params = ["true"], {}
    if tenant_id is not None:
        conds.append(f"{alias}tenant_id = :scope_t")
        params["scope_t"] = tenant_id
    if corpus_id is not None:
        conds.append(f"{alias}corpus_id = :scope_c")
        params["scope_c"] = corpus_id
    return " AND ".join(conds), params


def expire(
    session: Session,
    *,
    created_before: datetime,
    now: datetime,
    tenant_id: int | None = None,
    corpus_id: int | None = None,
    dry_run: bool = False,
) -> int:
    """Expire (set ``expires_at = now``) the not-yet-expired experiences created before
    ``created_before``; returns how many (``dry_run``: how many would be)."""
    where, params = _scope(tenant_id, corpus_id)
    params |= {"before": created_before, "now": now}
    cond = f"{where} AND created_at < :before AND (expires_at IS NULL OR expires_at > :now)"
    if dry_run:
        return int(session.execute(text(f"SELECT count(*) FROM experiences WHERE {cond}"), params).scalar_one())
    return int(session.execute(text(f"UPDATE experiences SET expires_at = :now WHERE {cond}"), params).rowcount or 0)


@dataclass(frozen=True)
class PruneCriteria:
    """What :func:`prune` deletes (any combination; each criterion adds rows)."""

    max_per_tenant: int | None = None  # keep this many per tenant, the most useful
    min_confidence: float | None = None  # delete below this confidence
    unused_since: datetime | None = None  # delete if neither used nor created since then
    expired: bool = False  # delete experiences expired at `now`
    stale: bool = False  # delete stale experiences


def prune(
    session: Session,
    criteria: PruneCriteria,
    *,
    now: datetime,
    tenant_id: int | None = None,
    corpus_id: int | None = None,
    dry_run: bool = False,
) -> dict[str, int]:
    """Delete experiences by the given criteria; returns the count per criterion and the total
    (an experience matching several criteria counts once in ``total``).

    ``max_per_tenant`` keeps each tenant's ``N`` most useful experiences, usefulness ordered by
    total uses, then confidence, then recency; the rest go, least useful first.
    """
    where, params = _scope(tenant_id, corpus_id)
    params["now"] = now
    parts: dict[str, str] = {}
    if criteria.max_per_tenant is not None:
        if criteria.max_per_tenant < 0:
            raise InvalidInput("max_per_tenant must be >= 0")
        params["keep"] = criteria.max_per_tenant
        parts["max_per_tenant"] = (
            f"SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY tenant_id ORDER BY"
            f" fusion_uses + scaffold_uses DESC, confidence DESC, created_at DESC, id DESC) AS rk"
            f" FROM experiences WHERE {where}) z WHERE rk > :keep"
        )
    if criteria.min_confidence is not None:
        params["minc"] = criteria.min_confidence
        parts["min_confidence"] = f"SELECT id FROM experiences WHERE {where} AND confidence < :minc"
    if criteria.unused_since is not None:
        params["since"] = criteria.unused_since
        parts["unused_since"] = (
            f"SELECT id FROM experiences WHERE {where} AND coalesce(last_used_at, created_at) < :since"
        )
    if criteria.expired:
        parts["expired"] = f"SELECT id FROM experiences WHERE {where} AND expires_at IS NOT NULL AND expires_at <= :now"
    if criteria.stale:
        parts["stale"] = f"SELECT id FROM experiences WHERE {where} AND stale"
    if not parts:
        raise InvalidInput("prune needs at least one criterion (max per tenant, min confidence, unused since, ...)")
    counts = {
        name: int(session.execute(text(f"SELECT count(*) FROM ({sql}) q"), params).scalar_one())
        for name, sql in parts.items()
    }
    union = " UNION ".join(parts.values())
    if dry_run:
        counts["total"] = int(session.execute(text(f"SELECT count(*) FROM ({union}) q"), params).scalar_one())
    else:
        res = session.execute(text(f"DELETE FROM experiences WHERE id IN ({union})"), params)
        counts["total"] = int(res.rowcount or 0)
    return counts


def list_experiences(
    session: Session,
    *,
    tenant_id: int | None = None,
    corpus_id: int | None = None,
    include_inactive: bool = True,
    now: datetime | None = None,
    limit: int = 50,
    offset: int = 0,
) -> list[ExperienceRecord]:
    """Experiences, newest first."""
    where, params = _scope(tenant_id, corpus_id)
    if not include_inactive:
        where += " AND " + _ACTIVE.format(a="")
        params["now"] = now
    params |= {"lim": limit, "off": offset}
    rows = session.execute(
        text(
            "SELECT id, tenant_id, corpus_id, query, answer, confidence, created_at, expires_at, fusion_uses,"
            " scaffold_uses, last_used_at, stale, stale_reason,"
            f" (SELECT count(*) FROM jsonb_object_keys(activation)) FROM experiences WHERE {where}"
            " ORDER BY created_at DESC, id DESC LIMIT :lim OFFSET :off"
        ),
        params,
    ).all()
    return [ExperienceRecord(*r) for r in rows]


def get_experience(session: Session, experience_id: int) -> ExperienceRecord:
    rows = session.execute(
        text(
            "SELECT id, tenant_id, corpus_id, query, answer, confidence, created_at, expires_at, fusion_uses,"
            " scaffold_uses, last_used_at, stale, stale_reason,"
            " (SELECT count(*) FROM jsonb_object_keys(activation)) FROM experiences WHERE id = :i"
        ),
        {"i": experience_id},
    ).all()
    if not rows:
        raise NotFound(f"no experience with id {experience_id}")
    return ExperienceRecord(*rows[0])


def store_stats(session: Session, *, tenant_id: int | None = None) -> list[dict[str, Any]]:
    """One row per (tenant, corpus) from the analytics views: store health, gate statistics
    (Table 6 columns) and reuse coverage (Table 16 columns)."""
    where, params = _scope(tenant_id, None, "h.")
    rows = session.execute(
        text(
            "SELECT h.tenant_id, h.corpus_id, h.experiences, h.active, h.stale, h.expired, h.avg_confidence,"
            " coalesce(g.questions, 0) AS questions, g.ns_pass_pct, coalesce(g.gs_checked, 0) AS gs_checked,"
            " g.gs_pass_pct, coalesce(g.gs_reject, 0) AS gs_reject, coalesce(g.stored, 0) AS stored,"
            " coalesce(g.errors, 0) AS errors, coalesce(g.dropped, 0) AS dropped,"
            " r.topk_selections, r.fusion_coverage_pct, r.scaffold_uses, r.scaffold_coverage_pct,"
            " r.max_scaffold_uses"
            " FROM experience_health h"
            " LEFT JOIN writeback_gate_stats g USING (tenant_id, corpus_id)"
            " LEFT JOIN experience_reuse_coverage r USING (tenant_id, corpus_id)"
            f" WHERE {where} ORDER BY h.tenant_id, h.corpus_id"
        ),
        params,
    ).mappings()
    return [dict(r) for r in rows]


def ensure_hnsw_index(session: Session, dim: int) -> str:
    """Create (if missing) the partial half-precision HNSW index on experience query embeddings of
    dimension ``dim`` (``(query_embedding::halfvec(dim)) halfvec_cosine_ops WHERE embedding_dim =
    dim``) and return its name. Runs as the schema owner through the SECURITY DEFINER function
    ``livingrag_ensure_experience_hnsw`` (migration 0002), so an application session may call it
    when it creates a corpus whose embedding model has a new dimension. The build holds a SHARE
    lock on ``experiences`` (writes wait) for as long as the table takes to scan."""
    dim = _dim_sql(dim)
    if dim > MAX_HNSW_DIM:
        raise InvalidInput(f"HNSW indexes support at most {MAX_HNSW_DIM} dimensions, got {dim}")
    return str(session.execute(text("SELECT livingrag_ensure_experience_hnsw(:d)"), {"d": dim}).scalar_one())


def delete_experience(session: Session, experience_id: int) -> None:
    """Delete one experience (its entity rows cascade); :class:`NotFound` when this session cannot see it."""
    res = session.execute(text("DELETE FROM experiences WHERE id = :i"), {"i": int(experience_id)})
    if not res.rowcount:
        raise NotFound(f"no experience with id {experience_id}")
