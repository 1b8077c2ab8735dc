"""``livingrag bench api --compare-standby`` (:mod:`livingrag.bench.replica_load`): the CPU of a
process tree, the text of a result, and (slow) a short real run: two services on one embedded
primary, one of them reading from a streaming standby of it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from livingrag.bench.replica_load import format_comparison, process_tree_cpu_s
from livingrag.testing.server import SOURCE_ROOT


def test_a_process_trees_cpu_counts_its_children_the_ended_ones_too() -> None:
    before = process_tree_cpu_s(os.getpid())
    # a child that burns CPU and ends: its time is in this process's reaped-children times
    subprocess.run(
        [sys.executable, "-c", "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"]
    )
    assert process_tree_cpu_s(os.getpid()) - before >= 0.25
    t0 = time.process_time()
    while time.process_time() - t0 < 0.1:
        pass
    assert process_tree_cpu_s(os.getpid()) - before >= 0.35
    assert process_tree_cpu_s(2**22 + 12345) == 0.0  # no such process


def test_the_comparison_as_text() -> None:
    run = {
        "round": 1, "answered_questions": 10, "answered_rps": 5.0, "ask_p50_ms": 50.0, "ask_p95_ms": 90.0,
        "add_p95_ms": 300.0, "server_errors": 0, "primary_cpu_ms_per_answer": 8.0, "standby_cpu_ms_per_answer": 0.5,
        "service_cpu_ms_per_answer": 30.0,
    }  # fmt: skip
    result = {
        "runs": [
            run | {"arm": "primary"},
            run | {"arm": "standby", "primary_cpu_ms_per_answer": 6.0, "standby_reads": 30},
        ],
        "standby_over_primary": {"primary_cpu_ms_per_answer": 0.75, "answered_rps": 1.0, "ask_p95_ms": 1.0},
    }
    text = format_comparison(result)
    assert "round 1 primary: 10 questions answered" in text and "primary 6.0 ms" in text
    assert "standby reads 30" in text and "primary CPU per answered question 0.75" in text


@pytest.mark.db
@pytest.mark.slow
def test_a_short_comparison_runs_both_arms_with_reads_on_the_standby() -> None:
    if os.environ.get("LIVINGRAG_TEST_DB_URL"):
        pytest.skip("starts its own embedded servers")
    cmd = [sys.executable, "-m", "livingrag.cli.main", "bench", "api", "--compare-standby", "--clients", "2",
           "--seconds", "3", "--add-every", "4", "--json"]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIVINGRAG_DB__")}
    run = subprocess.run(cmd, cwd=SOURCE_ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout)
    by_arm = {r["arm"]: r for r in result["runs"]}
    assert set(by_arm) == {"primary", "standby"}
    for r in by_arm.values():
        assert r["answered_questions"] > 0 and r["server_errors"] == 0
        assert r["primary_cpu_s"] > 0 and r["service_cpu_ms_per_answer"] > 0
    # the service of the standby arm read from the standby: about three reads per question
    assert by_arm["standby"]["standby_reads"] >= 2 * by_arm["standby"]["answered_questions"]
    assert "primary_cpu_ms_per_answer" in result["standby_over_primary"]
