"""Per-tenant fairness over HTTP: quotas on corpora, passages and experiences (409
``quota_exceeded`` naming the quota, nothing half-written), a tenant's own in-flight cap and
request rate (429 with ``Retry-After``) that leave another tenant alone, and changes to one
tenant's corpus that never hold up another tenant's changes or ``/health``."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
from sqlalchemy import text

from livingrag.db.engine import Database
from livingrag.db.repositories import tenants
from livingrag.testing.openai_server import OpenAICompatServer
from tests.api_support import api_settings, app_client, auth, flush, seed_corpus
from tests.corpus_support import CORPUS, QUESTIONS

pytestmark = pytest.mark.db


def _tenant(db: Database) -> tuple[int, str]:
    with db.owner_session() as s:
        rec, key = tenants.create_tenant(s, f"fair-{uuid.uuid4().hex[:8]}")
    return rec.id, key


def _passages(db: Database, cid: int) -> int:
    with db.owner_session() as s:
        return int(s.execute(text("SELECT count(*) FROM passages WHERE corpus_id = :c"), {"c": cid}).scalar_one())


def _quota_error(r: Any, setting: str, value: int) -> None:
    assert r.status_code == 409, r.text
    err = r.json()["error"]
    assert err["code"] == "quota_exceeded" and f"{setting} = {value}" in err["message"], err


def test_corpus_quota_is_409_naming_it_and_per_tenant(db: Database, database_url: str) -> None:
    with OpenAICompatServer() as llm:
        settings = api_settings(database_url, llm.base_url, api={"max_corpora_per_tenant": 2})
        with app_client(db, settings) as client:
            _, a = _tenant(db)
            _, b = _tenant(db)
            for name in ("one", "two"):
                assert client.post("/v1/corpora", json={"name": name}, headers=auth(a)).status_code == 201
            _quota_error(client.post("/v1/corpora", json={"name": "three"}, headers=auth(a)),
                         "api.max_corpora_per_tenant", 2)  # fmt: skip
            assert len(client.get("/v1/corpora", headers=auth(a)).json()["items"]) == 2
            assert client.post("/v1/corpora", json={"name": "one"}, headers=auth(b)).status_code == 201


def test_passage_quota_refuses_a_batch_whole(db: Database, database_url: str) -> None:
    with OpenAICompatServer() as llm:
        settings = api_settings(database_url, llm.base_url, api={"max_passages_per_corpus": 4})
        with app_client(db, settings) as client:
            _, key = _tenant(db)
            cid = seed_corpus(client, key, docs=CORPUS[:3])
            r = client.post(f"/v1/corpora/{cid}/passages", json={"passages": CORPUS[3:5]}, headers=auth(key))
            _quota_error(r, "api.max_passages_per_corpus", 4)
            assert _passages(db, cid) == 3  # nothing of the refused batch
            # passages the corpus already holds are not new: resending them is no quota matter
            r = client.post(f"/v1/corpora/{cid}/passages", json={"passages": CORPUS[:4]}, headers=auth(key))
            assert r.status_code == 201 and r.json()["indexed"] == 1, r.text
            # full: an index job is refused at once
            r = client.post(f"/v1/corpora/{cid}/index-jobs", json={"documents": CORPUS[5:6]}, headers=auth(key))
            _quota_error(r, "api.max_passages_per_corpus", 4)
            # a job whose batch would pass the quota fails whole, naming it
            cid2 = seed_corpus(client, key, name="two", docs=CORPUS[:2])
            r = client.post(f"/v1/corpora/{cid2}/index-jobs", json={"documents": CORPUS[2:5]}, headers=auth(key))
            assert r.status_code == 202, r.text
            client.app.state.services.jobs.wait(60)
            job = client.get(f"/v1/index-jobs/{r.json()['id']}", headers=auth(key)).json()
            assert job["state"] == "failed" and "api.max_passages_per_corpus = 4" in job["error"], job
            assert _passages(db, cid2) == 2


def test_experience_quota_logs_the_candidate_as_dropped_naming_it(db: Database, database_url: str) -> None:
    with OpenAICompatServer() as llm:
        settings = api_settings(database_url, llm.base_url, api={"max_experiences_per_tenant": 1})
        with app_client(db, settings) as client:
            tid, key = _tenant(db)
            cid = seed_corpus(client, key)
            for q, _ in QUESTIONS[:3]:
                r = client.post("/v1/ask", json={"question": q, "corpus": cid, "ablations": ["gate"]},
                                headers=auth(key))  # fmt: skip
                assert r.status_code == 200, r.text
            flush(client)
    with db.owner_session() as s:
        n_exp = s.execute(text("SELECT count(*) FROM experiences WHERE tenant_id = :t"), {"t": tid}).scalar_one()
        rows = s.execute(
            text("SELECT decision, reason FROM writeback_log WHERE tenant_id = :t ORDER BY id"), {"t": tid}
        ).all()
    assert n_exp == 1
    assert [d for d, _ in rows] == ["stored", "dropped", "dropped"]
    assert all("api.max_experiences_per_tenant = 1" in r for d, r in rows if d == "dropped")


def test_a_tenant_over_its_in_flight_cap_gets_429_and_another_tenant_is_answered(
    db: Database, database_url: str
) -> None:
    with OpenAICompatServer(default_delay_s=1.0) as llm:
        settings = api_settings(database_url, llm.base_url, api={"tenant_max_inflight": 2, "max_inflight": 64})
        with app_client(db, settings) as client:
            _, a = _tenant(db)
            _, b = _tenant(db)
            ca, cb = seed_corpus(client, a), seed_corpus(client, b)
            out: list[tuple[str, Any]] = []
            lock = threading.Lock()

            def ask(who: str, key: str, cid: int, i: int) -> None:
                body = {"question": f"{QUESTIONS[i % 3][0]} ({i})", "corpus": cid, "mode": "linear"}
                r = client.post("/v1/ask", json=body, headers=auth(key))
                with lock:
                    out.append((who, r))

            flood = [threading.Thread(target=ask, args=("a", a, ca, i)) for i in range(6)]
            for t in flood:
                t.start()
            time.sleep(0.3)  # A's first two hold its slots (the LLM takes 1 s)
            ask("b", b, cb, 0)
            for t in flood:
                t.join(30)
    a_codes = sorted(r.status_code for w, r in out if w == "a")
    assert [r.status_code for w, r in out if w == "b"] == [200]
    assert a_codes.count(200) >= 2 and 429 in a_codes and set(a_codes) <= {200, 429}
    refused = next(r for w, r in out if w == "a" and r.status_code == 429)
    assert "api.tenant_max_inflight" in refused.json()["error"]["message"] and refused.headers["retry-after"] == "1"


def test_the_request_rate_is_per_tenant_with_retry_after(db: Database, database_url: str) -> None:
    with OpenAICompatServer() as llm:
        settings = api_settings(database_url, llm.base_url, api={"tenant_rate_per_s": 0.25, "tenant_burst": 2})
        with app_client(db, settings) as client:
            _, a = _tenant(db)
            _, b = _tenant(db)
            codes = [client.get("/v1/corpora", headers=auth(a)).status_code for _ in range(2)]
            r = client.get("/v1/corpora", headers=auth(a))
            assert codes == [200, 200] and r.status_code == 429, r.text
            assert (
                r.json()["error"]["code"] == "rate_limited" and "api.tenant_rate_per_s" in r.json()["error"]["message"]
            )
            assert r.headers["retry-after"] in ("3", "4")  # one token at 0.25/s, less the time since
            assert client.get("/v1/corpora", headers=auth(b)).status_code == 200
            assert client.get("/health").status_code == 200  # no key, no bucket


def test_a_change_to_one_corpus_holds_up_neither_another_tenant_nor_health(db: Database, database_url: str) -> None:
    with OpenAICompatServer() as llm:
        settings = api_settings(database_url, llm.base_url, api={"index_lock_wait_s": 0.5})
        with app_client(db, settings) as client:
            _, a = _tenant(db)
            _, b = _tenant(db)
            ca, cb = seed_corpus(client, a, docs=CORPUS[:2]), seed_corpus(client, b, docs=CORPUS[:2])
            svc = client.app.state.services
            held, release = threading.Event(), threading.Event()

            def long_change() -> None:  # what a long index job of tenant A does: hold A's corpus
                with svc.index_locks.hold(ca, None):
                    held.set()
                    release.wait(30)

            t = threading.Thread(target=long_change)
            t.start()
            try:
                assert held.wait(5)
                t0 = time.monotonic()
                r = client.post(f"/v1/corpora/{cb}/passages", json={"passages": CORPUS[2:3]}, headers=auth(b))
                assert r.status_code == 201, r.text
                assert client.get("/health").status_code == 200
                assert time.monotonic() - t0 < 10
                t0 = time.monotonic()
                r = client.post(f"/v1/corpora/{ca}/passages", json={"passages": CORPUS[2:3]}, headers=auth(a))
                waited = time.monotonic() - t0
                assert r.status_code == 429 and r.json()["error"]["code"] == "index_busy", r.text
                assert r.headers["retry-after"] == "1" and 0.4 < waited < 5
                assert _passages(db, ca) == 2
            finally:
                release.set()
                t.join(10)
            r = client.post(f"/v1/corpora/{ca}/passages", json={"passages": CORPUS[2:3]}, headers=auth(a))
            assert r.status_code == 201, r.text


def test_health_answers_while_every_request_thread_is_taken(db: Database, database_url: str) -> None:
    import anyio.to_thread

    with OpenAICompatServer() as llm:
        settings = api_settings(database_url, llm.base_url, api={"index_lock_wait_s": 3.0})
        with app_client(db, settings) as client:
            _, a = _tenant(db)
            ca = seed_corpus(client, a, docs=CORPUS[:2])
            svc = client.app.state.services
            held, release = threading.Event(), threading.Event()

            async def set_threads(n: int) -> int:
                limiter = anyio.to_thread.current_default_thread_limiter()
                old = int(limiter.total_tokens)
                limiter.total_tokens = n
                return old

            def hold_corpus() -> None:
                with svc.index_locks.hold(ca, None):
                    held.set()
                    release.wait(30)

            holder = threading.Thread(target=hold_corpus)
            holder.start()
            assert held.wait(5)
            old = client.portal.call(set_threads, 1)  # one thread for every sync route
            waiting = threading.Thread(
                target=lambda: client.post(
                    f"/v1/corpora/{ca}/passages", json={"passages": CORPUS[2:3]}, headers=auth(a)
                )
            )
            try:
                waiting.start()
                time.sleep(0.5)  # the add now waits for the corpus on the only thread
                t0 = time.monotonic()
                r = client.get("/health")
                took = time.monotonic() - t0
                assert r.status_code == 200 and took < 1.5, (r.status_code, took)
            finally:
                release.set()
                holder.join(10)
                waiting.join(30)
                client.portal.call(set_threads, old)
