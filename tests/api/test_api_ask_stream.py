"""``POST /v1/ask`` with ``"stream": true``: server-sent events over a real PostgreSQL and the loopback
OpenAI-compatible LLM streaming its reply a word at a time.

Token events come as the model makes them, then one ``answer`` event whose answer, passages and
citations equal the whole (non-streamed) answer's, with the write-back decision; a failure before
the first token keeps its HTTP status and JSON body; one after it is an ``error`` event with the safe
message and the request id; the question's slots are given back either way."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from livingrag.db.engine import Database
from livingrag.testing.openai_server import OpenAICompatServer, Step, qa_reply
from tests.api_support import ADMIN_KEY, api_settings, app_client, auth, seed_corpus

pytestmark = pytest.mark.db

QUESTION = "Who directed Silver Harbor?"


@pytest.fixture(scope="module")
def llm() -> Iterator[OpenAICompatServer]:
    with OpenAICompatServer(responder=qa_reply) as server:
        yield server


@pytest.fixture(scope="module")
def client(db: Database, database_url: str, llm: OpenAICompatServer) -> Iterator[TestClient]:
    settings = api_settings(database_url, llm.base_url, api={"tenant_max_inflight": 1})
    with app_client(db, settings) as c:
        yield c


@pytest.fixture
def tenant(client: TestClient) -> tuple[str, int]:
    r = client.post("/v1/tenants", json={"name": f"st-{uuid.uuid4().hex[:8]}"}, headers=auth(ADMIN_KEY))
    assert r.status_code == 201, r.text
    key = r.json()["api_key"]
    return key, seed_corpus(client, key)


def events(client: TestClient, key: str, body: dict[str, Any]) -> tuple[int, str, list[tuple[str, Any]]]:
    """The response's status, content type and its server-sent events as (event, data) pairs."""
    out: list[tuple[str, Any]] = []
    with client.stream("POST", "/v1/ask", json=body | {"stream": True}, headers=auth(key)) as r:
        kind = "message"
        lines = list(r.iter_lines())
        status, ctype = r.status_code, r.headers.get("content-type", "")
    if not ctype.startswith("text/event-stream"):
        return status, ctype, [("body", json.loads("".join(lines)))]
    for line in lines:
        if line.startswith("event: "):
            kind = line[len("event: ") :]
        elif line.startswith("data: "):
            out.append((kind, json.loads(line[len("data: ") :])))
    return status, ctype, out


def test_tokens_then_one_answer_event_equal_to_the_whole_answer(client: TestClient, tenant: tuple[str, int]) -> None:
    key, cid = tenant
    body = {"question": QUESTION, "corpus": cid, "mode": "linear"}
    whole = client.post("/v1/ask", json=body, headers=auth(key))
    assert whole.status_code == 200, whole.text
    status, ctype, got = events(client, key, body)
    assert status == 200 and ctype.startswith("text/event-stream")
    kinds = [k for k, _ in got]
    assert kinds.count("token") >= 2 and kinds[-1] == "answer" and kinds.count("answer") == 1
    assert set(kinds) == {"token", "answer"}
    final = got[-1][1]
    text = "".join(d["text"] for k, d in got if k == "token")
    assert text.startswith("Thought: ") and text.rstrip().endswith(final["answer"])
    expected = whole.json()
    for field in ("answer", "explanation", "system", "passages", "citations"):
        assert final[field] == expected[field], field
    assert final["citations"] and final["citations"][0]["number"] == 1
    assert final["query_id"] and final["query_id"] != expected["query_id"]
    assert final["writeback"] == "none" and final["writeback_decision"] is None


def test_living_answer_event_carries_the_write_back_decision(client: TestClient, tenant: tuple[str, int]) -> None:
    key, cid = tenant
    status, _, got = events(client, key, {"question": QUESTION, "corpus": cid})
    assert status == 200
    final = got[-1][1]
    decision = final["writeback_decision"]
    assert final["writeback"] == "queued" and decision["query_log_id"] == final["query_id"]
    assert decision["decision"] in {"stored", "rejected_novelty", "rejected_grounding"}
    assert decision["grounding"] is not None and decision["tau_gs"] > 0
    assert client.get(f"/v1/queries/{final['query_id']}/writeback", headers=auth(key)).json() == decision


def test_failures_before_the_first_token_keep_their_status(
    client: TestClient, tenant: tuple[str, int], llm: OpenAICompatServer
) -> None:
    key, cid = tenant
    status, ctype, got = events(client, key, {"question": QUESTION, "corpus": 999_999_999})
    assert (status, got[0][1]["error"]["code"]) == (404, "not_found") and ctype.startswith("application/json")
    status, _, got = events(client, key, {"question": "   ", "corpus": cid})
    assert status == 422 and "question" in got[0][1]["error"]["message"]
    llm.script.append(Step(status=503))
    status, _, got = events(client, key, {"question": QUESTION, "corpus": cid})
    assert (status, got[0][1]["error"]["code"]) == (503, "llm_unavailable")
    assert "request id" in got[0][1]["error"]["message"] and "127.0.0.1" not in got[0][1]["error"]["message"]


def test_failure_after_tokens_is_an_error_event_and_the_slots_come_back(
    client: TestClient, tenant: tuple[str, int], llm: OpenAICompatServer
) -> None:
    key, cid = tenant
    llm.script.append(Step(stream_error_after=2, error_message="upstream detail that must stay in the log"))
    status, _, got = events(client, key, {"question": QUESTION, "corpus": cid})
    assert status == 200 and [k for k, _ in got] == ["token", "token", "error"]
    error = got[-1][1]
    assert error["status"] == 502 and error["error"]["code"] == "llm_error"
    assert error["error"]["request_id"] and "upstream detail" not in error["error"]["message"]
    # tenant_max_inflight is 1: the failed stream gave its slot back, so the next question is answered
    status, _, got = events(client, key, {"question": QUESTION, "corpus": cid, "mode": "linear"})
    assert status == 200 and got[-1][0] == "answer"


@pytest.fixture
def live_url(client: TestClient) -> Iterator[str]:
    """The same app served by uvicorn on loopback (real connections: a client can go away)."""
    import uvicorn

    from livingrag.testing.server import free_port

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(client.app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.perf_counter() + 30
    while not server.started and time.perf_counter() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


def test_a_client_that_goes_away_stops_the_generation(
    client: TestClient, live_url: str, tenant: tuple[str, int], llm: OpenAICompatServer
) -> None:
    """The client reads one token and closes the connection: the LLM's stream is closed at its next
    token (long before the reply's end), and the question's slot comes back."""
    key, cid = tenant
    llm.script.append(Step(token_delay_s=0.25))  # qa_reply's reply here is ~15 words: ~4 s in all
    body = {"question": QUESTION, "corpus": cid, "mode": "linear", "stream": True}
    started = time.perf_counter()
    with httpx.stream("POST", live_url + "/v1/ask", json=body, headers=auth(key), timeout=30) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: "):
                break
    deadline = time.perf_counter() + 10
    while llm.in_flight and time.perf_counter() < deadline:
        time.sleep(0.05)
    assert llm.in_flight == 0 and time.perf_counter() - started < 2.5
    status, _, got = events(client, key, {"question": QUESTION, "corpus": cid, "mode": "linear"})
    assert status == 200 and got[-1][0] == "answer"
