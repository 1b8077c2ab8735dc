"""``livingrag ask --json`` and ``livingrag demo --json`` end to end: real PostgreSQL, the packaged
retrieval models, and the loopback OpenAI-compatible server as the LLM, configured through the
environment exactly as a user would (``LIVINGRAG_LLM__PROVIDER=openai``, ``..._BASE_URL``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from livingrag.cli.main import app
from livingrag.db.engine import Database
from livingrag.errors import InvalidInput, NotFound
from livingrag.testing.openai_server import OpenAICompatServer, qa_reply
from tests.conftest import loopback_llm_env
from tests.corpus_support import tenant_with_small_corpus

pytestmark = [pytest.mark.db, pytest.mark.slow]
runner = CliRunner()


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAICompatServer]:
    with OpenAICompatServer(responder=qa_reply) as srv:
        yield srv


@pytest.fixture(scope="module")
def corpus_tenant(db: Database) -> tuple[int, str]:
    """A tenant (its name) with the small test corpus indexed as ``small``."""
    return tenant_with_small_corpus(db, "ask")


@pytest.fixture
def llm_env(database_url: str, server: OpenAICompatServer, monkeypatch: pytest.MonkeyPatch) -> None:
    loopback_llm_env(monkeypatch, database_url, server.base_url, verifier="offline")


def ask(*args: str) -> dict[str, Any]:
    res = runner.invoke(app, ["ask", *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_ask_json_living_reuse_and_linear(
    llm_env: None,
    db: Database,
    corpus_tenant: tuple[int, str],
    server: OpenAICompatServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tenant_id, tenant = corpus_tenant
    first = ask("--tenant", tenant, "--corpus", "small", "Where was the director of Silver Harbor born?")
    assert first["system"] == "living"
    assert first["answer"] == first["passages"][0]["title"]  # the loopback server answers with passage [1]
    assert first["prompt_tokens"] > 0 and first["completion_tokens"] > 0 and first["cost_usd"] > 0
    assert first["latency_ms"]["overhead"] > 0 and first["latency_ms"]["llm"] > 0
    assert first["fused_experiences"] == [] and first["scaffold"] is None
    # the loopback's answer (a film's title for "where was ... born") is not grounded: the offline
    # verifier finds no window stating "born" with it
    assert first["writeback"]["decision"] == "rejected_grounding" and first["writeback"]["verifier"] == "offline"
    ungated = ask(
        "--tenant", tenant, "--corpus", "small", "--no", "gate", "Where was the director of Silver Harbor born?"
    )
    assert ungated["writeback"]["decision"] == "stored"  # written back without the gates (the ablation)
    exp_id = ungated["writeback"]["experience_id"]

    town = "In which town was the director of Silver Harbor born?"
    shown = ask("--tenant", tenant, "--corpus", "small", town)
    # fused (experience.fusion_from=active), but an ungated experience is not shown in the prompt
    # (experience.scaffolds_from=gated)
    assert exp_id in [e["id"] for e in shown["fused_experiences"]] and shown["findings"] == []
    monkeypatch.setenv("LIVINGRAG_EXPERIENCE__SCAFFOLDS_FROM", "active")
    second = ask("--tenant", tenant, "--corpus", "small", town)
    assert exp_id in [e["id"] for e in second["fused_experiences"]]
    # the earlier experience is stated as a finding with its names (and so not again as the scaffold)
    assert [f["id"] for f in second["findings"]] == [exp_id] and second["scaffold"] is None
    prompt = server.requests[-1]["body"]["messages"][-1]["content"]
    assert "Facts found earlier" in prompt and "- Where was the director of Silver Harbor born?" in prompt

    linear = ask("--tenant", tenant, "--corpus", "small", "--mode", "linear", "Who founded the Aurora Quartet?")
    assert linear["system"] == "linear" and linear["writeback"] is None
    assert linear["fused_experiences"] == [] and linear["scaffold"] is None

    with db.tenant_session(tenant_id) as s:
        modes = s.execute(text("SELECT mode FROM query_log ORDER BY id")).scalars().all()
    assert modes == ["living", "living-no-gate", "living", "living", "linear"]


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        (["--corpus", "no-such-corpus", "Who founded the Aurora Quartet?"], NotFound, "no-such-corpus"),
        (["--corpus", "small", "   "], InvalidInput, "question is empty"),
        (["--corpus", "small", "--no", "rerank", "Who?"], InvalidInput, "unknown ablation 'rerank'"),
    ],
)
def test_ask_refuses_bad_input(
    llm_env: None,
    db: Database,
    corpus_tenant: tuple[int, str],
    server: OpenAICompatServer,
    args: list[str],
    error: type[Exception],
    message: str,
) -> None:
    tenant_id, tenant = corpus_tenant
    with db.tenant_session(tenant_id) as s:
        before = s.execute(text("SELECT count(*) FROM query_log")).scalar()
    n_req = len(server.requests)
    res = runner.invoke(app, ["ask", "--tenant", tenant, *args, "--json"])
    assert res.exit_code != 0
    assert isinstance(res.exception, error) and message in str(res.exception)
    with db.tenant_session(tenant_id) as s:
        assert s.execute(text("SELECT count(*) FROM query_log")).scalar() == before
    assert len(server.requests) == n_req


def test_demo_json_with_the_loopback_llm(llm_env: None, server: OpenAICompatServer) -> None:
    n_req = len(server.requests)
    res = runner.invoke(app, ["demo", "--limit", "2", "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["questions"] == 2 and len(report["rows"]) == 2
    assert set(report["systems"]) == {"linear", "living"}
    for system in report["systems"].values():
        assert system["prompt_tokens"] > 0 and system["completion_tokens"] > 0
    assert len(server.requests) == n_req + 4  # two questions, each through both systems
    assert sum(report["writeback"].values()) == 2  # one living write-back per question
    assert report["verifier"] == "offline"
    # the reuse counts, findings included, each at most the number of questions
    for k in ("queries_with_fusion", "queries_with_scaffold", "queries_with_findings"):
        assert 0 <= report[k] <= 2
    res = runner.invoke(app, ["demo", "--limit", "2"])
    assert res.exit_code == 0 and "(findings)" in res.stdout


def test_demo_reports_a_failed_answer_and_goes_on(llm_env: None, server: OpenAICompatServer) -> None:
    """An LLM failure (here HTTP 503 from the server, as a crashed local model reads) is reported in its
    row; the other answers are still given and the demo exits 1 after the whole report."""
    from livingrag.testing.openai_server import Step

    server.script.append(Step(status=503, error_message="model process crashed"))  # the first question's linear
    res = runner.invoke(app, ["demo", "--limit", "2", "--json"])
    assert res.exit_code == 1, res.output
    report = json.loads(res.stdout)
    assert report["failed_answers"] == 1 and len(report["rows"]) == 2
    first, second = report["rows"]
    assert first["linear"] is None and first["linear_correct"] is False
    assert "HTTP 503" in first["errors"]["linear"] and "model process crashed" in first["errors"]["linear"]
    assert first["living"] is not None and second["linear"] is not None and second["errors"] == {}
    assert "1 of 4 answers failed" in res.stderr


def test_ask_streams_the_models_text_then_the_formatted_answer(
    llm_env: None, corpus_tenant: tuple[int, str], server: OpenAICompatServer
) -> None:
    """``--stream`` prints the model's text as it comes (the server sends it a word at a time), then
    the answer, its explanation and numbered sources; ``--no-stream`` and ``--json`` print no raw text."""
    _, tenant = corpus_tenant
    question = "Where was the director of Silver Harbor born?"
    res = runner.invoke(app, ["ask", "--tenant", tenant, "--corpus", "small", "--mode", "linear", "--stream", question])
    assert res.exit_code == 0, res.output
    assert server.requests[-1]["body"].get("stream") is True
    # the model's own text as it was made ("Thought: ... Answer: ..."), then the formatted answer
    assert res.stdout.startswith("Thought: ") and res.stdout.count("Answer: ") == 2
    assert "Sources:" in res.stdout and "[1] " in res.stdout
    res = runner.invoke(
        app, ["ask", "--tenant", tenant, "--corpus", "small", "--mode", "linear", "--no-stream", question]
    )
    assert res.exit_code == 0 and res.stdout.startswith("Answer: ") and "Thought:" not in res.stdout
    assert "stream" not in server.requests[-1]["body"]
    assert (
        "Thought:"
        not in ask("--tenant", tenant, "--corpus", "small", "--mode", "linear", "--stream", question)["answer"]
    )
