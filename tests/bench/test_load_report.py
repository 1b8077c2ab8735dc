"""The load runner's report (:mod:`livingrag.bench.http_load`): the stages the server's answers name in
their ``Server-Timing`` header, summed up per stage."""

from __future__ import annotations

from livingrag.bench.http_load import LoadReport, parse_server_timing


def test_server_timing_values_are_read_by_name() -> None:
    assert parse_server_timing("wait;dur=12.5, index;dur=300, phase_ner;desc=x;dur=4") == {
        "wait": 12.5,
        "index": 300.0,
        "phase_ner": 4.0,
    }
    # no duration, a duration that is not a number, an empty header: left out
    assert parse_server_timing("cache, db;dur=fast, ;dur=3") == {}
    assert parse_server_timing("") == {}


def test_the_summary_gives_each_stage_its_median_and_p95() -> None:
    report = LoadReport(clients=2, seconds=10.0)
    report.stages_ms = {"add.wait": [float(x) for x in range(1, 101)], "add.graph": [5.0]}
    stages = report.summary()["stages_ms"]
    assert stages == {
        "add.graph": {"n": 1, "p50": 5.0, "p95": 5.0},
        "add.wait": {"n": 100, "p50": 50.5, "p95": 95.0},
    }
    assert "stages_ms" not in LoadReport(clients=1, seconds=1.0).summary()
    report.add_versions = {4, 5, 9}
    assert report.summary()["add_runs"] == 3  # indexing runs the adds were committed in
