"""API keys over HTTP (issue 19, finding 4): several named keys per tenant, scopes enforced on the
routes, expiry, revocation on the very next request, last use, ``/v1/keys`` for the tenant and
``/v1/tenants/{id}/keys`` for the operator, and no way into another tenant's keys."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from livingrag.db.engine import Database
from livingrag.testing.openai_server import OpenAICompatServer
from tests.api_support import ADMIN_KEY, api_settings, app_client, auth

pytestmark = pytest.mark.db


@pytest.fixture(scope="module")
def client(db: Database, database_url: str) -> Iterator[TestClient]:
    with OpenAICompatServer() as llm, app_client(db, api_settings(database_url, llm.base_url)) as c:
        yield c


def _tenant(client: TestClient, prefix: str = "keys") -> tuple[int, str]:
    """A fresh tenant through the operator API: (id, its default key)."""
    r = client.post("/v1/tenants", json={"name": f"{prefix}-{uuid.uuid4().hex[:8]}"}, headers=auth(ADMIN_KEY))
    assert r.status_code == 201, r.text
    return r.json()["id"], r.json()["api_key"]


def _key(client: TestClient, admin_key: str, name: str, scopes: list[str], **extra: Any) -> dict[str, Any]:
    r = client.post("/v1/keys", json={"name": name, "scopes": scopes, **extra}, headers=auth(admin_key))
    assert r.status_code == 201, r.text
    return r.json()


def test_a_new_tenant_has_a_default_key_with_every_scope(client: TestClient) -> None:
    tid, key = _tenant(client)
    r = client.get("/v1/keys", headers=auth(key))
    assert r.status_code == 200, r.text
    [default] = r.json()
    assert default["name"] == "default" and default["scopes"] == ["read", "write", "feedback", "admin"]
    assert default["state"] == "active" and key.startswith(default["prefix"])
    assert "key" not in default and "key_hash" not in default
    listed = {t["id"]: t for t in client.get("/v1/tenants", headers=auth(ADMIN_KEY)).json()}
    assert listed[tid]["active_keys"] == 1


def test_several_named_keys_each_work_and_are_shown_once(client: TestClient, db: Database) -> None:
    tid, root = _tenant(client)
    made = [_key(client, root, f"k{i}", ["read"]) for i in range(3)]
    assert len({m["key"] for m in made}) == 3
    for m in made:
        assert client.get("/v1/corpora", headers=auth(m["key"])).status_code == 200
    listed = client.get("/v1/keys", headers=auth(root)).json()
    assert [k["name"] for k in listed] == ["default", "k0", "k1", "k2"]
    assert all("key" not in k for k in listed)
    with db.owner_session() as s:
        stored = s.execute(text("SELECT key_hash FROM api_keys WHERE tenant_id = :t"), {"t": tid}).scalars().all()
    assert not any(m["key"] in h for m in made for h in stored)
    dup = client.post("/v1/keys", json={"name": "k0", "scopes": ["read"]}, headers=auth(root))
    assert dup.status_code == 409 and dup.json()["error"]["code"] == "already_exists"
    assert "k0" in dup.json()["error"]["message"]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"name": "x", "scopes": ["read", "superuser"]}, "scopes"),
        ({"name": "x", "scopes": []}, "scopes"),
        ({"name": "123", "scopes": ["read"]}, "not only digits"),
        ({"name": "has space", "scopes": ["read"]}, "key name"),
        ({"name": "x", "expires_in_days": 0}, "expires_in_days"),
        ({"name": "x", "expires_in_days": 5, "expires_at": "2030-01-01T00:00:00Z"}, "not both"),
        ({"name": "x", "expires_at": "2020-01-01T00:00:00Z"}, "not in the future"),
        ({"name": "x", "expires_at": "2030-01-01T00:00:00"}, "time zone"),
    ],
)
def test_bad_key_requests_are_422_naming_the_problem(client: TestClient, body: dict[str, Any], fragment: str) -> None:
    _, root = _tenant(client)
    r = client.post("/v1/keys", json=body, headers=auth(root))
    assert r.status_code == 422, r.text
    assert fragment in r.json()["error"]["message"]
    assert [k["name"] for k in client.get("/v1/keys", headers=auth(root)).json()] == ["default"]


def test_each_scope_allows_its_routes_and_only_those(client: TestClient) -> None:
    _, root = _tenant(client)
    keys = {s: _key(client, root, s, [s])["key"] for s in ("read", "write", "feedback", "admin")}
    r = client.post("/v1/corpora", json={"name": "wiki"}, headers=auth(root))
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    # (method, path, body, the scopes allowed, the status when allowed)
    cases: list[tuple[str, str, Any, set[str], int]] = [
        ("GET", "/v1/corpora", None, {"read"}, 200),
        ("GET", f"/v1/corpora/{cid}", None, {"read"}, 200),
        ("GET", f"/v1/corpora/{cid}/passages", None, {"read"}, 200),
        ("GET", "/v1/experiences", None, {"read"}, 200),
        ("POST", "/v1/ask", {"question": "Who?", "corpus": "no-such-corpus"}, {"read"}, 404),
        ("GET", "/v1/index-jobs", None, {"read", "write"}, 200),
        ("GET", "/v1/index-jobs/nope", None, {"read", "write"}, 404),
        ("POST", "/v1/corpora/999999999/passages", {"passages": [{"text": "x"}]}, {"write"}, 404),
        ("PATCH", f"/v1/corpora/{cid}/passages/999999999", {"text": "x"}, {"write"}, 404),
        ("DELETE", f"/v1/corpora/{cid}/passages/999999999", None, {"write"}, 404),
        ("POST", f"/v1/corpora/{cid}/passages/delete", {"ids": [999999999]}, {"write"}, 404),
        ("POST", "/v1/corpora/999999999/index-jobs", {"documents": [{"text": "x"}]}, {"write"}, 404),
        ("DELETE", "/v1/corpora/999999999", None, {"write"}, 404),
        ("DELETE", "/v1/experiences/999999999", None, {"write"}, 404),
        ("GET", "/v1/experiences/999999999/history", None, {"read"}, 404),
        ("POST", "/v1/queries/999999999/feedback", {"verdict": "right"}, {"feedback", "write"}, 404),
        ("POST", "/v1/experiences/999999999/verify", None, {"feedback", "write"}, 404),
        ("POST", "/v1/experiences/999999999/retract", {"reason": "x"}, {"feedback", "write"}, 404),
        ("GET", "/v1/keys", None, {"admin"}, 200),
        ("POST", "/v1/keys/999999999/revoke", None, {"admin"}, 404),
    ]
    for method, path, body, allowed, ok in cases:
        for scope, key in keys.items():
            r = client.request(method, path, json=body, headers=auth(key))
            if scope in allowed:
                assert r.status_code == ok, (scope, method, path, r.text)
            else:
                assert r.status_code == 403, (scope, method, path, r.text)
                err = r.json()["error"]
                assert err["code"] == "forbidden" and f"'{sorted(allowed)[0]}'" in err["message"], err
    r = client.post("/v1/corpora", json={"name": "by-writer"}, headers=auth(keys["write"]))
    assert r.status_code == 201, r.text
    assert client.post("/v1/corpora", json={"name": "by-reader"}, headers=auth(keys["read"])).status_code == 403


def test_revocation_takes_effect_on_the_next_request(client: TestClient) -> None:
    tid, root = _tenant(client)
    ci = _key(client, root, "ci", ["read", "write"])
    assert client.get("/v1/corpora", headers=auth(ci["key"])).status_code == 200
    r = client.post(f"/v1/keys/{ci['id']}/revoke", headers=auth(root))
    assert r.status_code == 200, r.text
    revoked_at = r.json()["revoked_at"]
    assert r.json()["state"] == "revoked" and revoked_at is not None
    r = client.get("/v1/corpora", headers=auth(ci["key"]))
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
    # revoking again changes nothing; the key stays listed
    again = client.post(f"/v1/keys/{ci['id']}/revoke", headers=auth(root))
    assert again.status_code == 200 and again.json()["revoked_at"] == revoked_at
    assert {k["name"]: k["state"] for k in client.get("/v1/keys", headers=auth(root)).json()}["ci"] == "revoked"
    assert client.get("/v1/corpora", headers=auth(root)).status_code == 200  # the other key is untouched
    listed = {t["id"]: t for t in client.get("/v1/tenants", headers=auth(ADMIN_KEY)).json()}
    assert listed[tid]["active_keys"] == 1


def test_an_expired_key_is_401(client: TestClient, db: Database) -> None:
    _, root = _tenant(client)
    soon = _key(client, root, "soon", ["read"], expires_in_days=1)
    expires = datetime.fromisoformat(soon["expires_at"])
    assert timedelta(hours=23) < expires - datetime.now(UTC) <= timedelta(days=1)
    assert client.get("/v1/corpora", headers=auth(soon["key"])).status_code == 200
    with db.owner_session() as s:  # a day passes
        s.execute(text("UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE id = :i"), {"i": soon["id"]})
    r = client.get("/v1/corpora", headers=auth(soon["key"]))
    assert r.status_code == 401 and "expired" in r.json()["error"]["message"]
    assert {k["name"]: k["state"] for k in client.get("/v1/keys", headers=auth(root)).json()}["soon"] == "expired"


def test_last_used_is_stamped_at_most_once_a_minute(client: TestClient, db: Database) -> None:
    _, root = _tenant(client)
    k = _key(client, root, "probe", ["read"])
    assert k["last_used_at"] is None

    def last_used() -> datetime | None:
        with db.owner_session() as s:
            return s.execute(text("SELECT last_used_at FROM api_keys WHERE id = :i"), {"i": k["id"]}).scalar()

    assert last_used() is None
    client.get("/v1/corpora", headers=auth(k["key"]))
    first = last_used()
    assert first is not None and abs(datetime.now(UTC) - first) < timedelta(minutes=1)
    client.get("/v1/corpora", headers=auth(k["key"]))
    assert last_used() == first  # within the minute: no write
    with db.owner_session() as s:
        s.execute(text("UPDATE api_keys SET last_used_at = now() - interval '2 minutes' WHERE id = :i"), {"i": k["id"]})
    client.get("/v1/corpora", headers=auth(k["key"]))
    later = last_used()
    assert (
        later is not None
        and later > first - timedelta(seconds=1)
        and abs(datetime.now(UTC) - later) < timedelta(minutes=1)
    )
    shown = {x["name"]: x for x in client.get("/v1/keys", headers=auth(root)).json()}["probe"]
    assert datetime.fromisoformat(shown["last_used_at"]) == later


def test_a_tenant_cannot_see_or_revoke_another_tenants_keys(client: TestClient) -> None:
    _, a = _tenant(client, "keys-a")
    _, b = _tenant(client, "keys-b")
    b_key = _key(client, b, "b-reader", ["read"])
    a_listed = client.get("/v1/keys", headers=auth(a)).json()
    assert [k["name"] for k in a_listed] == ["default"]
    assert b_key["id"] not in {k["id"] for k in a_listed}
    r = client.post(f"/v1/keys/{b_key['id']}/revoke", headers=auth(a))
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    assert client.get("/v1/corpora", headers=auth(b_key["key"])).status_code == 200


def test_the_last_admin_key_cannot_be_revoked_by_the_tenant(client: TestClient) -> None:
    _, root = _tenant(client)
    default_id = client.get("/v1/keys", headers=auth(root)).json()[0]["id"]
    r = client.post(f"/v1/keys/{default_id}/revoke", headers=auth(root))
    assert r.status_code == 409 and r.json()["error"]["code"] == "conflict"
    assert "last active admin key" in r.json()["error"]["message"]
    assert client.get("/v1/keys", headers=auth(root)).status_code == 200  # still works
    # rotation: a new admin key, then the old one goes
    new = _key(client, root, "admin-2027", ["read", "write", "admin"])
    assert client.post(f"/v1/keys/{default_id}/revoke", headers=auth(new["key"])).status_code == 200
    assert client.get("/v1/keys", headers=auth(root)).status_code == 401
    assert client.get("/v1/keys", headers=auth(new["key"])).status_code == 200


def test_the_operator_manages_any_tenants_keys(client: TestClient) -> None:
    tid, root = _tenant(client)
    adm = auth(ADMIN_KEY)
    r = client.post(f"/v1/tenants/{tid}/keys", json={"name": "ops", "scopes": ["read"]}, headers=adm)
    assert r.status_code == 201, r.text
    ops = r.json()
    assert client.get("/v1/corpora", headers=auth(ops["key"])).status_code == 200
    names = [k["name"] for k in client.get(f"/v1/tenants/{tid}/keys", headers=adm).json()]
    assert names == ["default", "ops"]
    # the operator may revoke the last admin key (the tenant could not)
    default_id = client.get(f"/v1/tenants/{tid}/keys", headers=adm).json()[0]["id"]
    assert client.post(f"/v1/tenants/{tid}/keys/{default_id}/revoke", headers=adm).status_code == 200
    assert client.get("/v1/corpora", headers=auth(root)).status_code == 401
    # a key of another tenant through this tenant's path is not found
    other, _ = _tenant(client)
    assert client.post(f"/v1/tenants/{other}/keys/{ops['id']}/revoke", headers=adm).status_code == 404
    assert client.get("/v1/corpora", headers=auth(ops["key"])).status_code == 200
    # tenant keys are not the admin key; unknown tenants are 404
    assert client.get(f"/v1/tenants/{tid}/keys", headers=auth(ops["key"])).status_code == 403
    assert client.get("/v1/tenants/999999999/keys", headers=adm).status_code == 404
    assert client.get("/v1/keys", headers=adm).status_code == 403


def test_two_concurrent_revocations_cannot_remove_both_admin_keys(
    db: Database, make_tenant: Callable[..., tuple[int, str]]
) -> None:
    """The guard locks the tenant's active admin keys: the second revocation waits for the first
    and then sees that its key is the last one."""
    import threading

    from livingrag.db.repositories import api_keys

    tid, _ = make_tenant("keys-race")
    with db.owner_session() as s:
        second, _ = api_keys.create_key(s, tid, "second-admin", ["admin"])
    outcome: list[BaseException | None] = []

    def revoke_second() -> None:
        try:
            with db.tenant_session(tid) as s:
                api_keys.revoke_key(s, tid, second.id, keep_an_admin=True)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    with db.tenant_session(tid) as s:
        api_keys.revoke_key(s, tid, api_keys.DEFAULT_KEY_NAME, keep_an_admin=True)
        racer = threading.Thread(target=revoke_second)
        racer.start()
        racer.join(1.0)
        assert racer.is_alive()  # waiting on the first revocation's locks
    racer.join(30)
    assert len(outcome) == 1 and isinstance(outcome[0], api_keys.LastAdminKey), outcome
    with db.owner_session() as s:
        states = {k.name: k.state() for k in api_keys.list_keys(s, tid)}
    assert states == {"default": "revoked", "second-admin": "active"}
