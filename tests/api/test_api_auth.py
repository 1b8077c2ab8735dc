"""HTTP API: authentication (tenant keys, admin key), tenant management, health, OpenAPI."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from livingrag.db.engine import Database
from livingrag.testing.openai_server import OpenAICompatServer
from tests.api_support import ADMIN_KEY, api_settings, app_client, auth

pytestmark = pytest.mark.db


@pytest.fixture(scope="module")
def client(db: Database, database_url: str) -> Iterator[TestClient]:
    with OpenAICompatServer() as llm, app_client(db, api_settings(database_url, llm.base_url)) as c:
        yield c


def test_health_is_200_with_database_schema_and_models(client: TestClient) -> None:
    for _ in range(600):
        r = client.get("/health")
        if r.json()["models"] != "loading":
            break
        import time

        time.sleep(0.1)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "ok" and body["database"] and body["schema_up_to_date"] and body["models"] == "loaded"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/corpora"),
        ("POST", "/v1/corpora"),
        ("GET", "/v1/corpora/1"),
        ("PATCH", "/v1/corpora/1"),
        ("DELETE", "/v1/corpora/1"),
        ("POST", "/v1/corpora/1/passages"),
        ("GET", "/v1/corpora/1/passages"),
        ("PATCH", "/v1/corpora/1/passages/1"),
        ("DELETE", "/v1/corpora/1/passages/1"),
        ("POST", "/v1/corpora/1/index-jobs"),
        ("GET", "/v1/index-jobs/abc"),
        ("POST", "/v1/ask"),
        ("GET", "/v1/experiences"),
        ("GET", "/v1/experiences/1"),
        ("DELETE", "/v1/experiences/1"),
        ("GET", "/v1/keys"),
        ("POST", "/v1/keys"),
        ("POST", "/v1/keys/1/revoke"),
        ("GET", "/v1/tenants"),
        ("GET", "/v1/tenants/1/keys"),
        ("POST", "/v1/tenants/1/keys/1/revoke"),
        ("POST", "/v1/admin/prune"),
        ("GET", "/v1/admin/stats"),
    ],
)
def test_missing_or_wrong_key_is_401(client: TestClient, method: str, path: str) -> None:
    for headers in ({}, auth("lrg_not-a-real-key"), auth("garbage"), {"Authorization": "Basic dXNlcjpwYXNz"}):
        r = client.request(method, path, headers=headers, json={})
        assert r.status_code in (401, 403), (headers, r.text)
        err = r.json()["error"]
        assert err["code"] in ("unauthorized", "forbidden") and err["message"]
        if path.startswith(("/v1/tenants", "/v1/admin")):
            continue
        assert r.status_code == 401


def test_tenant_key_on_admin_routes_is_403_and_admin_key_on_tenant_routes_is_403(client: TestClient) -> None:
    r = client.post("/v1/tenants", json={"name": "auth-probe-a"}, headers=auth(ADMIN_KEY))
    assert r.status_code == 201, r.text
    key = r.json()["api_key"]
    for method, path in (
        ("GET", "/v1/tenants"),
        ("POST", "/v1/tenants"),
        ("GET", f"/v1/tenants/{r.json()['id']}/keys"),
        ("GET", "/v1/admin/stats"),
    ):
        r = client.request(method, path, headers=auth(key), json={"name": "x"})
        assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"
    r = client.get("/v1/corpora", headers=auth(ADMIN_KEY))
    assert r.status_code == 403 and "tenant" in r.json()["error"]["message"]


def test_tenant_lifecycle_key_shown_once_and_hashed(client: TestClient, db: Database) -> None:
    from sqlalchemy import text

    r = client.post("/v1/tenants", json={"name": "auth-lifecycle"}, headers=auth(ADMIN_KEY))
    assert r.status_code == 201
    t = r.json()
    assert t["api_key"].startswith("lrg_") and t["api_key"].startswith(t["api_key_prefix"])
    listed = client.get("/v1/tenants", headers=auth(ADMIN_KEY)).json()
    assert any(x["id"] == t["id"] for x in listed) and all("api_key" not in x for x in listed)
    with db.owner_session() as s:
        stored = s.execute(text("SELECT key_hash FROM api_keys WHERE tenant_id = :i"), {"i": t["id"]}).scalar_one()
    assert t["api_key"] not in stored
    assert client.get("/v1/corpora", headers=auth(t["api_key"])).status_code == 200
    again = client.post("/v1/tenants", json={"name": "auth-lifecycle"}, headers=auth(ADMIN_KEY))
    assert again.status_code == 409 and again.json()["error"]["code"] == "already_exists"
    assert client.delete(f"/v1/tenants/{t['id']}", headers=auth(ADMIN_KEY)).status_code == 204
    r = client.get("/v1/corpora", headers=auth(t["api_key"]))
    assert r.status_code == 401  # the deleted tenant's key is dead
    assert client.delete(f"/v1/tenants/{t['id']}", headers=auth(ADMIN_KEY)).status_code == 404


def test_openapi_documents_every_route_with_a_summary(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    ops = [(p, m, op) for p, item in spec["paths"].items() for m, op in item.items()]
    assert len(ops) >= 20
    for path, method, op in ops:
        assert op.get("summary"), (method, path)
        ok = [c for c in op["responses"] if c.startswith("2")]
        assert ok, (method, path)
    assert "HTTPBearer" in spec["components"]["securitySchemes"]


def test_unknown_route_and_method_are_structured(client: TestClient) -> None:
    r = client.get("/v1/nothing-here")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    r = client.put("/v1/corpora", headers=auth(ADMIN_KEY))
    assert r.status_code == 405 and r.json()["error"]["code"] == "method_not_allowed"
