"""The learned gate's labels and models (migration 0014): the SQL of what people's verdicts taught
each tenant's gate and of the calibrators fitted on it.

Functions take a :class:`~sqlalchemy.orm.Session` in a tenant transaction (row-level security
keeps every other tenant's rows out of sight) and never commit; the caller owns the transaction.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from livingrag.db.repositories.rows import rowcount

_TENANT = "current_setting('livingrag.tenant_id')::bigint"


@dataclass(frozen=True)
class CandidateFeatures:
    """The features the gate saw for one question's write-back candidate."""

    writeback_log_id: int
    corpus_id: int
    features: dict[str, float]


def candidate_features(session: Session, query_log_id: int) -> CandidateFeatures | None:
    """The features of question ``query_log_id``'s latest write-back decision that has them
    (``writeback_log.details.features``), or None (no write-back, or one decided before the novelty
    gate let it through, or logged before migration 0014)."""
    row = session.execute(
        text(
            "SELECT id, corpus_id, details -> 'features' FROM writeback_log"
            f" WHERE tenant_id = {_TENANT} AND query_log_id = :q AND details ? 'features'"
            " ORDER BY id DESC LIMIT 1"
        ),
        {"q": int(query_log_id)},
    ).first()
    if row is None or not isinstance(row[2], dict):
        return None
    return CandidateFeatures(int(row[0]), int(row[1]), {str(k): float(v) for k, v in row[2].items()})


def experience_query(session: Session, experience_id: int) -> int | None:
    """The question (``query_log_id``) whose write-back stored experience ``experience_id``, if logged."""
    row = session.execute(
        text(
            f"SELECT query_log_id FROM writeback_log WHERE tenant_id = {_TENANT} AND experience_id = :x"
            " AND decision = 'stored' AND query_log_id IS NOT NULL ORDER BY id DESC LIMIT 1"
        ),
        {"x": int(experience_id)},
    ).first()
    return None if row is None else int(row[0])


def upsert_label(
    session: Session,
    *,
    tenant_id: int,
    corpus_id: int,
    query_log_id: int,
    writeback_log_id: int | None,
    label: bool,
    verdict: str,
    corrected: bool,
    features: Mapping[str, float],
    actor: str,
    now: datetime,
) -> None:
    """The label of question ``query_log_id``: inserted, or replaced by a later verdict (its
    ``created_at``, the label's place in time order, is kept)."""
    session.execute(
        text(
            "INSERT INTO gate_labels (tenant_id, corpus_id, query_log_id, writeback_log_id, label, verdict, corrected,"
            " features, actor, created_at, updated_at)"
            " VALUES (:t, :c, :q, :w, :l, :v, :cor, CAST(:f AS jsonb), :a, :now, :now)"
            " ON CONFLICT (tenant_id, query_log_id) DO UPDATE SET label = EXCLUDED.label, verdict = EXCLUDED.verdict,"
            " corrected = EXCLUDED.corrected, actor = EXCLUDED.actor, updated_at = EXCLUDED.updated_at"
        ),
        {
            "t": int(tenant_id),
            "c": int(corpus_id),
            "q": int(query_log_id),
            "w": writeback_log_id,
            "l": bool(label),
            "v": verdict,
            "cor": bool(corrected),
            "f": json.dumps({k: float(v) for k, v in features.items()}),
            "a": actor,
            "now": now,
        },
    )


@dataclass(frozen=True)
class Label:
    features: dict[str, float]
    label: bool


def labels(session: Session, corpus_id: int | None = None) -> list[Label]:
    """The tenant's labels (of one corpus, or all), oldest first."""
    where = "" if corpus_id is None else " AND corpus_id = :c"
    rows = session.execute(
        text(f"SELECT features, label FROM gate_labels WHERE tenant_id = {_TENANT}{where} ORDER BY created_at, id"),
        {} if corpus_id is None else {"c": int(corpus_id)},
    ).all()
    return [Label({str(k): float(v) for k, v in (r[0] or {}).items()}, bool(r[1])) for r in rows]


def label_counts(session: Session) -> dict[int, tuple[int, int]]:
    """``{corpus_id: (labels, right)}`` of the tenant."""
    rows = session.execute(
        text(
            "SELECT corpus_id, count(*), count(*) FILTER (WHERE label) FROM gate_labels"
            f" WHERE tenant_id = {_TENANT} GROUP BY corpus_id"
        )
    ).all()
    return {int(r[0]): (int(r[1]), int(r[2])) for r in rows}


@dataclass(frozen=True)
class GateModelRow:
    """One fitted calibrator (``gate_models``)."""

    id: int
    corpus_id: int | None
    version: int
    model: dict[str, Any] | None
    metrics: dict[str, Any]
    earned: bool
    store_threshold: float | None
    serve_threshold: float | None
    labels: int
    fitted_at: datetime
    retired_at: datetime | None = None
    retired_why: str | None = None


_MODEL_COLUMNS = (
    "id, corpus_id, version, model, metrics, earned, store_threshold, serve_threshold, labels, fitted_at,"
    " retired_at, retired_why"
)


def _model(r: Any) -> GateModelRow:
    return GateModelRow(
        int(r[0]),
        None if r[1] is None else int(r[1]),
        int(r[2]),
        r[3],
        dict(r[4] or {}),
        bool(r[5]),
        r[6],
        r[7],
        int(r[8]),
        r[9],
        r[10],
        r[11],
    )


def current_models(session: Session) -> list[GateModelRow]:
    """The tenant's current calibrators (the tenant-wide one first, then per corpus)."""
    rows = session.execute(
        text(
            f"SELECT {_MODEL_COLUMNS} FROM gate_models WHERE tenant_id = {_TENANT} AND retired_at IS NULL"
            " ORDER BY corpus_id NULLS FIRST"
        )
    ).all()
    return [_model(r) for r in rows]


def model_history(session: Session, *, limit: int = 20) -> list[GateModelRow]:
    """The tenant's calibrators, newest first."""
    rows = session.execute(
        text(f"SELECT {_MODEL_COLUMNS} FROM gate_models WHERE tenant_id = {_TENANT} ORDER BY id DESC LIMIT :n"),
        {"n": int(limit)},
    ).all()
    return [_model(r) for r in rows]


def lock_gate(session: Session, tenant_id: int) -> None:
    """A transaction-level lock on the tenant's gate models: one fit (or reset) at a time."""
    session.execute(text("SELECT pg_advisory_xact_lock(hashtextextended('livingrag.gate', :t))"), {"t": int(tenant_id)})


def insert_model(
    session: Session,
    *,
    tenant_id: int,
    corpus_id: int | None,
    model: Mapping[str, Any] | None,
    metrics: Mapping[str, Any],
    earned: bool,
    store_threshold: float | None,
    serve_threshold: float | None,
    labels: int,
    now: datetime,
) -> GateModelRow:
    """Retire the scope's current calibrator and insert this one as the next version."""
    scope = "corpus_id IS NULL" if corpus_id is None else "corpus_id = :c"
    params: dict[str, Any] = {"c": corpus_id, "now": now}
    session.execute(
        text(
            "UPDATE gate_models SET retired_at = :now, retired_why = 'refitted'"
            f" WHERE tenant_id = {_TENANT} AND {scope} AND retired_at IS NULL"
        ),
        params,
    )
    version = session.execute(
        text(f"SELECT coalesce(max(version), 0) + 1 FROM gate_models WHERE tenant_id = {_TENANT} AND {scope}"),
        params,
    ).scalar_one()
    row = session.execute(
        text(
            "INSERT INTO gate_models (tenant_id, corpus_id, version, model, metrics, earned, store_threshold,"
            " serve_threshold, labels, fitted_at) VALUES (:t, :c, :v, CAST(:m AS jsonb), CAST(:mt AS jsonb), :e,"
            f" :st, :sv, :n, :now) RETURNING {_MODEL_COLUMNS}"
        ),
        {
            "t": int(tenant_id),
            "c": corpus_id,
            "v": int(version),
            "m": None if model is None else json.dumps(dict(model)),
            "mt": json.dumps(dict(metrics)),
            "e": bool(earned),
            "st": store_threshold,
            "sv": serve_threshold,
            "n": int(labels),
            "now": now,
        },
    ).one()
    return _model(row)


def retire_models(session: Session, corpus_id: int | None, *, why: str, now: datetime, every: bool = False) -> int:
    """Retire the current calibrator of one scope (``corpus_id`` None: the tenant-wide one), or all
    of the tenant's (``every``); returns how many."""
    scope = "TRUE" if every else ("corpus_id IS NULL" if corpus_id is None else "corpus_id = :c")
    res = session.execute(
        text(
            "UPDATE gate_models SET retired_at = :now, retired_why = :why"
            f" WHERE tenant_id = {_TENANT} AND {scope} AND retired_at IS NULL"
        ),
        {"c": corpus_id, "now": now, "why": why},
    )
    return rowcount(res)


def delete_labels(session: Session, corpus_id: int | None = None) -> int:
    """Forget the tenant's labels (of one corpus, or all); returns how many."""
    where = "" if corpus_id is None else " AND corpus_id = :c"
    res = session.execute(
        text(f"DELETE FROM gate_labels WHERE tenant_id = {_TENANT}{where}"),
        {} if corpus_id is None else {"c": int(corpus_id)},
    )
    return rowcount(res)


@dataclass(frozen=True)
class AutoVerified:
    id: int
    corpus_id: int
    probability: float | None
    gate_model_id: int | None


def auto_verified(session: Session, *, scope: int | str | None = "all") -> list[AutoVerified]:
    """The tenant's ``auto_verified`` experiences: all of them (``scope="all"``), or those stored by a
    tenant-wide calibrator (``None``) or by the calibrator of corpus ``scope``."""
    params: dict[str, Any] = {}
    if scope == "all":
        where = ""
    elif scope is None:
        where = " AND m.corpus_id IS NULL"
    else:
        where, params = " AND m.corpus_id = :c", {"c": int(scope)}
    rows = session.execute(
        text(
            "SELECT x.id, x.corpus_id, x.gate_probability, x.gate_model_id FROM experiences x"
            " LEFT JOIN gate_models m ON m.tenant_id = x.tenant_id AND m.id = x.gate_model_id"
            f" WHERE x.tenant_id = {_TENANT} AND x.trust = 'auto_verified'{where} ORDER BY x.id"
        ),
        params,
    ).all()
    return [AutoVerified(int(r[0]), int(r[1]), r[2], r[3]) for r in rows]


def decision_counts(session: Session) -> dict[tuple[str, str], int]:
    """``{(gate, decision): count}`` over the tenant's write-back log."""
    rows = session.execute(
        text(f"SELECT gate, decision, count(*) FROM writeback_log WHERE tenant_id = {_TENANT} GROUP BY 1, 2")
    ).all()
    return {(str(r[0]), str(r[1])): int(r[2]) for r in rows}
