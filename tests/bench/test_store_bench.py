"""``livingrag bench store`` end to end on a small synthetic store (the figures themselves are
measured by the command, never asserted here): every reported key is there, the top K agrees
with the exact scan, one of a raced burst of near-duplicates is stored, and the scratch database
is dropped."""

from __future__ import annotations

import re
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from livingrag.bench.store_bench import BenchConfig, Synth, format_report, run_store_bench
from livingrag.bench.tenant_figures import size_groups, tenant_counts, tenant_figures
from livingrag.config import get_settings
from livingrag.errors import InvalidInput, NotFound
from tests.conftest import db_settings_for


def test_tenant_counts_equal_and_zipf_exact() -> None:
    assert tenant_counts(10, 3) == [4, 3, 3]  # none: today's equal split
    assert tenant_counts(10, 3, "zipf", 0.0) == [4, 3, 3]  # s = 0 is the equal split
    # quotas 10 * (1, 1/2, 1/3) / (11/6) = 5.45, 2.73, 1.82: floors 5, 2, 1, the two largest remainders +1
    assert tenant_counts(10, 3, "zipf", 1.0) == [5, 3, 2]
    assert tenant_counts(20, 4, "zipf", 1.0) == [10, 5, 3, 2]  # quotas 9.6, 4.8, 3.2, 2.4
    # quotas 3.42, 0.85, 0.38, 0.21, 0.14 round to 4, 1, 0, 0, 0; the empty tenants take one each from the largest
    assert tenant_counts(5, 5, "zipf", 2.0) == [1, 1, 1, 1, 1]
    assert tenant_counts(7, 4, "zipf", 3.0) == [4, 1, 1, 1]
    big = tenant_counts(100_000, 100, "zipf", 1.0)
    assert sum(big) == 100_000 and big[0] == 19_278 and big[-1] == 193
    assert big == sorted(big, reverse=True)
    assert Synth(20, 4, 0, "zipf", 1.0).counts == [10, 5, 3, 2]
    with pytest.raises(ValueError, match="unknown skew 'pareto'"):
        tenant_counts(10, 3, "pareto")
    with pytest.raises(ValueError, match="zipf exponent must be a finite number >= 0, not -1"):
        tenant_counts(10, 3, "zipf", -1.0)
    with pytest.raises(ValueError, match="at least one experience per tenant"):
        tenant_counts(2, 3, "zipf")


def test_size_groups_and_tenant_figures() -> None:
    assert size_groups([5, 3, 3, 1]) == [[3], [1], [2], [0]]  # fewer than 10 tenants: one group each
    assert size_groups(list(range(23, 0, -1)))[0] == [22, 21, 20]  # smallest first, larger groups first
    assert [len(g) for g in size_groups([1] * 23)] == [3, 3, 3, 2, 2, 2, 2, 2, 2, 2]
    sizes = [8, 4, 2]
    fig = tenant_figures(sizes, [0, 1, 2, 0, 1, 2], [9.0, 4.0, 1.0, 11.0, 6.0, 3.0], [1, 1, 1, 1, 0.5, 1])
    assert [p["queries"] for p in fig["per_tenant"]] == [2, 2, 2]
    assert fig["median_tenant"]["tenant"] == 1 and fig["median_tenant"]["match_ms_p50"] == 5.0
    assert fig["largest_tenant"]["tenant"] == 0 and fig["largest_tenant"]["match_ms_p50"] == 10.0
    assert [d["topk_agreement"] for d in fig["agreement_by_size_decile"]] == [1.0, 0.75, 1.0]
    assert fig["targets"] == {
        "median_tenant_p50_ms": 5.0,
        "median_tenant_p50_met": True,
        "largest_tenant_p50_ms": 10.0,
        "largest_tenant_p50_met": True,
        "lowest_decile_agreement": 0.75,
        "decile_agreement_met": False,
    }


@pytest.mark.db
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


@pytest.mark.db
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


@pytest.mark.db
def test_store_bench_with_zipf_tenants_reports_deciles_and_targets(pg_server_url: str) -> None:
    """``--tenants 12 --skew zipf``: every tenant gets timed queries, the report has per-tenant
    figures, agreement per size decile and the target lines; a kept store is measured again only
    with the skew it was loaded with (refused by flag names otherwise)."""
    settings = get_settings(db=db_settings_for(pg_server_url))

    def small(**kw: Any) -> BenchConfig:
        return BenchConfig(experiences=3000, tenants=12, queries=48, writers=2, writes=4, race_bursts=1, warmup=5, **kw)

    report = run_store_bench(settings, small(skew="zipf", keep=True, scope_indexes=False), progress=lambda _m: None)
    name = report["database"]
    engine = create_engine(pg_server_url, isolation_level="AUTOCOMMIT")
    try:
        fig = report["tenant_figures"]
        sizes = tenant_counts(3000, 12, "zipf", 1.0)
        assert report["skew"] == "zipf" and report["zipf_s"] == 1.0
        assert [p["experiences"] for p in fig["per_tenant"]] == sizes
        assert all(p["queries"] == 4 and p["match_ms_p50"] > 0 for p in fig["per_tenant"])
        assert fig["largest_tenant"]["tenant"] == 0 and fig["largest_tenant"]["experiences"] == sizes[0]
        assert fig["median_tenant"]["experiences"] == sorted(sizes)[5]
        deciles = fig["agreement_by_size_decile"]
        assert len(deciles) == 10 and sum(d["tenants"] for d in deciles) == 12
        assert all(d["topk_agreement"] >= 0.99 for d in deciles)
        assert fig["targets"]["decile_agreement_met"] is True
        text_report = format_report(report)
        assert "agreement by size decile" in text_report and "median-sized tenant" in text_report
        assert "targets (issue 21, target 3): median tenant p50" in text_report
        assert re.search(r"agreement >= 0\.99 in each decile \(lowest [0-9.]+\): met", text_report)
        assert "#11: 81 experiences" in text_report  # 12 tenants: each listed
        with pytest.raises(InvalidInput, match=f"{name} was loaded with --skew zipf --zipf-s 1, not --skew none"):
            run_store_bench(settings, BenchConfig(experiences=3000, tenants=12, database=name), progress=print)
        with pytest.raises(
            InvalidInput, match=r"--skew zipf --zipf-s 1, not --skew zipf --zipf-s 1\.5: give the --skew"
        ):
            run_store_bench(
                settings,
                BenchConfig(experiences=3000, tenants=12, skew="zipf", zipf_s=1.5, database=name),
                progress=print,
            )
        with pytest.raises(ValueError, match=r"--queries \(8\) must be at least --tenants \(12\)"):
            run_store_bench(settings, BenchConfig(experiences=3000, tenants=12, queries=8), progress=print)
        again = run_store_bench(settings, small(skew="zipf", database=name, scope_indexes=False), progress=print)
        assert again["tenant_figures"]["targets"]["decile_agreement_met"] is True
        assert [p["experiences"] for p in again["tenant_figures"]["per_tenant"]] == sizes
    finally:
        with engine.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        engine.dispose()
