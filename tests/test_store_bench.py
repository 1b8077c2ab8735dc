"""``livingrag bench store`` end to end on a small synthetic store (the figures themselves are
measured by the command, never asserted here): every reported key is there, the top K agrees
with the exact scan, one of a raced burst of near-duplicates is stored, and the scratch database
is dropped."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text

from livingrag.bench.store import BenchConfig, format_report, run_store_bench
from livingrag.config import get_settings
from livingrag.errors import InvalidInput, NotFound
from tests.conftest import db_settings_for

pytestmark = pytest.mark.db


def test_store_bench_on_a_small_store(pg_server_url: str) -> None:
    settings = get_settings(db=db_settings_for(pg_server_url))
    cfg = BenchConfig(
        experiences=600, tenants=2, queries=40, writers=2, writes=8, race_bursts=1, warmup=5, query_seed=3
    )
    lines: list[str] = []
    report = run_store_bench(settings, cfg, progress=lines.append)
    for key in ("experiences", "match_ms_p50", "match_ms_p95", "topk_agreement", "writes_per_s", "race_stored"):
        assert key in report, key
    assert report["experiences"] == 600 and report["queries"] == 40
    assert report["warmup"] == 5 and report["query_seed"] == 3  # another query stream, same store
    assert report["topk_agreement"] >= 0.99
    assert report["race_stored"] == 1
    assert report["writes_stored"] == 8
    assert report["match_ms_p50"] > 0 and report["preselect_ms_p50"] > 0
    assert report["match_client_cpu_ms"] > 0  # means over the timed loop
    assert report["match_server_cpu_ms"] is None or report["match_server_cpu_ms"] >= 0
    assert report["scope_indexes"] == 2 and report["scope_index_build_s"] >= 0  # one per tenant's corpus
    assert any("loading 600 experiences" in line for line in lines)
    assert "match" in format_report(report)
    engine = create_engine(pg_server_url)
    try:
        with engine.connect() as c:
            left = c.execute(text("SELECT count(*) FROM pg_database WHERE datname = :n"), {"n": report["database"]})
            assert left.scalar() == 0  # the scratch database is dropped
    finally:
        engine.dispose()


def test_store_bench_measures_a_kept_store_again(pg_server_url: str) -> None:
    """``--keep`` then ``--database NAME``: the second run measures the same store (its synthetic
    data regenerated from the seed) and leaves it in place; a wrong size is refused by name. The
    first run matches through the shared index alone; the second builds the scope indexes the kept
    store lacks."""
    settings = get_settings(db=db_settings_for(pg_server_url))
    first = run_store_bench(
        settings,
        BenchConfig(
            experiences=300, tenants=2, queries=20, writers=2, writes=4, race_bursts=1, keep=True, scope_indexes=False
        ),
        progress=lambda _m: None,
    )
    name = first["database"]
    assert first["scope_indexes"] == 0 and "scope_index_build_s" not in first
    assert first["topk_agreement"] >= 0.99
    engine = create_engine(pg_server_url, isolation_level="AUTOCOMMIT")
    try:
        lines: list[str] = []
        again = run_store_bench(
            settings,
            BenchConfig(experiences=300, tenants=2, queries=20, writers=2, writes=4, race_bursts=1, database=name),
            progress=lines.append,
        )
        assert again["database"] == name and "load_s" not in again
        assert again["scope_indexes"] == 2 and "scope_index_build_s" in again
        assert again["topk_agreement"] >= 0.99 and again["race_stored"] == 1
        assert again["settings"]["entity_hits"] == settings.experience.entity_hits
        assert any(f"kept database {name}" in line for line in lines)
        with pytest.raises(InvalidInput, match="loaded experiences, not 2 and 400: give the --experiences"):
            run_store_bench(settings, BenchConfig(experiences=400, tenants=2, database=name), progress=lines.append)
        with pytest.raises(NotFound, match="no database 'livingrag_bench_missing'"):
            run_store_bench(
                settings, BenchConfig(experiences=300, tenants=2, database="livingrag_bench_missing"), progress=print
            )
        with engine.connect() as c:
            assert c.execute(text("SELECT count(*) FROM pg_database WHERE datname = :n"), {"n": name}).scalar() == 1
    finally:
        with engine.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        engine.dispose()
