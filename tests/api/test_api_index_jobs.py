"""Index jobs live in the database (issue 42, item 7): under ``serve --workers 2`` a job answered 404
or 200 depending on the worker, and a restart forgot it. Now any app instance over the database
answers for any job, a queued job left by a stopped process is run by the next one, a running job
whose worker is gone is taken over (or failed with the reason after two tries), the tenants take
turns and each is capped, and no tenant sees another's job.

The module runs on a database of its own, so that no other module's jobs are taken here."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from livingrag.corpus.index_jobs import IndexJobs, JobProgress, JobQueueFull
from livingrag.db import migrate
from livingrag.db.engine import Database
from livingrag.db.repositories import corpora, tenants
from livingrag.db.repositories import index_jobs as repo
from livingrag.db.repositories.index_jobs import IndexJobRecord
from livingrag.testing.openai_server import OpenAICompatServer
from tests.api_support import ADMIN_KEY, api_settings, app_client, app_services, auth
from tests.conftest import db_settings_for
from tests.corpus_support import CORPUS

pytestmark = pytest.mark.db


@pytest.fixture(scope="module")
def jobs_db(make_database_url: Callable[[], str]) -> Iterator[tuple[Database, str]]:
    url = make_database_url()
    db = Database(db_settings_for(url))
    migrate.upgrade(db)
    yield db, url
    db.dispose()


@pytest.fixture(scope="module")
def llm() -> Iterator[OpenAICompatServer]:
    with OpenAICompatServer() as server:
        yield server


def _tenant(client: TestClient, prefix: str) -> tuple[int, str, int]:
    """A tenant with an empty corpus: (tenant id, key, corpus id)."""
    r = client.post("/v1/tenants", json={"name": f"{prefix}-{uuid.uuid4().hex[:8]}"}, headers=auth(ADMIN_KEY))
    assert r.status_code == 201, r.text
    tid, key = int(r.json()["id"]), r.json()["api_key"]
    r = client.post("/v1/corpora", json={"name": "wiki"}, headers=auth(key))
    assert r.status_code == 201, r.text
    return tid, key, int(r.json()["id"])


def _poll(client: TestClient, key: str, job: str, states: set[str], timeout: float = 120.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        r = client.get(f"/v1/index-jobs/{job}", headers=auth(key))
        assert r.status_code == 200, r.text
        if r.json()["state"] in states:
            return r.json()
        assert time.monotonic() < deadline, r.json()
        time.sleep(0.2)


def test_any_app_instance_answers_for_a_job_made_on_another(
    jobs_db: tuple[Database, str], llm: OpenAICompatServer
) -> None:
    db, url = jobs_db
    settings = api_settings(url, llm.base_url)
    with app_client(db, settings) as one, app_client(db, settings) as two:
        _, key, cid = _tenant(one, "two-apps")
        _, other, _ = _tenant(one, "two-apps-other")
        r = one.post(f"/v1/corpora/{cid}/index-jobs", json={"documents": CORPUS[:4]}, headers=auth(key))
        assert r.status_code == 202, r.text
        job = r.json()["id"]
        for client in (two, one, two):  # whichever worker the request reaches
            r = client.get(f"/v1/index-jobs/{job}", headers=auth(key))
            assert r.status_code == 200 and r.json()["id"] == job, r.text
            assert [j["id"] for j in client.get("/v1/index-jobs", headers=auth(key)).json()] == [job]
            assert client.get(f"/v1/index-jobs/{job}", headers=auth(other)).status_code == 404  # not B's
            assert client.get("/v1/index-jobs", headers=auth(other)).json() == []
        done = _poll(two, key, job, {"succeeded", "failed"})
        assert done["state"] == "succeeded" and done["result"]["indexed"] == 4, done
        assert done["progress"] and done["attempts"] == 1
        assert one.get(f"/v1/index-jobs/{job}", headers=auth(key)).json() == done
        assert one.get(f"/v1/corpora/{cid}/passages", headers=auth(key)).json()["items"]


def _stop_worker(client: TestClient) -> None:
    """Stop the app's index-job worker (as if its process were busy elsewhere or stopping)."""
    app_services(client).jobs.close()


def test_a_restart_runs_queued_jobs_and_takes_over_running_ones_whose_worker_is_gone(
    jobs_db: tuple[Database, str], llm: OpenAICompatServer
) -> None:
    db, url = jobs_db
    settings = api_settings(url, llm.base_url)
    with app_client(db, settings) as before:
        _stop_worker(before)  # nothing runs in this "process" any more: its jobs stay as it left them
        _, key, cid = _tenant(before, "restart")
        ids = []
        for docs in (CORPUS[:2], CORPUS[2:4], CORPUS[4:6], CORPUS[6:8]):
            r = before.post(f"/v1/corpora/{cid}/index-jobs", json={"documents": docs}, headers=auth(key))
            assert r.status_code == 202, r.text
            ids.append(r.json()["id"])
        queued, lost, hung, twice = ids
        # What a stopped process leaves: "queued" still queued; "lost" running, its worker's lock
        # held by no session (the process exited or was killed: its connection ended); "hung"
        # running, its worker's lock still held (a hung process) but no heartbeat for an hour;
        # "twice" running for the second time, its worker gone too.
        hang = db.app_engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        held, free = 7_654_321, 7_654_322
        assert repo.try_worker_lock(hang, held)
        running = (
            "UPDATE index_jobs SET state = 'running', worker = :w, worker_lock = :k, attempts = :n,"
            " started_at = now() - interval '1 hour', heartbeat_at = now() - make_interval(secs => :age) WHERE id = :i"
        )
        with db.owner_session() as s:
            for job, lock, attempts, age in ((lost, free, 1, 0), (hung, held, 1, 3600), (twice, free, 2, 0)):
                s.execute(text(running), {"i": job, "w": "gone:1:x", "k": lock, "n": attempts, "age": age})
        states = {j["id"]: j["state"] for j in before.get("/v1/index-jobs", headers=auth(key)).json()}
        assert states == {queued: "queued", lost: "running", hung: "running", twice: "running"}
    try:
        with app_client(db, settings) as after:  # the restart
            got = {j: _poll(after, key, j, {"succeeded", "failed"}) for j in ids}
    finally:
        hang.close()
    assert got[queued]["state"] == "succeeded" and got[queued]["attempts"] == 1, got[queued]
    for j in (lost, hung):  # taken over, the second attempt indexes them
        assert got[j]["state"] == "succeeded" and got[j]["attempts"] == 2, got[j]
        assert got[j]["result"]["indexed"] == 2
    assert got[twice]["state"] == "failed" and got[twice]["attempts"] == 2, got[twice]
    assert "interrupted twice" in got[twice]["error"] and "submitting the documents again" in got[twice]["error"]
    with db.owner_session() as s:  # a finished job keeps no documents
        assert s.execute(text("SELECT count(*) FROM index_jobs WHERE payload IS NOT NULL")).scalar() == 0


def _tenant_with_corpus(db: Database, tag: str) -> tuple[int, int]:
    with db.owner_session() as s:
        rec, _ = tenants.create_tenant(s, f"turns-{tag}-{uuid.uuid4().hex[:8]}")
    with db.tenant_session(rec.id) as s:
        c = corpora.create_corpus(s, rec.id, "c", embedding_model="m", embedding_dim=3, ner_model="n")
    return rec.id, c.id


def test_index_jobs_take_tenants_in_turn_and_cap_each_tenant_and_all(jobs_db: tuple[Database, str]) -> None:
    db, _ = jobs_db
    (a, a_cid), (b, b_cid) = _tenant_with_corpus(db, "a"), _tenant_with_corpus(db, "b")
    jobs = IndexJobs(db, max_pending=7, tenant_max_pending=4, poll_s=0.1)
    order: list[str] = []
    gate, started = threading.Event(), threading.Event()

    def execute(job: IndexJobRecord, documents: list[dict[str, Any]], progress: JobProgress) -> dict[str, Any]:
        started.set()
        assert gate.wait(30)
        order.append(documents[0]["text"])
        return {}

    def submit(tenant: int, cid: int, name: str) -> None:
        jobs.submit(tenant, cid, [{"title": "", "text": name, "external_id": None}])

    jobs.start(execute)
    try:
        submit(a, a_cid, "a0")
        assert started.wait(10)
        for i in range(1, 4):
            submit(a, a_cid, f"a{i}")
        with pytest.raises(JobQueueFull, match=r"api\.tenant_max_pending_jobs"):
            submit(a, a_cid, "a4")
        submit(b, b_cid, "b0")  # another tenant still gets in
        submit(b, b_cid, "b1")
        c, c_cid = _tenant_with_corpus(db, "c")
        submit(c, c_cid, "c0")  # seven pending in all
        with pytest.raises(JobQueueFull, match=r"api\.max_pending_jobs"):
            submit(c, c_cid, "c1")
        gate.set()
        jobs.wait(30)
    finally:
        gate.set()
        jobs.close()
    # a0 ran first; from then on the tenants whose last job started longest ago (or never) go first
    # (first come, first served would run a1, a2 and a3 before b0)
    assert order == ["a0", "b0", "c0", "a1", "b1", "a2", "a3"]
