"""Hardening of the HTTP API (issue 42, items 5 and 6): tenant input that gave a 500 (a NUL byte in
a search string, a duration too long to subtract from now, JSON nested too deeply) is a 4xx naming
the field, with no internal text in the body and no SQL parameters in the log; a key that may
write but not read gets the counts of a prune preview, never the experiences' content."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from livingrag.db.engine import Database
from livingrag.testing.openai_server import OpenAICompatServer, qa_reply
from tests.api_support import ADMIN_KEY, api_settings, app_client, auth, flush, seed_corpus
from tests.corpus_support import QUESTIONS

pytestmark = pytest.mark.db

INTERNAL = ("Traceback", "psycopg", "sqlalchemy", "RecursionError", "recursion", "SELECT ", "[SQL", "parameters")


@pytest.fixture(scope="module")
def client(db: Database, database_url: str) -> Iterator[TestClient]:
    with OpenAICompatServer(responder=qa_reply) as llm, app_client(db, api_settings(database_url, llm.base_url)) as c:
        yield TestClient(c.app, raise_server_exceptions=False)  # a 500 is a response here, not an exception


@pytest.fixture(scope="module")
def world(client: TestClient) -> dict[str, Any]:
    """A tenant with the test corpus and one stored experience per test question, and a key of
    each scope."""
    r = client.post("/v1/tenants", json={"name": f"harden-{uuid.uuid4().hex[:8]}"}, headers=auth(ADMIN_KEY))
    assert r.status_code == 201, r.text
    root = r.json()["api_key"]
    cid = seed_corpus(client, root)
    for q, _ in QUESTIONS:
        r = client.post("/v1/ask", json={"question": q, "corpus": cid, "ablations": ["gate"]}, headers=auth(root))
        assert r.status_code == 200, r.text
    flush(client)
    keys = {}
    for scopes in (["write"], ["read"], ["read", "write"]):
        r = client.post("/v1/keys", json={"name": "-".join(scopes), "scopes": scopes}, headers=auth(root))
        assert r.status_code == 201, r.text
        keys["+".join(scopes)] = r.json()["key"]
    return {"root": root, "cid": cid, "keys": keys}


def _plain_4xx(r: Any, status: int, *words: str) -> None:
    """A 4xx (``status``) whose message names what was wrong, with no internal text."""
    assert r.status_code == status, r.text
    message = r.json()["error"]["message"]
    for w in words:
        assert w in message, (w, message)
    for w in INTERNAL:
        assert w not in r.text, (w, r.text)


# ---------------------------------------------------------------- item 6


def test_a_write_only_key_previews_a_prune_as_counts_without_content(client: TestClient, world: dict[str, Any]) -> None:
    body = {"keep": 0, "dry_run": True}
    r = client.post("/v1/experiences/prune", json=body, headers=auth(world["keys"]["write"]))
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["counts"]["keep"] == len(QUESTIONS) and out["dry_run"]
    assert out["items"] == [] and out["items_shown"] is False
    for q, _ in QUESTIONS:
        assert q not in r.text
    # with the read scope as well, the preview shows what would go
    r = client.post("/v1/experiences/prune", json=body, headers=auth(world["keys"]["read+write"]))
    assert r.status_code == 200 and r.json()["items_shown"] is True
    assert {e["query"] for e in r.json()["items"]} == {q for q, _ in QUESTIONS}
    # a read-only key cannot prune at all, not even a preview
    r = client.post("/v1/experiences/prune", json=body, headers=auth(world["keys"]["read"]))
    assert r.status_code == 403
    # nothing was deleted by the previews
    assert len(client.get("/v1/experiences", headers=auth(world["root"])).json()["items"]) == len(QUESTIONS)


# ---------------------------------------------------------------- item 5


@pytest.mark.parametrize("route", ["passages", "entities"])
def test_a_nul_byte_in_a_search_string_is_a_422_naming_q(
    client: TestClient, world: dict[str, Any], route: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        r = client.get(f"/v1/corpora/{world['cid']}/{route}", params={"q": "Qu\x00ell"}, headers=auth(world["root"]))
    _plain_4xx(r, 422, "q", "NUL")
    assert "Qu\x00ell" not in caplog.text and "Qu\\x00ell" not in caplog.text


def test_a_nul_byte_in_an_index_job_id_is_a_404_not_a_500(client: TestClient, world: dict[str, Any]) -> None:
    r = client.get("/v1/index-jobs/ab%00cd", headers=auth(world["root"]))
    _plain_4xx(r, 404)


@pytest.mark.parametrize("value", ["²", "¹2", "٣", str(2**63), "1" * 30])
def test_an_acting_tenant_header_that_is_no_bigint_is_a_422(client: TestClient, value: str) -> None:
    """``X-Livingrag-Tenant`` (the operator's): digits that ``int()`` cannot read ("²" is a digit to
    ``str.isdigit``; a server decodes header bytes as Latin-1) or that no row id can be are refused,
    never a 500."""
    from types import SimpleNamespace

    from pydantic import SecretStr

    from livingrag.api.deps import ApiError, acting_tenant

    if value.isascii():
        headers = auth(ADMIN_KEY) | {"X-Livingrag-Tenant": value}
        _plain_4xx(client.get("/v1/corpora", headers=headers), 422, "X-Livingrag-Tenant")
    svc = SimpleNamespace(settings=SimpleNamespace(api=SimpleNamespace(admin_key=SecretStr(ADMIN_KEY))))
    with pytest.raises(ApiError) as err:  # the header as the server decoded it (the test client re-encodes it)
        acting_tenant(svc, ADMIN_KEY, value)  # type: ignore[arg-type]
    assert err.value.status == 422 and "X-Livingrag-Tenant" in err.value.message


@pytest.mark.parametrize("value", ["9999999d", "99999999999999999999w", "100000y", "9" * 99, "101y", "36501"])
def test_a_duration_too_long_is_a_422_naming_the_field(client: TestClient, world: dict[str, Any], value: str) -> None:
    r = client.post("/v1/experiences/prune", json={"unused_for": value}, headers=auth(world["root"]))
    _plain_4xx(r, 422, "unused_for", "too long")
    r = client.post("/v1/admin/expire", json={"older_than": value, "dry_run": True}, headers=auth(ADMIN_KEY))
    _plain_4xx(r, 422, "older_than", "too long")
    r = client.post("/v1/admin/prune", json={"unused_for": value, "dry_run": True}, headers=auth(ADMIN_KEY))
    _plain_4xx(r, 422, "unused_for", "too long")


def test_json_nested_too_deeply_is_a_plain_400(client: TestClient, world: dict[str, Any]) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    for path in ("/v1/ask", f"/v1/corpora/{world['cid']}/passages", "/v1/experiences/prune"):
        r = client.post(path, content=deep, headers=auth(world["root"]) | {"content-type": "application/json"})
        _plain_4xx(r, 400, "JSON")


def test_a_database_error_logs_no_sql_parameters(caplog: pytest.LogCaptureFixture) -> None:
    """Whatever reaches the database and fails there is logged without the statement's parameters
    (they are tenant data): the safe 500 handler hides them."""
    from fastapi import FastAPI
    from sqlalchemy.exc import DataError

    from livingrag.api import errors

    app = FastAPI()
    errors.install(app)
    secret = f"tenant-text-{uuid.uuid4().hex}"  # made here, so the traceback's source lines do not hold it

    @app.get("/boom")
    def boom() -> None:
        raise DataError("SELECT * FROM passages WHERE text LIKE %(q)s", {"q": secret}, Exception("x"))

    with caplog.at_level(logging.DEBUG):
        r = TestClient(app, raise_server_exceptions=False).get("/boom")
    assert r.status_code == 500 and secret not in r.text
    assert secret not in caplog.text
    assert "passages" in caplog.text  # the statement itself is still there to debug with
