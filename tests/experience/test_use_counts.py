"""Experience use counts written in batches: the tally by hand, one UPDATE per tenant per flush,
counts kept across a failed flush, a clean close that writes what is pending, and the immediate
mode (use_flush_s = 0)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from livingrag.db.engine import Database
from livingrag.db.repositories import experiences as repo
from livingrag.errors import DatabaseUnavailable, InvalidInput
from livingrag.experience.use_counts import Tally, UseRecorder, add_use
from tests.experience_helpers import insert_plain, make_corpus, unit

DIM = 8
T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def test_the_tally_counts_each_distinct_use_once_per_answer_and_keeps_the_latest_time() -> None:
    tally: dict[int, Tally] = {}
    add_use(tally, fused_ids=[1, 2, 2], shown_ids=[2], now=T0)
    add_use(tally, fused_ids=[1], shown_ids=[3, 3], now=T0 - timedelta(seconds=5))
    assert tally == {
        1: Tally(fusion=2, scaffold=0, last_used_at=T0),
        2: Tally(fusion=1, scaffold=1, last_used_at=T0),
        3: Tally(fusion=0, scaffold=1, last_used_at=T0 - timedelta(seconds=5)),
    }


def _uses(db: Database, tenant: int, ids: list[int]) -> list[tuple[int, int, datetime | None]]:
    with db.tenant_session(tenant) as s:
        rows = s.execute(
            text("SELECT fusion_uses, scaffold_uses, last_used_at FROM experiences WHERE id = ANY(:i) ORDER BY id"),
            {"i": ids},
        ).all()
    return [(r[0], r[1], r[2]) for r in rows]


def _two(db: Database, tenant: int) -> list[int]:
    corpus = make_corpus(db, tenant, DIM)
    return sorted(insert_plain(db, tenant, corpus, unit(DIM, (k, 1.0)), {k + 1: 1.0}) for k in range(2))


def test_uses_wait_for_the_flush_and_are_written_together(db: Database, tenant: int) -> None:
    a, b = _two(db, tenant)
    uses = UseRecorder(db, flush_s=3600)  # no timed flush during the test
    try:
        for k in range(5):
            uses.record(tenant, fused_ids=[a, b], scaffold_id=a, finding_ids=[], now=T0 + timedelta(seconds=k))
        uses.record(tenant, fused_ids=[], scaffold_id=None, finding_ids=[b], now=T0)
        assert _uses(db, tenant, [a, b]) == [(0, 0, None), (0, 0, None)]  # nothing written yet
        assert uses.flush() == 2
        assert _uses(db, tenant, [a, b]) == [(5, 5, T0 + timedelta(seconds=4)), (5, 1, T0 + timedelta(seconds=4))]
        assert uses.flush() == 0
    finally:
        uses.close()


def test_the_flusher_thread_writes_within_use_flush_s(db: Database, tenant: int) -> None:
    a, _ = _two(db, tenant)
    uses = UseRecorder(db, flush_s=0.05)
    try:
        uses.record(tenant, fused_ids=[a], scaffold_id=None, finding_ids=[], now=T0)
        deadline = time.monotonic() + 10
        while _uses(db, tenant, [a])[0][0] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _uses(db, tenant, [a]) == [(1, 0, T0)]
    finally:
        uses.close()


def test_a_failed_flush_keeps_its_counts_and_close_writes_what_is_pending(
    db: Database, tenant: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = _two(db, tenant)
    uses = UseRecorder(db, flush_s=3600)
    uses.record(tenant, fused_ids=[a], scaffold_id=b, finding_ids=[], now=T0)
    real = repo.add_uses

    def away(*_a: object, **_k: object) -> int:
        raise DatabaseUnavailable("the database is away")

    monkeypatch.setattr(repo, "add_uses", away)
    assert uses.flush() == 0
    monkeypatch.setattr(repo, "add_uses", real)
    uses.record(tenant, fused_ids=[a], scaffold_id=None, finding_ids=[], now=T0 + timedelta(seconds=1))
    uses.close()  # merges the kept counts with the new ones and writes them
    assert _uses(db, tenant, [a, b]) == [(2, 0, T0 + timedelta(seconds=1)), (0, 1, T0)]
    uses.record(tenant, fused_ids=[a], scaffold_id=None, finding_ids=[], now=T0)  # closed: written at once
    assert _uses(db, tenant, [a])[0][0] == 3


def test_immediate_mode_and_a_deleted_experience(db: Database, tenant: int) -> None:
    a, b = _two(db, tenant)
    with db.tenant_session(tenant) as s:
        s.execute(text("DELETE FROM experiences WHERE id = :i"), {"i": b})
    uses = UseRecorder(db, flush_s=0)
    uses.record(tenant, fused_ids=[a, b], scaffold_id=None, finding_ids=[], now=T0)
    assert _uses(db, tenant, [a, b]) == [(1, 0, T0)]  # the deleted one is skipped, nothing fails
    with pytest.raises(ValueError, match="flush_s must be >= 0"):
        UseRecorder(db, flush_s=-1)


def test_add_uses_refuses_mismatched_or_repeated_ids(db: Database, tenant: int) -> None:
    a, _ = _two(db, tenant)
    with db.tenant_session(tenant) as s:
        with pytest.raises(InvalidInput, match="one fusion count, scaffold count and time per id"):
            repo.add_uses(s, ids=[a], fusion=[1, 2], scaffold=[0], last_used_at=[None])
        with pytest.raises(InvalidInput, match="distinct experience ids"):
            repo.add_uses(s, ids=[a, a], fusion=[1, 1], scaffold=[0, 0], last_used_at=[None, None])
        assert repo.add_uses(s, ids=[a], fusion=[1], scaffold=[0], last_used_at=[None]) == 1  # None: the server's now
    assert _uses(db, tenant, [a])[0][2] is not None
