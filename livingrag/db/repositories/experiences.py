"""Experiences: gated inserts, use counters, expiry, pruning, staleness, listings.

Functions take a :class:`~sqlalchemy.orm.Session` and never commit. Tenant-scoped functions run
in a :meth:`Database.tenant_session` (RLS confines them); the maintenance functions that take an
optional ``tenant_id`` also work in an owner session across tenants. The candidate preselection of
matching and of the novelty gate (eq. 7) is :mod:`livingrag.db.repositories.experience_candidates`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

import numpy as np
from sqlalchemy import text
from sqlalchemy.orm import Session

from livingrag.db.repositories.rows import rowcount
from livingrag.errors import InvalidInput, NotFound
from livingrag.types import MAX_HNSW_DIM

LOCK_NAMESPACE = 0x4C52  # "LR": first key of pg_advisory_xact_lock(int, int) for write-back scopes
ACTIVE = "NOT {a}stale AND {a}trust <> 'retracted' AND ({a}expires_at IS NULL OR {a}expires_at > :now)"
"""An active experience: not stale, not retracted by a person (migration 0011), not expired."""


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
    origin: str = "gate"
    """Who vouches for it: gate (the automatic gate), judge (an LLM judge), person, ungated."""
    origin_detail: str | None = None
    """The verifier's name (gate), the judge's model (judge), or the person (``key 12``, operator)."""
    trust: str = "unverified"
    trust_actor: str | None = None
    trust_reason: str | None = None
    gated: bool = True
    question_key: str | None = None
    gate_probability: float | None = None
    """The learned gate's P(right) when a calibrator watched or decided (migration 0014)."""
    gate_model_id: int | None = None


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
    origin: str = "gate"
    origin_detail: str | None = None
    trust: str = "unverified"
    trust_actor: str | None = None
    trust_at: datetime | None = None
    trust_reason: str | None = None
    answer_uses: int = 0
    gated: bool = True


_RECORD_COLUMNS = (
    "id, tenant_id, corpus_id, query, answer, confidence, created_at, expires_at, fusion_uses,"
    " scaffold_uses, last_used_at, stale, stale_reason,"
    " (SELECT count(*) FROM jsonb_object_keys(activation)), origin, origin_detail, trust, trust_actor, trust_at,"
    " trust_reason, answer_uses, gated"
)
_RECORD_SELECT = f"SELECT {_RECORD_COLUMNS} FROM experiences"
"""The columns of :class:`ExperienceRecord`."""


def valid_dim(dim: int) -> int:
    if not isinstance(dim, int) or isinstance(dim, bool) or not 1 <= dim <= 16000:
        raise InvalidInput(f"embedding dimension must be an integer in [1, 16000], got {dim!r}")
    return dim


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
    dim = valid_dim(int(emb.shape[0]))
    exp_id = session.execute(
        text(
            "INSERT INTO experiences (tenant_id, corpus_id, query, query_template, query_embedding, embedding_dim,"
            " activation, summary, answer, created_at, expires_at, confidence, grounding, source_passage_ids,"
            " corpus_version, origin, origin_detail, trust, trust_actor, trust_at, trust_reason, gated, question_key,"
            " gate_probability, gate_model_id)"
            " VALUES (:t, :c, :q, :tpl, :v, :d, CAST(:a AS jsonb), :s, :ans, :now, :exp, :conf,"
            " CAST(:g AS jsonb), :src, :ver, :origin, :origin_detail, :trust, :trust_actor,"
            " CASE WHEN :trust = 'unverified' THEN NULL ELSE CAST(:now AS timestamptz) END, :trust_reason, :gated,"
            " :qkey, :gp, :gm) RETURNING id"
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
            "origin": new.origin,
            "origin_detail": new.origin_detail,
            "trust": new.trust,
            "trust_actor": new.trust_actor,
            "trust_reason": new.trust_reason,
            "gated": bool(new.gated),
            "qkey": new.question_key,
            "gp": new.gate_probability,
            "gm": new.gate_model_id,
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
    candidate: Mapping[str, Any] | None = None,
    gate: str = "fixed",
    probability: float | None = None,
    gate_model_id: int | None = None,
) -> int:
    """One decision row of ``writeback_log``; returns its id. ``candidate``: what a rejected
    candidate needs to be stored later (``writeback_log.candidate``, migration 0011); ``gate``: which
    gate decided (``fixed`` or ``learned``), ``probability`` the learned gate's P(right) (also when
    it only watched) and ``gate_model_id`` its model (migration 0014)."""
    return int(
        session.execute(
            text(
                "INSERT INTO writeback_log (tenant_id, corpus_id, query_log_id, experience_id, query, novelty,"
                " grounding, verifier, decision, reason, timings, details, candidate, gate, probability, gate_model_id)"
                " VALUES (:t, :c, :ql, :x, :q, :n, :g, :v, :d, :r, CAST(:tm AS jsonb), CAST(:det AS jsonb),"
                " CAST(:cand AS jsonb), :gate, :p, :gm) RETURNING id"
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
                "cand": None if candidate is None else json.dumps(dict(candidate)),
                "gate": gate,
                "p": _finite_or_none(probability),
                "gm": gate_model_id,
            },
        ).scalar_one()
    )


class DroppedRow(NamedTuple):
    """One write-back candidate dropped before its gates ran (``writeback_log`` decision ``dropped``)."""

    corpus_id: int
    query: str
    reason: str
    query_log_id: int | None
    at: datetime


def insert_dropped_logs(session: Session, *, tenant_id: int, rows: Sequence[DroppedRow]) -> int:
    """``dropped`` decision rows of one tenant's candidates in one statement, each stamped with the
    time it was dropped; rows of a corpus deleted meanwhile are skipped (its logs went with it).
    Returns the rows inserted."""
    if not rows:
        return 0
    res = session.execute(
        text(
            "INSERT INTO writeback_log (tenant_id, corpus_id, query_log_id, query, decision, reason, created_at)"
            " SELECT :t, u.c, u.ql, u.q, 'dropped', u.r, u.at"
            " FROM unnest(CAST(:c AS bigint[]), CAST(:ql AS bigint[]), CAST(:q AS text[]), CAST(:r AS text[]),"
            " CAST(:at AS timestamptz[])) WITH ORDINALITY AS u(c, ql, q, r, at, n)"
            " JOIN corpora k ON k.id = u.c AND k.tenant_id = :t ORDER BY u.n"
        ),
        {
            "t": tenant_id,
            "c": [int(r.corpus_id) for r in rows],
            "ql": [None if r.query_log_id is None else int(r.query_log_id) for r in rows],
            "q": [r.query for r in rows],
            "r": [r.reason for r in rows],
            "at": [r.at for r in rows],
        },
    )
    return rowcount(res)


def _finite_or_none(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def record_use(
    session: Session,
    *,
    fused_ids: Sequence[int],
    scaffold_id: int | None,
    finding_ids: Sequence[int] = (),
    now: datetime | None = None,
) -> int:
    """Count one fusion use for each of ``fused_ids`` and one scaffold use for ``scaffold_id`` and
    each of ``finding_ids`` (a summary shown in the prompt, as the scaffold or as a finding), and set
    their ``last_used_at``; returns the number of experiences touched."""
    fused = {int(i) for i in fused_ids}
    shown = {int(i) for i in finding_ids} | ({int(scaffold_id)} if scaffold_id is not None else set())
    ids = sorted(fused | shown)
    return add_uses(
        session,
        ids=ids,
        fusion=[int(i in fused) for i in ids],
        scaffold=[int(i in shown) for i in ids],
        last_used_at=[now] * len(ids),
    )


def add_uses(
    session: Session,
    *,
    ids: Sequence[int],
    fusion: Sequence[int],
    scaffold: Sequence[int],
    last_used_at: Sequence[datetime | None],
) -> int:
    """Add ``fusion[k]`` fusion uses and ``scaffold[k]`` scaffold uses to experience ``ids[k]`` and
    move its ``last_used_at`` to ``last_used_at[k]`` (the server's now() where None) unless it is
    later already; ids must be distinct. Returns the number of experiences touched (a deleted one
    is skipped)."""
    if not (len(ids) == len(fusion) == len(scaffold) == len(last_used_at)):
        raise InvalidInput("add_uses needs one fusion count, scaffold count and time per id")
    if not ids:
        return 0
    if len(set(ids)) != len(ids):
        raise InvalidInput("add_uses needs distinct experience ids")
    # The rows are locked in id order first: concurrent writers that touch the same experiences
    # then wait for each other instead of deadlocking (an UPDATE over several rows locks them in
    # whatever order its plan visits them; measured under 32 clients: "deadlock detected").
    res = session.execute(
        text(
            "UPDATE experiences e SET fusion_uses = e.fusion_uses + u.f, scaffold_uses = e.scaffold_uses + u.s,"
            " last_used_at = greatest(e.last_used_at, coalesce(u.t, now()))"
            " FROM unnest(CAST(:ids AS bigint[]), CAST(:f AS int[]), CAST(:s AS int[]), CAST(:t AS timestamptz[]))"
            " AS u(id, f, s, t),"
            " (SELECT id FROM experiences WHERE id = ANY(CAST(:ids AS bigint[])) ORDER BY id FOR NO KEY UPDATE) l"
            " WHERE e.id = l.id AND u.id = l.id"
        ),
        {
            "ids": [int(i) for i in ids],
            "f": [int(x) for x in fusion],
            "s": [int(x) for x in scaffold],
            "t": list(last_used_at),
        },
    )
    return rowcount(res)


def count_corpus_experiences(session: Session, corpus_id: int) -> int:
    """Experiences of one corpus (active, stale and expired alike)."""
    return int(
        session.execute(
            text("SELECT count(*) FROM experiences WHERE corpus_id = :c"), {"c": int(corpus_id)}
        ).scalar_one()
    )


TENANT_LOCK_NAMESPACE = 0x4C45  # "LE": first key of pg_advisory_xact_lock(int, int) for a tenant's quota


def lock_tenant_experiences(session: Session, tenant_id: int) -> None:
    """Serialise the storing transactions of one tenant's experiences until the end of the
    transaction (its quota count and insert then see the same rows, across replicas too)."""
    session.execute(
        text("SELECT pg_advisory_xact_lock(:ns, :k)"),
        {"ns": TENANT_LOCK_NAMESPACE, "k": int(tenant_id) % 2_147_483_647},
    )


def count_tenant_experiences(session: Session, tenant_id: int) -> int:
    """Experiences of one tenant over all its corpora (active, stale and expired alike)."""
    sql = text("SELECT count(*) FROM experiences WHERE tenant_id = :t")
    return int(session.execute(sql, {"t": int(tenant_id)}).scalar_one())


def delete_corpus_experiences(session: Session, corpus_id: int) -> int:
    """Delete every experience of one corpus (their entity rows cascade; write-back log rows keep
    their decision with ``experience_id`` set to NULL); returns the number deleted."""
    res = session.execute(text("DELETE FROM experiences WHERE corpus_id = :c"), {"c": int(corpus_id)})
    return rowcount(res)


def delete_corpus_writeback_log(session: Session, corpus_id: int) -> int:
    """Delete one corpus's write-back log (its decisions, stored or not); returns the number deleted."""
    return rowcount(session.execute(text("DELETE FROM writeback_log WHERE corpus_id = :c"), {"c": int(corpus_id)}))


def with_events(
    session: Session,
    dml: str,
    params: Mapping[str, Any],
    *,
    event: str,
    actor: str,
    reason: str | None = None,
    key_id: int | None = None,
) -> int:
    """Run ``dml`` (an ``UPDATE`` or ``DELETE`` of experiences ``RETURNING tenant_id, corpus_id, id``)
    and append one ``experience_events`` row per experience it touched, in one statement (so the
    change and its history commit together); returns the number of experiences touched."""
    res = session.execute(
        text(
            f"WITH touched AS ({dml}) INSERT INTO experience_events"
            " (tenant_id, corpus_id, experience_id, event, actor, key_id, reason)"
            " SELECT tenant_id, corpus_id, id, :ev_event, :ev_actor, :ev_key, :ev_reason FROM touched"
        ),
        dict(params) | {"ev_event": event, "ev_actor": actor, "ev_key": key_id, "ev_reason": reason},
    )
    return rowcount(res)


def mark_stale_for_passages(session: Session, corpus_id: int, passage_ids: Sequence[int], reason: str) -> int:
    """Mark the active experiences of a corpus that cite any of ``passage_ids`` as stale (each with a
    ``stale`` event, actor ``system``)."""
    if not passage_ids:
        return 0
    return with_events(
        session,
        "UPDATE experiences SET stale = true, stale_reason = :r"
        " WHERE corpus_id = :c AND NOT stale AND source_passage_ids && CAST(:p AS bigint[])"
        " RETURNING tenant_id, corpus_id, id",
        {"c": corpus_id, "p": [int(p) for p in passage_ids], "r": reason},
        event="stale",
        actor="system",
        reason=reason,
    )


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
    actor: str = "operator",
) -> int:
    """Expire (set ``expires_at = now``) the not-yet-expired experiences created before
    ``created_before``, each with an ``expired`` event by ``actor``; returns how many (``dry_run``:
    how many would be)."""
    where, params = _scope(tenant_id, corpus_id)
    params |= {"before": created_before, "now": now}
    cond = f"{where} AND created_at < :before AND (expires_at IS NULL OR expires_at > :now)"
    if dry_run:
        return int(session.execute(text(f"SELECT count(*) FROM experiences WHERE {cond}"), params).scalar_one())
    return with_events(
        session,
        f"UPDATE experiences SET expires_at = :now WHERE {cond} RETURNING tenant_id, corpus_id, id",
        params,
        event="expired",
        actor=actor,
        reason=f"created before {created_before.isoformat()}",
    )


@dataclass(frozen=True)
class PruneCriteria:
    """What :func:`prune` deletes (any combination; each criterion adds rows)."""

    max_per_tenant: int | None = None  # keep this many per tenant, the most useful
    min_confidence: float | None = None  # delete below this confidence
    unused_since: datetime | None = None  # delete if neither used nor created since then
    expired: bool = False  # delete experiences expired at `now`
    stale: bool = False  # delete stale experiences


def _prune_parts(
    criteria: PruneCriteria, *, now: datetime, tenant_id: int | None, corpus_id: int | None
) -> tuple[dict[str, str], dict[str, Any]]:
    """One ``SELECT id`` statement per criterion of :func:`prune`, and their parameters."""
    where, params = _scope(tenant_id, corpus_id)
    params["now"] = now
    parts: dict[str, str] = {}
    if criteria.max_per_tenant is not None:
        if criteria.max_per_tenant < 0:
            raise InvalidInput("max_per_tenant must be >= 0")
        params["keep"] = criteria.max_per_tenant
        parts["max_per_tenant"] = (
            f"SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY tenant_id ORDER BY (trust = 'verified') DESC,"
            f" fusion_uses + scaffold_uses + answer_uses DESC, confidence DESC, created_at DESC, id DESC) AS rk"
            f" FROM experiences WHERE {where}) z WHERE rk > :keep"
        )
    if criteria.min_confidence is not None:
        params["minc"] = criteria.min_confidence
        # the gate's score says nothing about what a person verified: those stay
        parts["min_confidence"] = (
            f"SELECT id FROM experiences WHERE {where} AND confidence < :minc AND trust <> 'verified'"
        )
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
    return parts, params


def prune(
    session: Session,
    criteria: PruneCriteria,
    *,
    now: datetime,
    tenant_id: int | None = None,
    corpus_id: int | None = None,
    dry_run: bool = False,
    actor: str = "operator",
    key_id: int | None = None,
) -> dict[str, int]:
    """Delete experiences by the given criteria, each with a ``deleted`` event by ``actor`` (and the
    API key ``key_id`` that asked, when one did) naming the criteria; returns the count per
    criterion and the total (an experience matching several criteria counts once in ``total``).

    ``max_per_tenant`` keeps each tenant's ``N`` most useful experiences: verified ones first, then
    by total uses, confidence and recency; the rest go, least useful first. ``min_confidence``
    never deletes a verified experience (the gate's score is not what a person vouched for).
    """
    parts, params = _prune_parts(criteria, now=now, tenant_id=tenant_id, corpus_id=corpus_id)
    counts = {
        name: int(session.execute(text(f"SELECT count(*) FROM ({sql}) q"), params).scalar_one())
        for name, sql in parts.items()
    }
    union = " UNION ".join(parts.values())
    if dry_run:
        counts["total"] = int(session.execute(text(f"SELECT count(*) FROM ({union}) q"), params).scalar_one())
    else:
        counts["total"] = with_events(
            session,
            f"DELETE FROM experiences WHERE id IN ({union}) RETURNING tenant_id, corpus_id, id",
            params,
            event="deleted",
            actor=actor,
            reason="prune: " + ", ".join(parts),
            key_id=key_id,
        )
    return counts


def prune_preview(
    session: Session,
    criteria: PruneCriteria,
    *,
    now: datetime,
    tenant_id: int | None = None,
    corpus_id: int | None = None,
    limit: int = 200,
) -> list[ExperienceRecord]:
    """The experiences :func:`prune` would delete with these arguments (at most ``limit``, newest
    first): what a dry run shows before the prune is applied."""
    parts, params = _prune_parts(criteria, now=now, tenant_id=tenant_id, corpus_id=corpus_id)
    union = " UNION ".join(parts.values())
    rows = session.execute(
        text(f"{_RECORD_SELECT} WHERE id IN ({union}) ORDER BY created_at DESC, id DESC LIMIT :lim"),
        params | {"lim": int(limit)},
    ).all()
    return [ExperienceRecord(*r) for r in rows]


_STATUS = {
    "active": ACTIVE.format(a=""),
    "stale": "stale",
    "expired": "expires_at IS NOT NULL AND expires_at <= :now",
    "retracted": "trust = 'retracted'",
}
"""The list filter ``status``: active (neither stale, retracted nor expired), stale, expired, retracted."""
TRUSTS = ("unverified", "auto_verified", "verified", "retracted")
"""``experiences.trust`` (migration 0011; ``auto_verified``: 0014)."""


def list_experiences(
    session: Session,
    *,
    tenant_id: int | None = None,
    corpus_id: int | None = None,
    include_inactive: bool = True,
    now: datetime | None = None,
    limit: int = 50,
    offset: int = 0,
    status: str | None = None,
    min_confidence: float | None = None,
    trust: str | None = None,
) -> list[ExperienceRecord]:
    """Experiences, newest first; ``status`` (active, stale, expired, retracted; needs ``now``),
    ``min_confidence`` and ``trust`` (unverified, verified, retracted) filter them."""
    where, params = _scope(tenant_id, corpus_id)
    if not include_inactive:
        where += " AND " + ACTIVE.format(a="")
        params["now"] = now
    if status is not None:
        if status not in _STATUS:
            raise InvalidInput(f"status must be one of {', '.join(_STATUS)}, got {status!r}")
        where += f" AND {_STATUS[status]}"
        params["now"] = now
    if min_confidence is not None:
        where += " AND confidence >= :minc_list"
        params["minc_list"] = float(min_confidence)
    if trust is not None:
        if trust not in TRUSTS:
            raise InvalidInput(f"trust must be one of {', '.join(TRUSTS)}, got {trust!r}")
        where += " AND trust = :trust_list"
        params["trust_list"] = trust
    params |= {"lim": limit, "off": offset}
    rows = session.execute(
        text(f"{_RECORD_SELECT} WHERE {where} ORDER BY created_at DESC, id DESC LIMIT :lim OFFSET :off"),
        params,
    ).all()
    return [ExperienceRecord(*r) for r in rows]


@dataclass(frozen=True)
class ReusableExperience:
    """An experience whose answer may be given again for a repeated question."""

    id: int
    query: str
    answer: str
    summary: str
    confidence: float
    source_passage_ids: tuple[int, ...]
    trust: str = "unverified"


def reusable_experiences(
    session: Session,
    ids: Sequence[int],
    *,
    allowed: Callable[[str, bool, float], bool],
    now: datetime,
    question_key: str,
    answer_key: Callable[[str], str],
) -> list[ReusableExperience]:
    """Of ``ids``, in their order, the experiences whose answer may be given again for a question of
    key ``question_key``: active now (not stale, not retracted, not expired), allowed by the reuse
    policy (``allowed(trust, gated, confidence)``; :func:`livingrag.experience.trust.serves_answer`),
    and whose answer (by ``answer_key``) people have not marked wrong for that question in its
    corpus (``rejected_answers``)."""
    if not ids:
        return []
    rows = session.execute(
        text(
            "SELECT x.id, x.query, x.answer, x.summary, x.confidence, x.source_passage_ids, x.trust, x.gated,"
            " coalesce((SELECT array_agg(r.answer_key) FROM rejected_answers r WHERE r.tenant_id = x.tenant_id"
            "   AND r.corpus_id = x.corpus_id AND r.question_key = :qk), '{}')"
            f" FROM experiences x WHERE x.id = ANY(:ids) AND {ACTIVE.format(a='x.')}"
        ),
        {"ids": [int(i) for i in ids], "now": now, "qk": question_key},
    ).all()
    found: dict[int, ReusableExperience] = {}
    for r in rows:
        trust, gated, wrong = r[6], bool(r[7]), set(r[8] or ())
        if allowed(trust, gated, float(r[4])) and answer_key(r[2]) not in wrong:
            found[int(r[0])] = ReusableExperience(
                int(r[0]), r[1], r[2], r[3], float(r[4]), tuple(r[5] or ()), trust=trust
            )
    return [found[int(i)] for i in ids if int(i) in found]


def get_experience(session: Session, experience_id: int) -> ExperienceRecord:
    rows = session.execute(text(f"{_RECORD_SELECT} WHERE id = :i"), {"i": int(experience_id)}).all()
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
    dim = valid_dim(dim)
    if dim > MAX_HNSW_DIM:
        raise InvalidInput(f"HNSW indexes support at most {MAX_HNSW_DIM} dimensions, got {dim}")
    return str(session.execute(text("SELECT livingrag_ensure_experience_hnsw(:d)"), {"d": dim}).scalar_one())


def expire_experience(
    session: Session,
    experience_id: int,
    *,
    now: datetime,
    actor: str = "operator",
    key_id: int | None = None,
    reason: str | None = None,
) -> None:
    """Expire one experience now (``expires_at = now`` unless it expired earlier), with an
    ``expired`` event by ``actor``; :class:`NotFound` when this session cannot see it."""
    n = with_events(
        session,
        "UPDATE experiences SET expires_at = least(coalesce(expires_at, :now), :now) WHERE id = :i"
        " RETURNING tenant_id, corpus_id, id",
        {"i": int(experience_id), "now": now},
        event="expired",
        actor=actor,
        key_id=key_id,
        reason=reason,
    )
    if not n:
        raise NotFound(f"no experience with id {experience_id}")


def delete_experience(
    session: Session,
    experience_id: int,
    *,
    actor: str = "operator",
    key_id: int | None = None,
    reason: str | None = None,
) -> None:
    """Delete one experience (its entity rows cascade; its history stays, with a ``deleted`` event
    by ``actor``); :class:`NotFound` when this session cannot see it."""
    n = with_events(
        session,
        "DELETE FROM experiences WHERE id = :i RETURNING tenant_id, corpus_id, id",
        {"i": int(experience_id)},
        event="deleted",
        actor=actor,
        key_id=key_id,
        reason=reason,
    )
    if not n:
        raise NotFound(f"no experience with id {experience_id}")
