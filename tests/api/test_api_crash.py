"""A real ``livingrag serve`` process killed with -9 during write-back and during indexing, then
restarted: no partial rows, lost write-back candidates logged as dropped (one decision per
answered question), and the index job the killed process was running is taken over after the
restart (it is in the database) and completes without duplicates."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from livingrag.db.engine import Database
from livingrag.db.repositories.experiences import LOCK_NAMESPACE
from livingrag.db.repositories.recovery import LOST_REASON
from livingrag.testing.openai_server import OpenAICompatServer
from tests.api_support import ADMIN_KEY, Server, auth, server_env
from tests.corpus_support import CORPUS, QUESTIONS

pytestmark = pytest.mark.db


def _wait(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _setup(url: str, name: str) -> tuple[int, str, int]:
    r = httpx.post(url + "/v1/tenants", json={"name": name}, headers=auth(ADMIN_KEY), timeout=30)
    assert r.status_code == 201, r.text
    tid, key = r.json()["id"], r.json()["api_key"]
    r = httpx.post(url + "/v1/corpora", json={"name": "wiki"}, headers=auth(key), timeout=30)
    cid = r.json()["id"]
    r = httpx.post(url + f"/v1/corpora/{cid}/passages", json={"passages": CORPUS}, headers=auth(key), timeout=120)
    assert r.status_code == 201, r.text
    return tid, key, cid


def _scalar(db: Database, sql: str, **params: Any) -> Any:
    with db.owner_session() as s:
        return s.execute(text(sql), params).scalar()


def test_kill9_during_writeback_then_restart(db: Database, database_url: str, tmp_path: Path) -> None:
    with OpenAICompatServer() as llm:
        env = server_env(database_url, llm.base_url, LIVINGRAG_API__RECOVERY_GRACE_S="0",
                         LIVINGRAG_DB__DATA_DIR=str(tmp_path))  # fmt: skip
        srv = Server(env, log_path=tmp_path / "server.log").start()
        try:
            tid, key, cid = _setup(srv.url, f"crash-wb-{int(time.time() * 1000)}")
            # Hold the corpus's write-back lock: write-backs block inside their transaction.
            with db.owner_engine.connect() as holder:
                holder.execute(text("SELECT pg_advisory_lock(:n, :k)"), {"n": LOCK_NAMESPACE, "k": cid})
                holder.commit()
                ids = []
                for q, _ in QUESTIONS:
                    r = httpx.post(srv.url + "/v1/ask", json={"question": q, "corpus": cid, "ablations": ["gate"]},
                                   headers=auth(key), timeout=60)  # fmt: skip
                    assert r.status_code == 200 and r.json()["writeback"] == "queued", r.text
                    ids.append(r.json()["query_log_id"])
                _wait(
                    lambda: (
                        _scalar(db, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted") >= 1
                    ),
                    60,
                    "a write-back blocked in its transaction",
                )
                srv.kill9()
                holder.execute(text("SELECT pg_advisory_unlock(:n, :k)"), {"n": LOCK_NAMESPACE, "k": cid})
                holder.commit()
            # No partial rows: the blocked transaction rolled back with the connection.
            _wait(lambda: _scalar(db, "SELECT count(*) FROM pg_locks WHERE NOT granted") == 0, 30, "rollback")
            for table in ("experiences", "experience_entities", "writeback_log"):
                assert _scalar(db, f"SELECT count(*) FROM {table} WHERE tenant_id = :t", t=tid) == 0, table
            srv.start()  # the restart logs the lost candidates as dropped
            with db.owner_session() as s:
                rows = s.execute(
                    text("SELECT query_log_id, decision, reason FROM writeback_log WHERE tenant_id = :t ORDER BY 1"),
                    {"t": tid},
                ).all()
            assert [r[0] for r in rows] == sorted(ids)
            assert {(r[1], r[2]) for r in rows} == {("dropped", LOST_REASON)}
            # ... and the service works on: a new answer is written back.
            body = {"question": "Who is Elina Saari?", "corpus": cid, "ablations": ["gate"]}
            r = httpx.post(srv.url + "/v1/ask", json=body, headers=auth(key), timeout=60)
            assert r.status_code == 200, r.text
            qid = r.json()["query_log_id"]
            _wait(
                lambda: _scalar(db, "SELECT decision FROM writeback_log WHERE query_log_id = :q", q=qid) == "stored",
                60,
                "the new write-back",
            )
        finally:
            srv.stop()


def _docs(n: int) -> list[dict[str, str]]:
    return [
        {"title": f"Hamlet {i}", "text": f"Hamlet {i} is a village in the Vell valley founded by Jon Arvid {i}."}
        for i in range(n)
    ]


def _consistent(db: Database, tid: int, cid: int) -> dict[str, int]:
    """Invariants of a committed graph: every passage embedded with its sentences, no dangling edges."""
    with db.owner_session() as s:
        q = lambda sql: s.execute(text(sql), {"t": tid, "c": cid}).scalar_one()  # noqa: E731
        assert q("SELECT count(*) FROM passages WHERE corpus_id = :c AND embedding IS NULL") == 0
        assert q("SELECT count(*) FROM entities WHERE corpus_id = :c AND embedding IS NULL") == 0
        assert q(
            "SELECT count(*) FROM passages p WHERE corpus_id = :c AND NOT EXISTS"
            " (SELECT 1 FROM passage_entities pe WHERE pe.passage_id = p.id)"
        ) == 0  # fmt: skip
        assert q(
            "SELECT count(*) FROM entities e WHERE corpus_id = :c AND NOT EXISTS"
            " (SELECT 1 FROM passage_entities pe WHERE pe.entity_id = e.id)"
        ) == 0  # fmt: skip
        return {
            "passages": q("SELECT count(*) FROM passages WHERE corpus_id = :c"),
            "distinct": q("SELECT count(DISTINCT content_hash) FROM passages WHERE corpus_id = :c"),
        }


def test_kill9_during_indexing_then_restart(db: Database, database_url: str, tmp_path: Path) -> None:
    n_docs, batch = 96, 8
    with OpenAICompatServer() as llm:
        env = server_env(database_url, llm.base_url, LIVINGRAG_MODELS__INDEX_BATCH_SIZE=str(batch),
                         LIVINGRAG_DB__DATA_DIR=str(tmp_path))  # fmt: skip
        srv = Server(env, log_path=tmp_path / "server.log").start()
        try:
            tid, key, _ = _setup(srv.url, f"crash-ix-{int(time.time() * 1000)}")
            cid = httpx.post(srv.url + "/v1/corpora", json={"name": "big"}, headers=auth(key)).json()["id"]
            docs = {"documents": _docs(n_docs)}
            r = httpx.post(srv.url + f"/v1/corpora/{cid}/index-jobs", json=docs, headers=auth(key), timeout=30)
            assert r.status_code == 202, r.text
            job = r.json()["id"]
            count = lambda: _scalar(db, "SELECT count(*) FROM passages WHERE corpus_id = :c", c=cid)  # noqa: E731
            _wait(lambda: count() >= 2 * batch, 120, "indexing to be under way")
            srv.kill9()
            got = _consistent(db, tid, cid)
            assert 0 < got["passages"] < n_docs and got["passages"] % batch == 0  # whole batches only
            srv.start()
            # the job is in the database: the restarted server knows it, finds its worker gone and
            # runs it again, skipping the batches the killed process had committed
            r = httpx.get(srv.url + f"/v1/index-jobs/{job}", headers=auth(key))
            assert r.status_code == 200 and r.json()["state"] in ("running", "queued"), r.text

            def done() -> bool:
                state = httpx.get(srv.url + f"/v1/index-jobs/{job}", headers=auth(key)).json()
                assert state["state"] != "failed", state
                return state["state"] == "succeeded"

            _wait(done, 300, "the job taken over after the restart")
            finished = httpx.get(srv.url + f"/v1/index-jobs/{job}", headers=auth(key)).json()
            assert finished["attempts"] == 2, finished
            result = finished["result"]
            assert result["skipped_existing"] == got["passages"]
            assert result["indexed"] == n_docs - got["passages"]
            final = _consistent(db, tid, cid)
            assert final == {"passages": n_docs, "distinct": n_docs}
            r = httpx.post(srv.url + "/v1/ask", json={"question": "Who founded Hamlet 7?", "corpus": cid},
                           headers=auth(key), timeout=60)  # fmt: skip
            assert r.status_code == 200, r.text
        finally:
            srv.stop()
