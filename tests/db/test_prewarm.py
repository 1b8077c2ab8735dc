"""The read-ahead of the experience store when the embedded server starts (``db.prewarm``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from livingrag.db.catalog import RelationFile, relation_files, segment_bytes
from livingrag.db.prewarm import Prewarm, ReadAhead, plan_files, read_ahead, read_order, segment_paths


def test_segment_paths_split_a_relation_as_postgresql_names_its_files() -> None:
    p = Path("/d/base/5/16384")
    assert segment_paths(p, 25, 10) == [(p, 10), (Path("/d/base/5/16384.1"), 10), (Path("/d/base/5/16384.2"), 5)]
    assert segment_paths(p, 10, 10) == [(p, 10)]
    assert segment_paths(p, 0, 10) == []
    with pytest.raises(ValueError, match="segment size must be positive"):
        segment_paths(p, 5, 0)


def test_indexes_are_read_first_and_larger_first() -> None:
    heap = RelationFile("experiences", Path("/d/1"), 900, is_index=False)
    small = RelationFile("ix_small", Path("/d/2"), 10, is_index=True)
    big = RelationFile("ix_big", Path("/d/3"), 500, is_index=True)
    assert sorted([heap, small, big], key=read_order) == [big, small, heap]
    assert plan_files([big, heap], segment=400) == [
        (Path("/d/3"), 400),
        (Path("/d/3.1"), 100),
        (Path("/d/1"), 400),
        (Path("/d/1.1"), 400),
        (Path("/d/1.2"), 100),
    ]


def test_read_ahead_reads_up_to_its_budget_and_counts_missing_files(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    a.write_bytes(b"x" * 3000)
    b.write_bytes(b"y" * 2000)
    c.write_bytes(b"z" * 100)
    r = read_ahead([(a, 3000), (tmp_path / "gone", 50), (b, 2000)], budget=10_000)
    assert (r.files, r.bytes, r.missing, r.truncated) == (2, 5000, 1, False)
    r = read_ahead([(a, 3000), (b, 2000), (c, 100)], budget=4000)
    assert (r.files, r.bytes, r.missing, r.truncated) == (2, 4000, 0, True)
    # a file shorter than the catalog said (truncated meanwhile) is read to its end
    assert read_ahead([(c, 500)], budget=10_000).bytes == 100
    assert ReadAhead(1, 3 * 1024**2, 0, False, 0.123).as_dict() == {
        "files": 1,
        "mb": 3.0,
        "missing": 0,
        "truncated": False,
        "seconds": 0.12,
    }


@pytest.mark.db
def test_relation_files_name_the_experience_tables_and_all_their_indexes(db: object) -> None:
    from livingrag.db.engine import Database

    assert isinstance(db, Database)
    with db.owner_engine.connect() as conn:
        files = relation_files(conn)
        segment = segment_bytes(conn)
        indexes = {
            r[0]
            for r in conn.execute(
                text("SELECT indexname FROM pg_indexes WHERE tablename IN ('experiences', 'experience_entities')")
            )
        }
    names = {f.relation for f in files}
    assert {"experiences", "experience_entities"} <= names
    assert indexes <= names and indexes
    assert {f.relation for f in files if f.is_index} >= indexes
    assert any(n.startswith("pg_toast_") for n in names)  # the TOAST table of the JSON/text columns
    assert segment == 1024**3
    first_heap = next(i for i, f in enumerate(files) if not f.is_index)
    assert all(not f.is_index for f in files[first_heap:])
    for f in files:
        assert f.path.is_absolute() and f.path.exists(), f
        if f.size <= segment:
            assert f.path.stat().st_size == f.size


@pytest.fixture
def stopped_data_dir() -> Iterator[Path]:
    """A data folder whose schema is migrated (by another process, which stops the server)."""
    d = Path(tempfile.mkdtemp(prefix="livingrag-prewarm-"))
    env = {**os.environ, "LIVINGRAG_DB__DATA_DIR": str(d)}
    subprocess.run(
        [sys.executable, "-m", "livingrag.cli.main", "db", "upgrade"], env=env, check=True, capture_output=True
    )
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.db
def test_a_process_that_starts_the_server_reads_the_store_ahead(stopped_data_dir: Path) -> None:
    from livingrag.db.embedded import server_is_running, start_embedded

    pgdata = stopped_data_dir / "pgdata"
    deadline = time.monotonic() + 60  # the migrating process's server stops after that process exits
    while server_is_running(pgdata) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not server_is_running(pgdata)
    server = start_embedded(stopped_data_dir, prewarm=True, prewarm_buffers_fraction=0.5)
    try:
        assert server.prewarm is not None
        result = server.prewarm.wait(60)
        assert server.prewarm.done and server.prewarm.error is None and result is not None
        assert result.files >= 4 and result.bytes > 0 and result.missing == 0 and not result.truncated
        # then the experience indexes went into the shared buffers, whole (the store is small)
        loaded = server.prewarm.buffers
        assert server.prewarm.buffers_error is None and loaded is not None
        assert loaded.relations >= 3 and loaded.blocks > 0 and loaded.missing == 0 and not loaded.truncated
        report = server.prewarm.report()
        assert report["buffers"] == loaded.as_dict() and report["files"] == result.files
        # a server without the loader: the read-ahead still ran, and the report says why the load did not
        other = Prewarm(server.url, buffers_fraction=0.5, library="livingrag_no_such_library").start()
        assert other.wait(60) is not None and other.buffers is None
        assert "could not access file" in str(other.buffers_error)
        assert "could not access file" in str(other.report()["buffers_error"])
        assert start_embedded(stopped_data_dir, prewarm=True) is server  # one read-ahead per process
        # a second process attaches to the running server: it reads nothing
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from livingrag.db.embedded import start_embedded;"
                "s = start_embedded(sys.argv[1], prewarm=True); print(s.prewarm is None)",
                str(stopped_data_dir),
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        assert out.stdout.strip() == "True"
    finally:
        server.stop()


@pytest.mark.db
def test_store_relations_name_each_databases_relations_and_skip_a_dropped_one(pg_server_url: str, db: object) -> None:
    from sqlalchemy.engine import make_url

    from livingrag.db.catalog import store_relations
    from livingrag.db.engine import Database

    assert isinstance(db, Database)
    name = make_url(db.owner_url).database
    assert name is not None
    found = store_relations(pg_server_url, [name, "livingrag_no_such_database"])
    assert found and {d for d, _ in found} == {name}
    assert {"experiences", "experience_entities"} <= {r.relation for _, r in found}


def test_a_failure_while_the_server_stops_is_no_warning(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    """A short command ends while the read-ahead runs: the server's stop cancels it first, so the
    connection it loses is logged at INFO, and no buffer load follows; the same failure without a
    stop is a warning."""
    import logging

    url = f"postgresql://nobody@/postgres?host={tmp_path}"  # no server there: every connection fails
    with caplog.at_level(logging.INFO, logger="livingrag.db.prewarm"):
        failing = Prewarm(url, buffers_fraction=0.5).start()
        failing.wait(30)
        stopped = Prewarm(url, buffers_fraction=0.5)
        stopped.cancel()
        stopped.start().wait(30)
    assert failing.done and stopped.done and failing.error and stopped.error
    levels = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert [lv for lv, m in levels if "prewarm failed" in m] == ["WARNING", "INFO"]
    assert any("(the server was stopping)" in m for lv, m in levels if lv == "INFO")
    assert stopped.buffers is None and stopped.buffers_error is None  # no load was tried
