"""Loading the experience indexes into PostgreSQL's shared buffers after a restart
(``db.prewarm_buffers_fraction``; livingrag/db/native/livingrag_buffers.c)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from livingrag.db.buffer_load import BufferLoad, buffer_budget, create_loader, load_rank, load_relations, plan_loads
from livingrag.db.catalog import RelationFile
from livingrag.db.loader_build import LoaderBuildError, build, installed_library


def _rel(name: str, size: int, is_index: bool = True) -> RelationFile:
    return RelationFile(name, Path("/d") / name, size, is_index)


def test_matching_indexes_rank_first_then_the_experience_rows_and_no_other_table() -> None:
    assert load_rank("ix_exp_scope_3_7_384") == 0
    assert load_rank("ix_experience_entities_channel") == 1
    assert load_rank("experiences_pkey") == 1
    assert load_rank("ix_experiences_query_embedding_hnsw_384") == 2
    assert load_rank("experience_entities_pkey") == 3
    assert load_rank("experiences", is_index=False) == 4
    assert load_rank("experience_entities", is_index=False) is None
    assert load_rank("pg_toast_16500", is_index=False) is None


def test_the_plan_takes_scopes_first_smaller_first_and_cuts_at_the_budget() -> None:
    rels = [
        ("a", _rel("experiences", 100 * 8192, is_index=False)),
        ("a", _rel("experience_entities_pkey", 4 * 8192)),
        ("a", _rel("ix_experiences_query_embedding_hnsw_384", 5 * 8192)),
        ("a", _rel("ix_exp_scope_1_1_384", 3 * 8192)),
        ("b", _rel("ix_exp_scope_2_2_384", 2 * 8192 + 1)),  # 3 blocks, rounded up
        ("b", _rel("ix_experience_entities_channel", 2 * 8192)),
        ("b", RelationFile("pg_toast_9_index", Path("/d/t"), 8192, True, qualified="pg_toast.pg_toast_9_index")),
        ("b", _rel("experience_entities", 50 * 8192, is_index=False)),  # matching reads none of its pages
    ]
    whole = plan_loads(rels, budget_bytes=10**9, block_size=8192)
    assert whole.items == (
        ("b", "ix_exp_scope_2_2_384", 3),  # the smaller scope first
        ("a", "ix_exp_scope_1_1_384", 3),
        ("b", "ix_experience_entities_channel", 2),
        ("a", "ix_experiences_query_embedding_hnsw_384", 5),
        ("b", "pg_toast.pg_toast_9_index", 1),  # named so that a session finds it
        ("a", "experience_entities_pkey", 4),
        ("a", "experiences", 100),  # the rows matching reads, once every index is in
    )
    assert not whole.cut
    cut = plan_loads(rels, budget_bytes=10 * 8192 + 100, block_size=8192)
    assert cut.items == (
        ("b", "ix_exp_scope_2_2_384", 3),
        ("a", "ix_exp_scope_1_1_384", 3),
        ("b", "ix_experience_entities_channel", 2),
        ("a", "ix_experiences_query_embedding_hnsw_384", 2),  # its first blocks: entry point, upper layers
    )
    assert cut.cut
    assert plan_loads(rels, budget_bytes=0, block_size=8192).items == ()
    with pytest.raises(ValueError, match="block size must be positive"):
        plan_loads(rels, budget_bytes=1, block_size=0)


def test_a_load_report_is_in_megabytes() -> None:
    assert BufferLoad(3, 256, 1, True, 1.234, 8192).as_dict() == {
        "relations": 3,
        "mb": 2.0,
        "missing": 1,
        "truncated": True,
        "seconds": 1.23,
    }


def test_a_budget_fraction_outside_0_to_1_is_refused() -> None:
    with pytest.raises(ValueError, match=r"fraction must be within \[0, 1\], got 1.5"):
        buffer_budget(None, 1.5)  # type: ignore[arg-type]


def test_a_source_that_does_not_compile_is_a_clear_build_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.c"
    bad.write_text("this is not C;\n")
    with pytest.raises(LoaderBuildError, match="failed"):
        build(source=bad)
    assert not any(p.name.startswith(".livingrag_buffers-") for p in (installed_library() or tmp_path).parent.iterdir())


def _needs_loader() -> None:
    if installed_library() is None:
        if os.environ.get("LIVINGRAG_TEST_DB_URL"):
            pytest.skip("the external test server has no livingrag_buffers library")
        pytest.fail("scripts/install.sh did not build the buffer loader (python -m livingrag.db.loader_build build)")


def _xact_counts(conn: object, relation: str) -> tuple[int, int]:
    row = conn.execute(  # type: ignore[attr-defined]
        text(
            "SELECT pg_stat_get_xact_blocks_fetched(CAST(:r AS regclass)),"
            " pg_stat_get_xact_blocks_hit(CAST(:r AS regclass))"
        ),
        {"r": relation},
    ).one()
    return int(row[0]), int(row[1])


@pytest.mark.db
def test_the_loader_puts_every_block_of_an_index_in_the_shared_buffers(make_database_url: Callable[[], str]) -> None:
    from sqlalchemy import create_engine

    _needs_loader()
    engine = create_engine(make_database_url())  # a table of its own: a temporary one lives in local buffers
    try:
        with engine.connect() as conn:
            conn.execute(
                text("CREATE TABLE lrg_load_t AS SELECT g AS id, md5(g::text) AS v FROM generate_series(1, 20000) g")
            )
            conn.execute(text("CREATE INDEX lrg_load_ix ON lrg_load_t (v)"))
            blocks = int(conn.execute(text("SELECT pg_relation_size('lrg_load_ix') / 8192")).scalar_one())
            assert blocks > 50
            create_loader(conn)
            f0, _ = _xact_counts(conn, "lrg_load_ix")
            assert (
                conn.execute(text("SELECT pg_temp.livingrag_load_relation('lrg_load_ix', -1)")).scalar_one() == blocks
            )
            f1, h1 = _xact_counts(conn, "lrg_load_ix")
            assert f1 - f0 == blocks  # every block went through the buffer manager
            # loaded again: every block is found in the shared buffers, none read from outside
            conn.execute(text("SELECT pg_temp.livingrag_load_relation('lrg_load_ix', -1)"))
            f2, h2 = _xact_counts(conn, "lrg_load_ix")
            assert (f2 - f1, h2 - h1) == (blocks, blocks)
            # a limit loads the first blocks only
            assert conn.execute(text("SELECT pg_temp.livingrag_load_relation('lrg_load_ix', 7)")).scalar_one() == 7
            assert _xact_counts(conn, "lrg_load_ix")[0] - f2 == 7
            assert load_relations(conn, [("lrg_load_ix", 5), ("lrg_gone_ix", 3)]) == (1, 5, 1)
    finally:
        engine.dispose()


@pytest.mark.db
def test_the_loader_refuses_what_it_cannot_load(make_database_url: Callable[[], str]) -> None:
    from sqlalchemy import create_engine

    _needs_loader()
    engine = create_engine(make_database_url())
    role = f"lrg_load_nobody_{uuid.uuid4().hex[:8]}"
    try:
        with engine.connect() as conn:
            create_loader(conn)
            conn.execute(text("CREATE TEMP VIEW lrg_load_v AS SELECT 1 AS x"))
            with pytest.raises(DBAPIError, match='relation "lrg_load_v" has no storage to load'):
                conn.execute(text("SELECT pg_temp.livingrag_load_relation('lrg_load_v', -1)"))
            conn.rollback()
            with pytest.raises(DBAPIError, match="could not access file"):
                create_loader(conn, library="livingrag_no_such_library")
            conn.rollback()
            with pytest.raises(ValueError, match="library name must be"):
                create_loader(conn, library="x'; DROP TABLE t; --")
            # a role without SELECT on a table may not load it
            conn.execute(text("CREATE TABLE lrg_load_secret AS SELECT g FROM generate_series(1, 10) g"))
            conn.execute(text(f"CREATE ROLE {role}"))  # rolled back with the transaction
            create_loader(conn)
            conn.execute(text(f"SET ROLE {role}"))
            with pytest.raises(DBAPIError, match="permission denied for table lrg_load_secret"):
                conn.execute(text("SELECT pg_temp.livingrag_load_relation('lrg_load_secret', -1)"))
            conn.rollback()
    finally:
        engine.dispose()


def test_bench_store_says_what_the_start_read_and_loaded() -> None:
    from livingrag.bench.store_bench import _prewarm_line

    read = {"files": 3, "mb": 120.5, "missing": 0, "truncated": False, "seconds": 1.5, "wait_s": 0.2}
    assert _prewarm_line(read | {"buffers": None}) == "read 120.5 MB in 3 files in 1.5 s before the warm-up"
    loaded = {"relations": 7, "mb": 80.0, "missing": 0, "truncated": True, "seconds": 0.4}
    assert _prewarm_line(read | {"buffers": loaded}) == (
        "read 120.5 MB in 3 files in 1.5 s before the warm-up; 80.0 MB of 7 relations loaded into shared buffers"
        " in 0.4 s, stopped at the budget"
    )
    failed = read | {"buffers": None, "buffers_error": "ProgrammingError: could not access file"}
    assert _prewarm_line(failed).endswith(
        "; nothing loaded into shared buffers: ProgrammingError: could not access file"
    )
