"""The query log: one row per answered (or failed) query, for SQL analytics."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from sqlalchemy import text
from sqlalchemy.orm import Session

from livingrag.db.repositories.rows import rowcount


def insert_query_log(
    session: Session,
    *,
    tenant_id: int,
    corpus_id: int,
    query: str,
    mode: str,
    answer: str | None,
    model: str | None,
    prompt_tokens: int,
    completion_tokens: int,
    cost_usd: float,
    latencies: Mapping[str, float],
    fused_experience_ids: Sequence[int],
    scaffold_experience_id: int | None,
    passage_ids: Sequence[int],
    error: str | None = None,
    reused_experience_id: int | None = None,
) -> int:
    """Insert one row and return its id."""
    return int(
        session.execute(
            text(
                "INSERT INTO query_log (tenant_id, corpus_id, query, mode, answer, model, prompt_tokens,"
                " completion_tokens, cost_usd, latencies, fused_experience_ids, scaffold_experience_id, passage_ids,"
                " error, reused_experience_id) VALUES (:t, :c, :q, :m, :a, :model, :pt, :ct, :cost,"
                " CAST(:lat AS jsonb), :fused, :scaf, :pids, :err, :reused) RETURNING id"
            ),
            {
                "t": tenant_id,
                "c": corpus_id,
                "q": query,
                "m": mode,
                "a": answer,
                "model": model,
                "pt": int(prompt_tokens),
                "ct": int(completion_tokens),
                "cost": float(cost_usd),
                "lat": json.dumps({k: round(float(v), 3) for k, v in latencies.items()}),
                "fused": [int(i) for i in fused_experience_ids],
                "scaf": scaffold_experience_id,
                "pids": [int(i) for i in passage_ids],
                "reused": reused_experience_id,
                "err": error,
            },
        ).scalar_one()
    )


def delete_corpus_query_log(session: Session, corpus_id: int) -> int:
    """Delete one corpus's query log; returns the number of rows deleted."""
    return rowcount(session.execute(text("DELETE FROM query_log WHERE corpus_id = :c"), {"c": int(corpus_id)}))
