"""HTTP API isolation: tenant A's key against every endpoint with tenant B's ids is refused (404,
as if the row did not exist), B's rows stay intact, and B's experiences never reach A through
matching. The database sessions behind the API run as the RLS-bound application role."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from livingrag.db.engine import Database
from livingrag.testing.openai_server import OpenAICompatServer
from tests.api_support import ADMIN_KEY, api_settings, app_client, app_services, auth, flush, seed_corpus
from tests.corpus_support import QUESTIONS

pytestmark = pytest.mark.db


@pytest.fixture(scope="module")
def client(db: Database, database_url: str) -> Iterator[TestClient]:
    with OpenAICompatServer() as llm, app_client(db, api_settings(database_url, llm.base_url)) as c:
        yield c


@pytest.fixture(scope="module")
def world(client: TestClient, db: Database) -> dict[str, Any]:
    """Two tenants with the same corpus; B has asked questions and stored experiences."""
    keys = {}
    for t in ("iso-a", "iso-b"):
        r = client.post("/v1/tenants", json={"name": t}, headers=auth(ADMIN_KEY))
        assert r.status_code == 201, r.text
        keys[t] = (r.json()["id"], r.json()["api_key"])
    (a_id, a), (b_id, b) = keys["iso-a"], keys["iso-b"]
    a_cid = seed_corpus(client, a, "wiki-a")
    b_cid = seed_corpus(client, b, "wiki-b")
    b_queries = []
    for q, _ in QUESTIONS:
        r = client.post("/v1/ask", json={"question": q, "corpus": b_cid, "ablations": ["gate"]}, headers=auth(b))
        assert r.status_code == 200, r.text
        b_queries.append(r.json()["query_log_id"])
    flush(client)
    b_exps = client.get("/v1/experiences", headers=auth(b)).json()["items"]
    assert len(b_exps) == len(QUESTIONS)
    b_pid = client.get(f"/v1/corpora/{b_cid}/passages", headers=auth(b)).json()["items"][0]["id"]
    r = client.post(f"/v1/corpora/{b_cid}/index-jobs", json={"documents": [{"text": "B job."}]}, headers=auth(b))
    assert r.status_code == 202
    app_services(client).jobs.wait(60)
    b_key = client.get("/v1/keys", headers=auth(b)).json()[0]["id"]
    return {
        "a": a, "b": b, "a_id": a_id, "b_id": b_id, "a_cid": a_cid, "b_cid": b_cid, "b_pid": b_pid,
        "b_exp": b_exps[0]["id"], "b_exps": {e["id"] for e in b_exps}, "b_job": r.json()["id"],
        "b_counts": _counts(db, b_id), "b_key": b_key, "b_query": b_queries[0],
    }  # fmt: skip


def _counts(db: Database, tenant_id: int) -> dict[str, int]:
    with db.owner_session() as s:
        return {
            t: s.execute(text(f"SELECT count(*) FROM {t} WHERE tenant_id = :t"), {"t": tenant_id}).scalar_one()
            for t in ("corpora", "passages", "sentences", "entities", "experiences", "answer_feedback",
                      "rejected_answers")
        } | {
            "trusted": s.execute(
                text("SELECT count(*) FROM experiences WHERE tenant_id = :t AND trust <> 'unverified'"),
                {"t": tenant_id},
            ).scalar_one()
        }  # fmt: skip


def _requests(w: dict[str, Any]) -> list[tuple[str, str, Any]]:
    b_cid, b_pid, a_cid = w["b_cid"], w["b_pid"], w["a_cid"]
    q = QUESTIONS[0][0]
    return [
        ("GET", f"/v1/corpora/{b_cid}", None),
        ("DELETE", f"/v1/corpora/{b_cid}", None),
        ("POST", f"/v1/corpora/{b_cid}/passages", {"passages": [{"text": "Injected by A."}]}),
        ("GET", f"/v1/corpora/{b_cid}/passages", None),
        ("GET", f"/v1/corpora/{b_cid}/passages/{b_pid}", None),
        ("PATCH", f"/v1/corpora/{b_cid}/passages/{b_pid}", {"text": "Overwritten by A."}),
        ("DELETE", f"/v1/corpora/{b_cid}/passages/{b_pid}", None),
        ("POST", f"/v1/corpora/{b_cid}/passages/delete", {"ids": [b_pid]}),
        # B's passage through A's own corpus
        ("GET", f"/v1/corpora/{a_cid}/passages/{b_pid}", None),
        ("PATCH", f"/v1/corpora/{a_cid}/passages/{b_pid}", {"text": "Overwritten by A."}),
        ("DELETE", f"/v1/corpora/{a_cid}/passages/{b_pid}", None),
        ("POST", f"/v1/corpora/{a_cid}/passages/delete", {"ids": [b_pid]}),
        ("POST", f"/v1/corpora/{b_cid}/index-jobs", {"documents": [{"text": "Injected by A."}]}),
        ("GET", f"/v1/index-jobs/{w['b_job']}", None),
        ("POST", "/v1/ask", {"question": q, "corpus": b_cid}),
        ("POST", "/v1/ask", {"question": q, "corpus": "wiki-b"}),
        ("POST", "/v1/ask", {"question": q, "corpus": str(b_cid)}),
        ("GET", f"/v1/experiences/{w['b_exp']}", None),
        ("DELETE", f"/v1/experiences/{w['b_exp']}", None),
        ("GET", f"/v1/experiences?corpus_id={b_cid}", None),
        ("POST", f"/v1/keys/{w['b_key']}/revoke", None),
        ("GET", f"/v1/queries/{w['b_query']}/writeback", None),
        ("POST", f"/v1/queries/{w['b_query']}/feedback", {"verdict": "wrong", "answer": "Injected by A"}),
        ("POST", f"/v1/queries/{w['b_query']}/feedback", {"verdict": "right"}),
        ("POST", f"/v1/experiences/{w['b_exp']}/verify", {"reason": "A says so"}),
        ("POST", f"/v1/experiences/{w['b_exp']}/retract", None),
        ("POST", f"/v1/experiences/{w['b_exp']}/expire", None),
        ("GET", f"/v1/experiences/{w['b_exp']}/details", None),
        ("GET", f"/v1/experiences/{w['b_exp']}/history", None),
    ]


def test_every_endpoint_refuses_other_tenants_ids(client: TestClient, db: Database, world: dict[str, Any]) -> None:
    for method, path, body in _requests(world):
        r = client.request(method, path, json=body, headers=auth(world["a"]))
        assert r.status_code == 404, (method, path, r.status_code, r.text)
        assert r.json()["error"]["code"] == "not_found"
    flush(client)
    assert _counts(db, world["b_id"]) == world["b_counts"]  # nothing of B's changed
    b = auth(world["b"])
    assert client.get(f"/v1/corpora/{world['b_cid']}/passages/{world['b_pid']}", headers=b).status_code == 200
    assert client.get(f"/v1/experiences/{world['b_exp']}", headers=b).status_code == 200
    assert client.get(f"/v1/index-jobs/{world['b_job']}", headers=b).json()["state"] == "succeeded"


def test_listings_show_only_the_callers_rows(client: TestClient, world: dict[str, Any]) -> None:
    a = auth(world["a"])
    corpora = client.get("/v1/corpora", headers=a).json()["items"]
    assert [c["id"] for c in corpora] == [world["a_cid"]]
    exps = client.get("/v1/experiences", headers=a).json()["items"]
    assert not {e["id"] for e in exps} & world["b_exps"]
    jobs = client.get("/v1/index-jobs", headers=a).json()
    assert world["b_job"] not in {j["id"] for j in jobs}


def test_b_experiences_never_reach_a_through_matching(client: TestClient, world: dict[str, Any]) -> None:
    a = auth(world["a"])
    for q, _ in QUESTIONS:  # the very questions B's experiences were stored for
        r = client.post("/v1/ask", json={"question": q, "corpus": world["a_cid"]}, headers=a)
        assert r.status_code == 200, r.text
        body = r.json()
        assert not set(body["fused_experience_ids"]) & world["b_exps"]
        assert body["scaffold_experience_id"] not in world["b_exps"]
    # ... while B, asking again, does match its own
    r = client.post("/v1/ask", json={"question": QUESTIONS[0][0], "corpus": world["b_cid"]}, headers=auth(world["b"]))
    got = set(r.json()["fused_experience_ids"]) | {r.json()["scaffold_experience_id"]}
    assert got & world["b_exps"]
    flush(client)


def test_api_sessions_run_as_the_rls_bound_role(client: TestClient) -> None:
    db = app_services(client).db
    with db.app_engine.connect() as c:
        user, su, bypass = c.execute(
            text("SELECT current_user, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")
        ).one()
    assert user == db.settings.app_role and not su and not bypass


def test_admin_maintenance_over_http(client: TestClient, world: dict[str, Any]) -> None:
    adm = auth(ADMIN_KEY)
    stats = client.get(f"/v1/admin/stats?tenant_id={world['b_id']}", headers=adm).json()["rows"]
    assert [(r["tenant_id"], r["corpus_id"], r["experiences"]) for r in stats] == [
        (world["b_id"], world["b_cid"], len(world["b_exps"]))
    ]
    r = client.post("/v1/admin/expire", json={"older_than": "0d", "tenant_id": world["b_id"], "dry_run": True},
                    headers=adm)  # fmt: skip
    assert r.status_code == 200 and r.json()["expired"] == len(world["b_exps"]) and r.json()["dry_run"]
    r = client.post("/v1/admin/prune", json={"max_per_tenant": 1, "tenant_id": world["b_id"], "dry_run": True},
                    headers=adm)  # fmt: skip
    assert r.status_code == 200 and r.json()["counts"]["total"] == len(world["b_exps"]) - 1
    r = client.post("/v1/admin/prune", json={"tenant_id": world["b_id"]}, headers=adm)
    assert r.status_code == 422 and "criterion" in r.json()["error"]["message"]
    r = client.post("/v1/admin/expire", json={"older_than": "soon"}, headers=adm)
    assert r.status_code == 422 and "soon" in r.json()["error"]["message"]
    r = client.get(f"/v1/admin/stats?tenant_id={world['a_id']}&corpus_id={world['b_cid']}", headers=adm)
    assert r.status_code == 404  # B's corpus is not A's
    assert client.get("/v1/admin/stats", headers=auth(world["b"])).status_code == 403


def test_experience_filters_get_and_delete(client: TestClient, world: dict[str, Any]) -> None:
    b = auth(world["b"])
    page = client.get(f"/v1/experiences?corpus_id={world['b_cid']}&active=true&limit=2", headers=b).json()
    assert len(page["items"]) == 2 and page["next_offset"] == 2
    rest = client.get(f"/v1/experiences?corpus_id={world['b_cid']}&active=true&offset=2", headers=b).json()
    ids = [e["id"] for e in page["items"] + rest["items"]]
    assert set(ids) >= world["b_exps"] and len(ids) == len(set(ids))
    one = client.get(f"/v1/experiences/{world['b_exp']}", headers=b).json()
    assert one["corpus_id"] == world["b_cid"] and one["query"] and "tenant_id" not in one
    assert client.delete(f"/v1/experiences/{world['b_exp']}", headers=b).status_code == 204
    assert client.get(f"/v1/experiences/{world['b_exp']}", headers=b).status_code == 404
    assert client.delete(f"/v1/experiences/{world['b_exp']}", headers=b).status_code == 404
