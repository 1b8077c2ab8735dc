"""HTTP API under faults of its dependencies: the LLM server down or slow (a clear 503/504 within
the configured timeout, nothing stored), a failing grounding verifier (the answer is still
returned, the decision logged as an error), and too many questions at once (429)."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from sqlalchemy import text

from livingrag.db.engine import Database
from livingrag.db.repositories import tenants
from livingrag.experience.grounding import Claim
from livingrag.experience.store import ExperienceStore
from livingrag.experience.types import ClaimVerdict, UsedPassage
from livingrag.testing.openai_server import OpenAICompatServer, Step
from tests.api_support import api_settings, app_client, auth, flush, free_port, seed_corpus
from tests.corpus_support import QUESTIONS

pytestmark = pytest.mark.db


class BrokenVerifier:
    """A grounding verifier whose model crashed."""

    name = "broken"

    def verify(self, claims: Sequence[Claim], passages: Sequence[UsedPassage]) -> list[ClaimVerdict]:
        raise RuntimeError("verifier model crashed")


def _tenant(db: Database) -> tuple[int, str]:
    with db.owner_session() as s:
        rec, key = tenants.create_tenant(s, f"faults-{uuid.uuid4().hex[:8]}")
    return rec.id, key


def _rows(db: Database, tenant_id: int) -> dict[str, int]:
    with db.owner_session() as s:
        return {
            t: s.execute(text(f"SELECT count(*) FROM {t} WHERE tenant_id = :t"), {"t": tenant_id}).scalar_one()
            for t in ("experiences", "experience_entities", "writeback_log")
        }


def _ask(client: Any, key: str, cid: int, q: str = QUESTIONS[0][0], **extra: Any) -> tuple[Any, float]:
    t = time.perf_counter()
    r = client.post("/v1/ask", json={"question": q, "corpus": cid} | extra, headers=auth(key))
    return r, time.perf_counter() - t


def test_llm_server_down_is_503_fast_and_stores_nothing(db: Database, database_url: str) -> None:
    down = f"http://127.0.0.1:{free_port()}/v1"  # nobody listens there
    with app_client(db, api_settings(database_url, down, llm={"timeout_s": 3.0})) as client:
        tid, key = _tenant(db)
        cid = seed_corpus(client, key)
        before = _rows(db, tid)
        r, took = _ask(client, key, cid, ablations=["gate"])
        assert r.status_code == 503, r.text
        assert r.json()["error"]["code"] == "llm_unavailable" and r.headers["retry-after"]
        assert took < 3.0
        flush(client)
        assert _rows(db, tid) == before
        with db.owner_session() as s:
            answer, error = s.execute(
                text("SELECT answer, error FROM query_log WHERE tenant_id = :t ORDER BY id DESC LIMIT 1"), {"t": tid}
            ).one()
        assert answer is None and "LLMUnavailable" in error  # the failure is logged, not an experience


def test_slow_llm_is_504_within_the_timeout_and_stores_nothing(db: Database, database_url: str) -> None:
    with OpenAICompatServer(default_delay_s=5.0) as llm:
        settings = api_settings(database_url, llm.base_url, llm={"timeout_s": 1.0})
        with app_client(db, settings) as client:
            tid, key = _tenant(db)
            cid = seed_corpus(client, key)
            before = _rows(db, tid)
            r, took = _ask(client, key, cid, ablations=["gate"])
            assert r.status_code == 504, r.text
            assert r.json()["error"]["code"] == "llm_timeout" and "timeout" in r.json()["error"]["message"].lower()
            assert 1.0 <= took < 3.0
            flush(client)
            assert _rows(db, tid) == before


def test_failing_verifier_still_answers_and_logs_an_error(db: Database, database_url: str) -> None:
    with OpenAICompatServer() as llm:
        settings = api_settings(database_url, llm.base_url)
        store = ExperienceStore(db, settings, verifier=BrokenVerifier())
        with app_client(db, settings, store=store) as client:
            tid, key = _tenant(db)
            cid = seed_corpus(client, key)
            r, _ = _ask(client, key, cid)
            assert r.status_code == 200, r.text
            assert r.json()["answer"] and r.json()["writeback"] == "queued"
            flush(client)
    with db.owner_session() as s:
        rows = s.execute(
            text("SELECT decision, reason, query_log_id FROM writeback_log WHERE tenant_id = :t"), {"t": tid}
        ).all()
        n_exp = s.execute(text("SELECT count(*) FROM experiences WHERE tenant_id = :t"), {"t": tid}).scalar_one()
    assert [(d, q) for d, _, q in rows] == [("error", r.json()["query_log_id"])]
    assert "verifier model crashed" in rows[0][1]
    assert n_exp == 0


def test_more_questions_than_slots_get_429_not_a_queue(db: Database, database_url: str) -> None:
    with OpenAICompatServer(default_delay_s=1.5) as llm:
        settings = api_settings(database_url, llm.base_url, api={"max_inflight": 2})
        with app_client(db, settings) as client:
            _, key = _tenant(db)
            cid = seed_corpus(client, key)
            codes: list[int] = []
            lock = threading.Lock()

            def one(i: int) -> None:
                r, _ = _ask(client, key, cid, q=f"{QUESTIONS[i % 3][0]} ({i})", mode="linear")
                with lock:
                    codes.append(r.status_code)
                if r.status_code == 429:
                    assert r.json()["error"]["code"] == "too_many_requests" and r.headers["retry-after"]

            threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
    assert sorted(set(codes)) == [200, 429] and codes.count(200) >= 2


def test_full_writeback_queue_drops_and_logs_but_answers(db: Database, database_url: str) -> None:
    from livingrag.db.repositories.experiences import LOCK_NAMESPACE

    with OpenAICompatServer() as llm:
        settings = api_settings(database_url, llm.base_url, api={"writeback_queue_size": 1})
        with app_client(db, settings) as client:
            tid, key = _tenant(db)
            cid = seed_corpus(client, key)
            with db.owner_engine.connect() as holder:  # block write-backs of this corpus in their transaction
                holder.execute(text("SELECT pg_advisory_lock(:n, :k)"), {"n": LOCK_NAMESPACE, "k": cid})
                holder.commit()
                r, _ = _ask(client, key, cid, q="Who is Elina Saari?", ablations=["gate"])
                assert r.status_code == 200
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:  # the first write-back waits for the lock
                    waiting = holder.execute(
                        text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
                    ).scalar()
                    if waiting:
                        break
                    time.sleep(0.05)
                for q in ("Who is Olaf Renning?", "Where is Kiruna?", "Where is Lindenport?"):
                    r, _ = _ask(client, key, cid, q=q, ablations=["gate"])
                    assert r.status_code == 200 and r.json()["answer"]  # answering never waits for the queue
                holder.execute(text("SELECT pg_advisory_unlock(:n, :k)"), {"n": LOCK_NAMESPACE, "k": cid})
                holder.commit()
            flush(client)
    with db.owner_session() as s:
        decisions = s.execute(
            text("SELECT decision, reason FROM writeback_log WHERE tenant_id = :t ORDER BY id"), {"t": tid}
        ).all()
    assert sorted(d for d, _ in decisions) == ["dropped", "dropped", "stored", "stored"]
    assert all(r == "write-back queue is full" for d, r in decisions if d == "dropped")


def test_server_side_failures_tell_the_tenant_a_safe_message_and_log_the_detail_by_request_id(
    db: Database, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An upstream LLM error body and the LLM's address stay in the server log; the tenant gets the
    code, a fixed message and the request id (body and X-Request-ID), which the log line names."""
    llm = OpenAICompatServer()
    with llm, app_client(db, api_settings(database_url, llm.base_url, llm={"max_retries": 0})) as client:
        _, key = _tenant(db)
        cid = seed_corpus(client, key)
        llm.script.extend(Step(status=400, error_message="SECRET-UPSTREAM-DETAIL") for _ in range(4))
        with caplog.at_level(logging.WARNING, logger="livingrag.api.errors"):
            r, _ = _ask(client, key, cid, ablations=["gate"])
        assert r.status_code >= 500, r.text
        err = r.json()["error"]
        assert err["request_id"] == r.headers["x-request-id"] and len(err["request_id"]) >= 16
        assert err["request_id"] in err["message"]
        for leak in ("SECRET-UPSTREAM-DETAIL", llm.base_url, "127.0.0.1", "Traceback"):
            assert leak not in r.text
        logged = [rec.getMessage() for rec in caplog.records if err["request_id"] in rec.getMessage()]
        assert logged and "SECRET-UPSTREAM-DETAIL" in logged[0]
        # a client error still says what was wrong, and a client's own request id comes back
        r = client.post("/v1/ask", json={"question": "", "corpus": cid}, headers=auth(key) | {"X-Request-ID": "req-42"})
        assert r.status_code == 422 and "question" in r.json()["error"]["message"]
        assert r.headers["x-request-id"] == "req-42" == r.json()["error"]["request_id"]
        bad = client.get("/health", headers={"X-Request-ID": "bad id with spaces"})
        assert bad.headers["x-request-id"] != "bad id with spaces"


def test_a_failed_index_job_names_input_errors_but_not_server_details() -> None:
    from livingrag.corpus.index_jobs import job_error_message
    from livingrag.errors import InvalidInput

    assert job_error_message("j1", InvalidInput("document 3 has no text")) == "InvalidInput: document 3 has no text"
    msg = job_error_message("j2", RuntimeError("connection to postgresql://app:pw@db.internal:5432 refused"))
    assert "db.internal" not in msg and "pw" not in msg and "j2" in msg and "RuntimeError" in msg
