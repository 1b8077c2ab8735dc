"""Concurrent passage adds of one corpus over HTTP are committed together: while the corpus is
being changed, the adds that arrive queue up and are indexed in one run when it is free; each
request gets its own ids and counts (a passage two of them add is indexed once, for the first),
nothing is lost or stored twice, and once an add has answered, this replica's questions see it."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
from sqlalchemy import text

from livingrag.bench.http_load import parse_server_timing
from livingrag.db.engine import Database
from livingrag.db.repositories import tenants
from livingrag.retrieval.retriever import shared_graph_cache
from livingrag.testing.openai_server import OpenAICompatServer
from tests.api_support import api_settings, app_client, auth, seed_corpus
from tests.corpus_support import CORPUS

pytestmark = pytest.mark.db


def _passages(db: Database, cid: int) -> list[str]:
    with db.owner_session() as s:
        rows = s.execute(text("SELECT text FROM passages WHERE corpus_id = :c ORDER BY id"), {"c": cid}).all()
    return [r[0] for r in rows]


def _adds_queued_behind_a_change(
    client: Any, cid: int, key: str, bodies: list[list[dict[str, str]]]
) -> tuple[list[Any], int]:
    """POST one passage add per body while another change (an index job, say) holds the corpus,
    each queued before the next is sent; then free the corpus. Returns the responses in body order
    and the add queue's run count from before the corpus was freed."""
    svc = client.app.state.services
    results: list[Any] = [None] * len(bodies)
    release, held = threading.Event(), threading.Event()

    def hold_the_corpus() -> None:
        with svc.index_locks.hold(cid, None):
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold_the_corpus)
    holder.start()
    assert held.wait(10)

    def post(i: int) -> None:
        results[i] = client.post(f"/v1/corpora/{cid}/passages", json={"passages": bodies[i]}, headers=auth(key))

    threads = []
    for i in range(len(bodies)):  # queued in this order
        threads.append(threading.Thread(target=post, args=(i,)))
        threads[-1].start()
        deadline = time.monotonic() + 20
        while svc.add_queue.queued(cid) < i + 1:
            assert time.monotonic() < deadline, "the add did not queue"
            time.sleep(0.01)
    runs_before = svc.add_queue.runs
    release.set()
    for t in (*threads, holder):
        t.join(60)
    return results, runs_before


def test_adds_queued_behind_a_change_are_indexed_together(db: Database, database_url: str) -> None:
    with OpenAICompatServer() as llm, app_client(db, api_settings(database_url, llm.base_url)) as client:
        with db.owner_session() as s:
            tid, key = (lambda r: (r[0].id, r[1]))(tenants.create_tenant(s, f"batch-{uuid.uuid4().hex[:8]}"))
        cid = seed_corpus(client, key, docs=CORPUS[:3])
        r = client.post("/v1/ask", json={"question": CORPUS[0]["text"][:60], "corpus": cid}, headers=auth(key))
        assert r.status_code == 200, r.text  # the corpus graph is cached now
        svc = client.app.state.services
        new = [f"Batch town {i} lies on the river Ostra in the county of Vell." for i in range(4)]
        bodies = [
            [{"text": new[0]}],
            [{"text": new[1]}, {"text": new[0]}],  # new[0] is the first request's
            [{"text": new[2]}, {"text": CORPUS[0]["text"], "title": CORPUS[0]["title"]}],  # one stored already
            [{"text": new[3]}, {"text": new[3]}],  # twice in one request
        ]
        results, runs_before = _adds_queued_behind_a_change(client, cid, key, bodies)
        out = [r.json() for r in results]
        assert [r.status_code for r in results] == [201] * 4, out
        assert svc.add_queue.runs == runs_before + 1  # one indexing run for the four requests
        assert {o["batched_with"] for o in out} == {4}
        # each answer says where its time went (Server-Timing), none of it in the body
        for r in results:
            stages = parse_server_timing(r.headers["server-timing"])
            assert {"wait", "index", "phase_ner", "phase_embed", "graph"} <= set(stages), r.headers["server-timing"]
            assert all(v >= 0 for v in stages.values()) and "timings_ms" not in r.json()
        assert [(o["indexed"], o["skipped_existing"], o["duplicates_in_input"]) for o in out] == [
            (1, 0, 0),
            (1, 1, 0),
            (1, 1, 0),
            (1, 0, 1),
        ]
        ids = [pid for o in out for pid in o["passage_ids"]]
        assert len(ids) == len(set(ids)) == 4
        stored = _passages(db, cid)
        assert len(stored) == 3 + 4 and all(stored.count(t) == 1 for t in new)
        # read your writes: the add answered once the cached graph held its change
        assert (tid, cid) in shared_graph_cache()
        graph = shared_graph_cache()._graphs[(tid, cid)]  # what questions are answered from now
        assert graph.version == max(o["version"] for o in out) and graph.n_passages == 7


def test_a_request_over_the_quota_fails_alone_when_batched(db: Database, database_url: str) -> None:
    with OpenAICompatServer() as llm:
        settings = api_settings(database_url, llm.base_url, api={"max_passages_per_corpus": 5})
        with app_client(db, settings) as client:
            with db.owner_session() as s:
                _, key = tenants.create_tenant(s, f"batchq-{uuid.uuid4().hex[:8]}")
            cid = seed_corpus(client, key, docs=CORPUS[:3])
            bodies = [
                [{"text": "Quota town one lies on the Ostra."}],
                [{"text": f"Quota town {w} lies on the Ostra."} for w in ("two", "three")],  # would make 6
                [{"text": "Quota town four lies on the Ostra."}],
            ]
            results, _ = _adds_queued_behind_a_change(client, cid, key, bodies)
            # one after another in queue order: 3 + 1 = 4, then 2 more would be 6 > 5, then 5
            assert [r.status_code for r in results] == [201, 409, 201], [r.text for r in results]
            assert "api.max_passages_per_corpus = 5" in results[1].json()["error"]["message"]
            assert len(_passages(db, cid)) == 5


def test_min_corpus_version_answers_from_that_version_or_says_it_is_not_there(db: Database, database_url: str) -> None:
    with OpenAICompatServer() as llm, app_client(db, api_settings(database_url, llm.base_url)) as client:
        with db.owner_session() as s:
            _, key = tenants.create_tenant(s, f"minv-{uuid.uuid4().hex[:8]}")
        cid = seed_corpus(client, key, docs=CORPUS[:3])
        r = client.post(f"/v1/corpora/{cid}/passages", json={"passages": [{"text": "Min town lies on the Ostra."}]},
                        headers=auth(key))  # fmt: skip
        version = r.json()["version"]
        ask = {"question": CORPUS[0]["text"][:60], "corpus": cid, "mode": "linear"}
        r = client.post("/v1/ask", json=ask | {"min_corpus_version": version}, headers=auth(key))
        assert r.status_code == 200, r.text
        r = client.post("/v1/ask", json=ask | {"min_corpus_version": version + 1}, headers=auth(key))
        assert r.status_code == 409, r.text
        assert f"below min_corpus_version {version + 1}" in r.json()["error"]["message"]
        r = client.post("/v1/ask", json=ask | {"min_corpus_version": -1}, headers=auth(key))
        assert r.status_code == 422 and "min_corpus_version" in r.text


def test_the_service_loads_newer_graphs_in_the_background_only_while_it_runs(db: Database, database_url: str) -> None:
    """``api.graph_refresh_in_background`` (on): the process's graph cache answers questions from
    the loaded version while a newer one loads, for as long as the app runs; a library caller in
    the same process afterwards reads its own changes at once again."""
    cache = shared_graph_cache()
    before = cache.background_refresh
    assert before is False
    with OpenAICompatServer() as llm, app_client(db, api_settings(database_url, llm.base_url)):
        assert cache.background_refresh is True
    assert cache.background_refresh is False
    settings = api_settings(database_url, "http://127.0.0.1:9")
    settings.api.graph_refresh_in_background = False
    settings.api.graph_check_interval_s = 0.5
    with app_client(db, settings):
        assert cache.background_refresh is False and cache.check_interval_s == 0.5
    assert cache.check_interval_s == 0.0


def test_an_add_that_does_not_wait_for_the_graph_is_seen_by_min_corpus_version(db: Database, database_url: str) -> None:
    """``api.add_waits_for_graph=never``: the add answers at commit (no ``graph`` stage), this
    worker loads the change on a thread of its own, and a question that passes the add's version
    as ``min_corpus_version`` is answered from a graph that holds it."""
    with (
        OpenAICompatServer() as llm,
        app_client(db, api_settings(database_url, llm.base_url, api={"add_waits_for_graph": "never"})) as client,
    ):
        with db.owner_session() as s:
            tid, key = (lambda r: (r[0].id, r[1]))(tenants.create_tenant(s, f"nowait-{uuid.uuid4().hex[:8]}"))
        cid = seed_corpus(client, key, docs=CORPUS[:3])
        r = client.post("/v1/ask", json={"question": CORPUS[0]["text"][:60], "corpus": cid}, headers=auth(key))
        assert r.status_code == 200, r.text  # the corpus graph is cached now
        text_ = "Quillmoor Abbey stands on the island of Tarrow in the Vell estuary."
        r = client.post(f"/v1/corpora/{cid}/passages", json={"passages": [{"text": text_}]}, headers=auth(key))
        assert r.status_code == 201, r.text
        assert "graph" not in parse_server_timing(r.headers["server-timing"])
        version, pid = r.json()["version"], r.json()["passage_ids"][0]
        r = client.post(
            "/v1/ask",
            json={"question": "Where does Quillmoor Abbey stand?", "corpus": cid, "min_corpus_version": version},
            headers=auth(key),
        )
        assert r.status_code == 200, r.text
        assert pid in [p["id"] for p in r.json()["passages"]]
        deadline = time.monotonic() + 20  # and the worker's own load gets there too
        while shared_graph_cache()._graphs[(tid, cid)].version < version:
            assert time.monotonic() < deadline, "the background load did not reach the add's version"
            time.sleep(0.02)


@pytest.mark.parametrize(
    ("mode", "several_workers", "waits"),
    [("auto", False, True), ("auto", True, False), ("always", True, True), ("never", False, False)],
)
def test_auto_waits_for_the_graph_only_with_one_worker(mode: str, several_workers: bool, waits: bool) -> None:
    from types import SimpleNamespace

    from livingrag.api.routes.passages import _add_waits_for_graph

    svc = SimpleNamespace(
        settings=SimpleNamespace(api=SimpleNamespace(add_waits_for_graph=mode)), several_workers=several_workers
    )
    assert _add_waits_for_graph(svc) is waits  # type: ignore[arg-type]
