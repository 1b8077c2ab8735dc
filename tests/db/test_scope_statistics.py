"""Migration 0008: the planner's estimate of one scope's experiences (tenant_id and corpus_id) is
about the scope's size with the extended statistics, and a small fraction of it without them
(the misestimate that made preselection sort whole mid-sized scopes instead of walking their HNSW
index). On a fresh database of the test server: upgraded, downgraded to 0007 and upgraded again."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest
from sqlalchemy import text

from livingrag.db import migrate
from livingrag.db.engine import Database
from livingrag.db.repositories import tenants
from tests.conftest import db_settings_for
from tests.experience_helpers import insert_plain, make_corpus

pytestmark = pytest.mark.db


def _fill(db: Database, tenant: int, corpus: int, n: int) -> None:
    """``n`` experiences in the scope: one written through the repository, copied n - 1 times."""
    first = insert_plain(db, tenant, corpus, np.ones(8), {1: 1.0})
    with db.owner_session() as s:
        cols = s.execute(
            text(
                "SELECT string_agg(quote_ident(column_name), ', ' ORDER BY ordinal_position)"
                " FROM information_schema.columns WHERE table_schema = 'public' AND table_name = 'experiences'"
                " AND column_name <> 'id' AND is_generated = 'NEVER'"
            )
        ).scalar_one()
        s.execute(
            text(
                f"INSERT INTO experiences ({cols}) SELECT {cols} FROM experiences, generate_series(2, :n) WHERE id = :i"
            ),
            {"n": n, "i": first},
        )


def _estimate(db: Database, tenant: int, corpus: int) -> int:
    """The planner's row estimate for the scope's rows, after a fresh ANALYZE."""
    with db.owner_session() as s:
        s.execute(text("ANALYZE experiences"))
        plan = s.execute(
            text(f"EXPLAIN SELECT id FROM experiences WHERE tenant_id = {tenant} AND corpus_id = {corpus}")
        ).scalars().all()  # fmt: skip
    m = re.search(r"rows=(\d+)", plan[0])
    assert m, plan
    return int(m.group(1))


def _statistics(db: Database) -> list[str]:
    with db.owner_session() as s:
        return list(s.execute(text("SELECT stxname FROM pg_statistic_ext ORDER BY 1")).scalars())


def test_the_scope_statistics_fix_the_planners_estimate_of_a_scope(make_database_url: Callable[[], str]) -> None:
    db = Database(db_settings_for(make_database_url()))
    try:
        migrate.upgrade(db)
        assert _statistics(db) == ["experiences_scope_stats"]
        scopes: list[tuple[int, int]] = []
        for n in (1_000, 6_000, 6_000, 6_000):  # the scope measured holds 1,000 of 19,000 rows
            with db.owner_session() as s:
                t = tenants.create_tenant(s, f"stats-{n}-{len(scopes)}")[0].id
            c = make_corpus(db, t)
            _fill(db, t, c, n)
            scopes.append((t, c))
        small = scopes[0]
        with_stats = _estimate(db, *small)
        assert 500 <= with_stats <= 2_000, with_stats

        migrate.downgrade(db, "0007")
        assert _statistics(db) == []
        without = _estimate(db, *small)
        assert without < 200, without  # about 1,000 x 1,000 / 19,000: what 0008 corrects

        migrate.upgrade(db)
        assert _statistics(db) == ["experiences_scope_stats"]
        assert 500 <= _estimate(db, *small) <= 2_000
    finally:
        db.dispose()
