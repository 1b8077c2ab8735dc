"""Trust, feedback and history of experiences (migration 0011): the SQL of who vouches for an
experience, what people said of an answer, which answers they marked wrong, and the append-only
record of what happened to each experience.

Functions take a :class:`~sqlalchemy.orm.Session` in a tenant transaction and never commit; the
caller owns the transaction (a verdict, its effects and their history commit together).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.orm import Session

from livingrag.db.repositories.rows import rowcount
from livingrag.errors import InvalidInput, NotFound

EVENTS: tuple[str, ...] = (
    "created",
    "used_fusion",
    "used_scaffold",
    "used_finding",
    "used_answer",
    "verified",
    "retracted",
    "corrected",
    "unretracted",
    "stale",
    "expired",
    "deleted",
    "auto_verified",
    "demoted",
)
"""``experience_events.event``: what can happen to an experience (``auto_verified`` and ``demoted``:
migration 0014)."""
VERDICTS: tuple[str, ...] = ("right", "wrong")


@dataclass(frozen=True)
class EventRow:
    """One event to append to an experience's history."""

    experience_id: int
    corpus_id: int
    event: str
    actor: str
    key_id: int | None = None
    query_log_id: int | None = None
    reason: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    at: datetime | None = None


def insert_events(session: Session, tenant_id: int, rows: Sequence[EventRow]) -> int:
    """Append ``rows`` to ``experience_events`` (one statement); returns how many. Rows of a corpus
    that no longer exists are left out (deleting a corpus deletes its history)."""
    if not rows:
        return 0
    bad = sorted({r.event for r in rows} - set(EVENTS))
    if bad:
        raise InvalidInput(f"unknown experience event(s) {', '.join(bad)}: choose from {', '.join(EVENTS)}")
    res = session.execute(
        text(
            "INSERT INTO experience_events (tenant_id, corpus_id, experience_id, event, actor, key_id, query_log_id,"
            " reason, details, created_at)"
            " SELECT :t, c, x, ev, a, k, q, r, CAST(d AS jsonb), coalesce(at, now())"
            " FROM unnest(CAST(:c AS bigint[]), CAST(:x AS bigint[]), CAST(:ev AS text[]), CAST(:a AS text[]),"
            " CAST(:k AS bigint[]), CAST(:q AS bigint[]), CAST(:r AS text[]), CAST(:d AS text[]),"
            " CAST(:at AS timestamptz[])) AS u(c, x, ev, a, k, q, r, d, at)"
            # a corpus deleted since (its history went with it) takes its late events along
            " WHERE EXISTS (SELECT 1 FROM corpora co WHERE co.tenant_id = :t AND co.id = u.c)"
        ),
        {
            "t": int(tenant_id),
            "c": [int(r.corpus_id) for r in rows],
            "x": [int(r.experience_id) for r in rows],
            "ev": [r.event for r in rows],
            "a": [r.actor for r in rows],
            "k": [r.key_id for r in rows],
            "q": [r.query_log_id for r in rows],
            "r": [r.reason for r in rows],
            "d": [json.dumps(dict(r.details), default=str) for r in rows],
            "at": [r.at for r in rows],
        },
    )
    return rowcount(res)


@dataclass(frozen=True)
class HistoryEvent:
    """One row of an experience's history."""

    id: int
    experience_id: int
    corpus_id: int
    event: str
    actor: str
    key_id: int | None
    query_log_id: int | None
    reason: str | None
    details: dict[str, Any]
    created_at: datetime


def history(session: Session, experience_id: int, *, limit: int = 1000) -> list[HistoryEvent]:
    """The events of one experience, oldest first (at most ``limit``, the newest ones when there
    are more); :class:`NotFound` when it has none this session can see (no such experience)."""
    rows = session.execute(
        text(
            "SELECT * FROM (SELECT id, experience_id, corpus_id, event, actor, key_id, query_log_id, reason, details,"
            " created_at FROM experience_events WHERE experience_id = :x ORDER BY created_at DESC, id DESC"
            " LIMIT :lim) h ORDER BY created_at, id"
        ),
        {"x": int(experience_id), "lim": int(limit)},
    ).all()
    if not rows:
        raise NotFound(f"no experience with id {experience_id}")
    return [HistoryEvent(*r) for r in rows]


@dataclass(frozen=True)
class TrustState:
    """What a trust change needs to know of an experience (read with its row locked)."""

    id: int
    corpus_id: int
    query: str
    answer: str
    question_key: str | None
    trust: str
    origin: str
    stale: bool
    expired: bool


def lock_experience(session: Session, experience_id: int, *, now: datetime) -> TrustState:
    """Read one experience's trust with its row locked until the end of the transaction;
    :class:`NotFound` when this session cannot see it."""
    row = session.execute(
        text(
            "SELECT id, corpus_id, query, answer, question_key, trust, origin, stale,"
            " coalesce(expires_at <= :now, false) FROM experiences WHERE id = :x FOR NO KEY UPDATE"
        ),
        {"x": int(experience_id), "now": now},
    ).first()
    if row is None:
        raise NotFound(f"no experience with id {experience_id}")
    return TrustState(*row)


def set_trust(
    session: Session, experience_id: int, trust: str, *, actor: str, reason: str | None, now: datetime
) -> None:
    """Set one experience's trust, with who set it, when and why."""
    if trust not in ("unverified", "auto_verified", "verified", "retracted"):
        raise InvalidInput(f"trust must be unverified, auto_verified, verified or retracted, got {trust!r}")
    res = session.execute(
        text("UPDATE experiences SET trust = :tr, trust_actor = :a, trust_at = :now, trust_reason = :r WHERE id = :x"),
        {"x": int(experience_id), "tr": trust, "a": actor, "now": now, "r": reason},
    )
    if not rowcount(res):
        raise NotFound(f"no experience with id {experience_id}")


def active_for_question(session: Session, corpus_id: int, question_key: str, *, now: datetime) -> list[tuple[int, str]]:
    """``(id, answer)`` of the active experiences (not stale, retracted or expired) of a corpus whose
    question has key ``question_key``, oldest first."""
    rows = session.execute(
        text(
            "SELECT id, answer FROM experiences WHERE corpus_id = :c AND question_key = :k AND NOT stale"
            " AND trust <> 'retracted' AND (expires_at IS NULL OR expires_at > :now) ORDER BY id"
        ),
        {"c": int(corpus_id), "k": question_key, "now": now},
    ).all()
    return [(int(r[0]), str(r[1])) for r in rows]


def retracted_for_question(session: Session, corpus_id: int, question_key: str) -> list[tuple[int, str]]:
    """``(id, answer)`` of the retracted experiences of a corpus whose question has key
    ``question_key``, oldest first."""
    rows = session.execute(
        text(
            "SELECT id, answer FROM experiences WHERE corpus_id = :c AND question_key = :k AND trust = 'retracted'"
            " ORDER BY id"
        ),
        {"c": int(corpus_id), "k": question_key},
    ).all()
    return [(int(r[0]), str(r[1])) for r in rows]


@dataclass(frozen=True)
class Material:
    """What storing a new experience for a question needs of an earlier one: its query embedding,
    map, cited passages and corpus version (a correction reuses them)."""

    id: int
    query: str
    query_template: str | None
    embedding: np.ndarray
    activation: dict[int, float]
    source_passage_ids: tuple[int, ...]
    corpus_version: int
    stale: bool


def experience_material(session: Session, experience_id: int) -> Material:
    """:class:`Material` of one experience; :class:`NotFound` when this session cannot see it."""
    row = session.execute(
        text(
            "SELECT id, query, query_template, query_embedding, activation, source_passage_ids, corpus_version,"
            " stale FROM experiences WHERE id = :x"
        ),
        {"x": int(experience_id)},
    ).first()
    if row is None:
        raise NotFound(f"no experience with id {experience_id}")
    return Material(
        id=int(row[0]),
        query=row[1],
        query_template=row[2],
        embedding=np.asarray(row[3].to_numpy() if hasattr(row[3], "to_numpy") else row[3], dtype=np.float32),
        activation={int(k): float(v) for k, v in (row[4] or {}).items()},
        source_passage_ids=tuple(int(p) for p in row[5] or ()),
        corpus_version=int(row[6]),
        stale=bool(row[7]),
    )


# ---------------------------------------------------------------- questions and their decisions


@dataclass(frozen=True)
class AnsweredQuery:
    """One row of ``query_log`` as feedback needs it."""

    id: int
    corpus_id: int
    query: str
    mode: str
    answer: str | None
    model: str | None
    reused_experience_id: int | None
    passage_ids: tuple[int, ...]
    error: str | None
    created_at: datetime


def answered_query(session: Session, query_log_id: int) -> AnsweredQuery:
    """The logged question ``query_log_id``; :class:`NotFound` when this session cannot see it."""
    row = session.execute(
        text(
            "SELECT id, corpus_id, query, mode, answer, model, reused_experience_id, passage_ids, error, created_at"
            " FROM query_log WHERE id = :q"
        ),
        {"q": int(query_log_id)},
    ).first()
    if row is None:
        raise NotFound(f"no answered question with id {query_log_id}")
    return AnsweredQuery(
        int(row[0]), int(row[1]), row[2], row[3], row[4], row[5], row[6], tuple(row[7] or ()), row[8], row[9]
    )


@dataclass(frozen=True)
class Decision:
    """The write-back decision of one question (``writeback_log``)."""

    id: int
    decision: str
    experience_id: int | None
    reason: str | None
    grounding: float | None
    verifier: str | None
    candidate: dict[str, Any] | None


def decision_for_query(session: Session, query_log_id: int) -> Decision | None:
    """The latest write-back decision of question ``query_log_id``, or None when there is none yet."""
    row = session.execute(
        text(
            "SELECT id, decision, experience_id, reason, grounding, verifier, candidate FROM writeback_log"
            " WHERE tenant_id = current_setting('livingrag.tenant_id')::bigint AND query_log_id = :q"
            " ORDER BY id DESC LIMIT 1"
        ),
        {"q": int(query_log_id)},
    ).first()
    return None if row is None else Decision(int(row[0]), row[1], row[2], row[3], row[4], row[5], row[6])


# ---------------------------------------------------------------- feedback and wrong answers


@dataclass(frozen=True)
class FeedbackRow:
    """One verdict of ``answer_feedback``."""

    id: int
    corpus_id: int
    query_log_id: int
    verdict: str
    answer: str | None
    note: str | None
    actor: str
    key_id: int | None
    experience_id: int | None
    outcome: dict[str, Any]
    created_at: datetime


_FEEDBACK_COLUMNS = (
    "id, corpus_id, query_log_id, verdict, answer, note, actor, key_id, experience_id, outcome, created_at"
)


def insert_feedback(
    session: Session,
    *,
    tenant_id: int,
    corpus_id: int,
    query_log_id: int,
    verdict: str,
    answer: str | None,
    note: str | None,
    actor: str,
    key_id: int | None,
    experience_id: int | None,
    outcome: Mapping[str, Any],
) -> FeedbackRow:
    """Record one verdict and what it did; returns the row."""
    if verdict not in VERDICTS:
        raise InvalidInput(f"verdict must be right or wrong, got {verdict!r}")
    row = session.execute(
        text(
            "INSERT INTO answer_feedback (tenant_id, corpus_id, query_log_id, verdict, answer, note, actor, key_id,"
            " experience_id, outcome) VALUES (:t, :c, :q, :v, :a, :n, :actor, :k, :x, CAST(:o AS jsonb))"
            f" RETURNING {_FEEDBACK_COLUMNS}"
        ),
        {
            "t": int(tenant_id),
            "c": int(corpus_id),
            "q": int(query_log_id),
            "v": verdict,
            "a": answer,
            "n": note,
            "actor": actor,
            "k": key_id,
            "x": experience_id,
            "o": json.dumps(dict(outcome), default=str),
        },
    ).one()
    return FeedbackRow(*row)


def feedback_for_query(session: Session, query_log_id: int) -> list[FeedbackRow]:
    """Every verdict given on question ``query_log_id``, oldest first."""
    rows = session.execute(
        text(
            f"SELECT {_FEEDBACK_COLUMNS} FROM answer_feedback"
            " WHERE tenant_id = current_setting('livingrag.tenant_id')::bigint AND query_log_id = :q"
            " ORDER BY created_at, id"
        ),
        {"q": int(query_log_id)},
    ).all()
    return [FeedbackRow(*r) for r in rows]


def remember_wrong(
    session: Session,
    *,
    tenant_id: int,
    corpus_id: int,
    question_key: str,
    answer_key: str,
    answer: str,
    query_log_id: int | None,
    actor: str,
) -> bool:
    """Remember that ``answer`` is wrong for the question of key ``question_key``; False when it was
    remembered already."""
    res = session.execute(
        text(
            "INSERT INTO rejected_answers (tenant_id, corpus_id, question_key, answer_key, answer, query_log_id, actor)"
            " VALUES (:t, :c, :qk, :ak, :a, :q, :actor) ON CONFLICT DO NOTHING"
        ),
        {
            "t": int(tenant_id),
            "c": int(corpus_id),
            "qk": question_key,
            "ak": answer_key,
            "a": answer,
            "q": query_log_id,
            "actor": actor,
        },
    )
    return bool(rowcount(res))


def forget_wrong(session: Session, corpus_id: int, question_key: str, answer_key: str) -> bool:
    """Forget that an answer was marked wrong for a question (a person said it is right after all)."""
    res = session.execute(
        text("DELETE FROM rejected_answers WHERE corpus_id = :c AND question_key = :qk AND answer_key = :ak"),
        {"c": int(corpus_id), "qk": question_key, "ak": answer_key},
    )
    return bool(rowcount(res))


def forget_corpus_wrong(session: Session, corpus_id: int) -> int:
    """Forget every answer marked wrong for the questions of one corpus (its memory starts afresh);
    returns how many pairs."""
    res = session.execute(text("DELETE FROM rejected_answers WHERE corpus_id = :c"), {"c": int(corpus_id)})
    return rowcount(res)


def wrong_answer_keys(session: Session, corpus_id: int, question_key: str) -> set[str]:
    """The keys of the answers people marked wrong for the question of key ``question_key``."""
    if not question_key:
        return set()
    rows = session.execute(
        text("SELECT answer_key FROM rejected_answers WHERE corpus_id = :c AND question_key = :qk"),
        {"c": int(corpus_id), "qk": question_key},
    ).scalars()
    return {str(r) for r in rows}


def add_answer_uses(session: Session, counts: Mapping[int, int]) -> int:
    """Add ``counts[id]`` answer uses (answers given again without an LLM call) to each experience;
    returns the experiences touched (a deleted one is skipped). Rows are locked in id order."""
    if not counts:
        return 0
    ids = sorted(int(i) for i in counts)
    res = session.execute(
        text(
            "UPDATE experiences e SET answer_uses = e.answer_uses + u.n"
            " FROM unnest(CAST(:ids AS bigint[]), CAST(:n AS int[])) AS u(id, n),"
            " (SELECT id FROM experiences WHERE id = ANY(CAST(:ids AS bigint[])) ORDER BY id FOR NO KEY UPDATE) l"
            " WHERE e.id = l.id AND u.id = l.id"
        ),
        {"ids": ids, "n": [int(counts[i]) for i in ids]},
    )
    return rowcount(res)
