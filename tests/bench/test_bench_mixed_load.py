"""``livingrag bench mixed-load`` (:mod:`livingrag.bench.mixed_load`): the server's environment, the
answers' stage timings in the load report, and (slow) a short real run on a fresh embedded server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from livingrag.bench.http_load import _body_latencies
from livingrag.bench.mixed_load import MixedLoadConfig, format_writeback, harness_env
from livingrag.testing.server import ADMIN_KEY, SOURCE_ROOT


def test_the_server_gets_the_callers_settings_but_the_harnesss_database_llm_and_key(tmp_path: Path) -> None:
    environ = {
        "PATH": "/bin",
        "LIVINGRAG_API__TENANT_MAX_INFLIGHT": "4",
        "LIVINGRAG_DB__URL": "postgresql://elsewhere/db",
        "LIVINGRAG_DB__DATA_DIR": "runs/other",
        "LIVINGRAG_DB__POOL_SIZE": "3",
        "LIVINGRAG_LLM__PROVIDER": "local",
        "LIVINGRAG_API__ADMIN_KEY": "another",
    }
    cfg = MixedLoadConfig(server_env={"LIVINGRAG_API__TENANT_MAX_INFLIGHT": "3", "LIVINGRAG_X": "y"})
    env = harness_env(cfg, "http://127.0.0.1:9/v1", tmp_path, environ)
    assert env["LIVINGRAG_DB__DATA_DIR"] == str(tmp_path.resolve())
    assert "LIVINGRAG_DB__URL" not in env
    assert env["LIVINGRAG_DB__POOL_SIZE"] == "3"  # a setting the harness does not own passes on
    assert env["LIVINGRAG_LLM__PROVIDER"] == "openai" and env["LIVINGRAG_LLM__BASE_URL"] == "http://127.0.0.1:9/v1"
    assert env["LIVINGRAG_API__ADMIN_KEY"] == ADMIN_KEY
    assert env["LIVINGRAG_API__TENANT_MAX_INFLIGHT"] == "3"  # --env wins over the caller's
    assert env["LIVINGRAG_X"] == "y"
    assert env["PYTHONPATH"] == str(SOURCE_ROOT)
    other = harness_env(MixedLoadConfig(source=tmp_path), "http://x/v1", tmp_path, {})
    assert other["PYTHONPATH"] == str(tmp_path.resolve())  # --source: that tree's package is served


def test_an_existing_corpus_needs_its_tenant_and_data_directory(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="together"):
        MixedLoadConfig(corpus_id=1, data_dir=tmp_path)
    with pytest.raises(ValueError, match="data directory"):
        MixedLoadConfig(tenant_id=1, corpus_id=1)
    MixedLoadConfig(tenant_id=1, corpus_id=2, data_dir=tmp_path)


def test_the_answers_stage_timings_come_from_their_body() -> None:
    body = {"answer": "x", "latency_ms": {"encode": 3.5, "total": 12, "flag": True, "name": "x"}}
    assert _body_latencies(body) == {"encode": 3.5, "total": 12.0}
    assert _body_latencies({"answer": "x"}) == {} and _body_latencies("raw") == {}


def test_the_write_back_line() -> None:
    wb = {"queued": 10, "stored": 6, "rejected_novelty": 1, "rejected_grounding": 0, "experiences": 6}
    assert "10 answers queued; in the corpus 6 stored, 1 + 0 rejected" in format_writeback(wb)
    assert "undecided" not in format_writeback(wb)
    assert "3 answers undecided or dropped" in format_writeback(wb | {"undecided_or_dropped": 3})


@pytest.mark.slow
def test_a_short_mixed_load_on_a_fresh_embedded_server(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "livingrag.cli.main", "bench", "mixed-load", "--workers", "1", "--clients", "4",
           "--seconds", "5", "--add-every", "3", "--server-log", str(tmp_path / "server.log"), "--json"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=SOURCE_ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    assert out["errors"] == [] and out["ask"]["n"] > 0 and out["add"]["n"] > 0, out
    assert {"ask.encode", "ask.total", "add.index"} <= set(out["stages_ms"]), out["stages_ms"]
    assert out["writeback"]["queued"] > 0 and out["writeback"]["stored"] > 0, out["writeback"]
    assert out["settings"]["workers"] == 1 and out["settings"]["corpus"] == "seeded"
