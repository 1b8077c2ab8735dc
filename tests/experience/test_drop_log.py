"""Dropped write-back candidates are logged in batches: each drop's row, its time, its tenant; a
failed flush keeps them; a deleted corpus's drops are skipped; bad ids are named, never raised on
the answer path."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from livingrag.db.engine import Database
from livingrag.db.repositories import corpora
from livingrag.errors import InvalidInput
from livingrag.experience.drop_log import DropRecorder, dropped_row
from tests.conftest import db_settings_for
from tests.experience_helpers import make_corpus

pytestmark = pytest.mark.db

FULL = "write-back queue is full"


def drops(db: Database, tenant: int) -> list[tuple[int, str, str, str, int | None]]:
    with db.tenant_session(tenant) as s:
        return [
            tuple(r)
            for r in s.execute(
                text(
                    "SELECT corpus_id, query, decision, reason, query_log_id FROM writeback_log"
                    " WHERE tenant_id = :t ORDER BY id"
                ),
                {"t": tenant},
            )
        ]


def test_drops_wait_for_the_flush_and_are_written_per_tenant_in_order(
    db: Database, make_tenant: Callable[..., tuple[int, str]]
) -> None:
    (a, _), (b, _) = make_tenant(), make_tenant()
    ca, cb = make_corpus(db, a), make_corpus(db, b)
    rec = DropRecorder(db, flush_s=3600)
    before = datetime.now(UTC)
    rec.record(tenant_id=a, corpus_id=ca, query="q1", reason=FULL, query_log_id=None)
    rec.record(tenant_id=b, corpus_id=cb, query="q2", reason=FULL)
    rec.record(tenant_id=a, corpus_id=ca, query="q3", reason="write-back worker is closed")
    assert rec.pending == 3 and drops(db, a) == [] and drops(db, b) == []  # nothing on the answer path
    assert rec.flush() == 3 and rec.pending == 0
    assert drops(db, a) == [
        (ca, "q1", "dropped", FULL, None),
        (ca, "q3", "dropped", "write-back worker is closed", None),
    ]
    assert drops(db, b) == [(cb, "q2", "dropped", FULL, None)]
    with db.tenant_session(a) as s:
        stamped = s.execute(
            text("SELECT min(created_at) FROM writeback_log WHERE tenant_id = :t"), {"t": a}
        ).scalar_one()
    assert before <= stamped <= datetime.now(UTC)  # the time of the drop, not of the flush
    rec.close()


def test_the_flusher_thread_writes_within_its_interval_and_close_writes_the_rest(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant)
    rec = DropRecorder(db, flush_s=0.05)
    rec.record(tenant_id=tenant, corpus_id=corpus, query="q1", reason=FULL)
    deadline = time.monotonic() + 10
    while not drops(db, tenant) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [r[1] for r in drops(db, tenant)] == ["q1"]
    rec.close()
    rec.record(tenant_id=tenant, corpus_id=corpus, query="q2", reason=FULL)  # closed: written at once
    assert [r[1] for r in drops(db, tenant)] == ["q1", "q2"] and rec.pending == 0


def test_flush_s_zero_writes_in_the_callers_thread(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant)
    rec = DropRecorder(db, flush_s=0)
    rec.record(tenant_id=tenant, corpus_id=corpus, query="q", reason=FULL)
    assert rec.pending == 0 and len(drops(db, tenant)) == 1


def test_an_unreachable_database_keeps_the_drops_for_the_next_flush_up_to_the_cap(db: Database, tenant: int) -> None:
    corpus = make_corpus(db, tenant)
    down = Database(db_settings_for("postgresql+psycopg://nobody@127.0.0.1:1/none"))
    rec = DropRecorder(down, flush_s=3600, max_pending=3)
    for i in range(4):  # the oldest is given up past max_pending
        rec.record(tenant_id=tenant, corpus_id=corpus, query=f"q{i}", reason=FULL)
    assert rec.pending == 3
    assert rec.flush() == 0 and rec.pending == 3  # failed: kept
    rec.record(tenant_id=tenant, corpus_id=corpus, query="q4", reason=FULL)  # newest kept, oldest given up
    rec.db = db  # the database is back
    assert rec.flush() == 3
    assert [r[1] for r in drops(db, tenant)] == ["q2", "q3", "q4"]  # in drop order
    down.dispose()


def test_drops_of_a_corpus_deleted_before_the_flush_are_skipped(db: Database, tenant: int) -> None:
    gone, kept = make_corpus(db, tenant), make_corpus(db, tenant)
    rec = DropRecorder(db, flush_s=3600)
    rec.record(tenant_id=tenant, corpus_id=gone, query="q-gone", reason=FULL)
    rec.record(tenant_id=tenant, corpus_id=kept, query="q-kept", reason=FULL)
    with db.tenant_session(tenant) as s:
        corpora.delete_corpus(s, gone)
    assert rec.flush() == 1 and rec.pending == 0
    assert [r[1] for r in drops(db, tenant)] == ["q-kept"]


def test_a_drop_of_another_tenants_corpus_is_not_written(
    db: Database, make_tenant: Callable[..., tuple[int, str]]
) -> None:
    (a, _), (b, _) = make_tenant(), make_tenant()
    theirs = make_corpus(db, b)
    rec = DropRecorder(db, flush_s=3600)
    rec.record(tenant_id=a, corpus_id=theirs, query="q", reason=FULL)
    assert rec.flush() == 0
    assert drops(db, a) == [] and drops(db, b) == []


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("tenant_id", 0, "tenant_id must be a positive integer, got 0"),
        ("tenant_id", True, "tenant_id must be a positive integer, got True"),
        ("corpus_id", "7", "corpus_id must be a positive integer, got '7'"),
        ("query_log_id", 1.5, "query_log_id must be an integer or None, got 1.5"),
    ],
)
def test_bad_ids_are_named_and_the_drop_is_not_kept(
    db: Database, field: str, value: object, named: str, caplog: pytest.LogCaptureFixture
) -> None:
    args: dict[str, object] = {"tenant_id": 1, "corpus_id": 1, "query_log_id": None} | {field: value}
    with pytest.raises(InvalidInput, match=named.replace("(", r"\(")):
        dropped_row(query="q", reason=FULL, at=datetime.now(UTC), **args)
    rec = DropRecorder(db, flush_s=3600)
    rec.record(query="q", reason=FULL, **args)  # never raises on the answer path
    assert rec.pending == 0 and named in caplog.text


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="flush_s must be >= 0"):
        DropRecorder(None, flush_s=-1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_pending must be >= 1"):
        DropRecorder(None, flush_s=1, max_pending=0)  # type: ignore[arg-type]
