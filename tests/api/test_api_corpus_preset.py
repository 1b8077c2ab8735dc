"""``PATCH /v1/corpora/{id}``: a corpus's retrieval preset shown and changed over HTTP, and the
service's next question searched with the new preset (its cached retriever is built anew)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from livingrag.config import RetrievalSettings
from livingrag.db.engine import Database
from livingrag.retrieval.params import RetrievalParams
from livingrag.retrieval.presets import PRESETS
from livingrag.testing.openai_server import OpenAICompatServer
from tests.api_support import api_settings, app_client, app_services, auth, seed_corpus

pytestmark = pytest.mark.db

DEFAULT = RetrievalSettings().preset
OTHER = "musique" if DEFAULT != "musique" else "2wikimultihopqa"


def _preset_fields(p: RetrievalParams) -> dict[str, object]:
    return {k: getattr(p, k) for k in PRESETS[DEFAULT]}


@pytest.fixture(scope="module")
def client(db: Database, database_url: str) -> Iterator[TestClient]:
    with OpenAICompatServer() as llm, app_client(db, api_settings(database_url, llm.base_url)) as c:
        yield c


@pytest.fixture(scope="module")
def tenant_key(client: TestClient, db: Database) -> tuple[int, str]:
    from livingrag.db.repositories import tenants

    with db.owner_session() as s:
        rec, key = tenants.create_tenant(s, f"preset-{uuid.uuid4().hex[:8]}")
    return rec.id, key


def test_patch_changes_the_preset_and_the_next_question_uses_it(
    client: TestClient, tenant_key: tuple[int, str]
) -> None:
    tid, key = tenant_key
    cid = seed_corpus(client, key, "wiki")
    got = client.get(f"/v1/corpora/{cid}", headers=auth(key)).json()
    assert got["retrieval_preset"] == DEFAULT
    assert [c["retrieval_preset"] for c in client.get("/v1/corpora", headers=auth(key)).json()["items"]] == [DEFAULT]
    ask = {"question": "Who founded the Aurora Quartet?", "corpus": cid, "mode": "linear"}
    assert client.post("/v1/ask", json=ask, headers=auth(key)).status_code == 200, "loads the retriever"
    rag = app_services(client).rag
    before = rag._retrievers[(tid, cid)]  # the retriever the question was searched with
    assert _preset_fields(before.params) == PRESETS[DEFAULT]

    r = client.patch(f"/v1/corpora/{cid}", json={"retrieval_preset": OTHER}, headers=auth(key))
    assert r.status_code == 200, r.text
    assert r.json()["retrieval_preset"] == OTHER and r.json()["version"] == got["version"]
    assert client.get(f"/v1/corpora/{cid}", headers=auth(key)).json()["retrieval_preset"] == OTHER
    assert client.post("/v1/ask", json=ask, headers=auth(key)).status_code == 200
    after = rag._retrievers[(tid, cid)]  # built anew by that question, not by this test
    assert after is not before and after.corpus.settings["retrieval_preset"] == OTHER
    assert _preset_fields(after.params) == PRESETS[OTHER] != PRESETS[DEFAULT]
    assert client.post("/v1/ask", json=ask, headers=auth(key)).status_code == 200
    assert rag._retrievers[(tid, cid)] is after  # an unchanged preset keeps the cached retriever

    # an empty patch changes nothing
    r = client.patch(f"/v1/corpora/{cid}", json={}, headers=auth(key))
    assert r.status_code == 200 and r.json()["retrieval_preset"] == OTHER


def test_a_bad_patch_is_4xx_and_changes_nothing(client: TestClient, tenant_key: tuple[int, str]) -> None:
    _, key = tenant_key
    cid = seed_corpus(client, key, "other")
    r = client.patch(f"/v1/corpora/{cid}", json={"retrieval_preset": "wixqa"}, headers=auth(key))
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["code"] == "invalid_input"
    for name in ("wixqa", "2wikimultihopqa", "custom", "hotpotqa", "musique"):
        assert name in err["message"], err
    r = client.patch(f"/v1/corpora/{cid}", json={"preset": "musique"}, headers=auth(key))
    assert r.status_code == 422 and "preset" in r.json()["error"]["message"]
    assert client.get(f"/v1/corpora/{cid}", headers=auth(key)).json()["retrieval_preset"] == DEFAULT
    assert (
        client.patch("/v1/corpora/999999999", json={"retrieval_preset": "musique"}, headers=auth(key)).status_code
        == 404
    )
    assert client.patch(f"/v1/corpora/{cid}", json={"retrieval_preset": "musique"}).status_code == 401
