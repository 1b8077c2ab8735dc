"""The API routes behind the web console: the operator acting for a tenant (admin key with
``X-Livingrag-Tenant``), fusion weights and the write-back decision of a question, an experience's
details, list filters, expire, prune with a dry-run preview, store health series, passage search,
index-job progress, entity neighbourhoods, tenant isolation of every new route (another tenant's
ids answer 404) and the console's static files with their Content-Security-Policy."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from livingrag.db.engine import Database
from livingrag.testing.openai_server import OpenAICompatServer, qa_reply
from tests.api_support import ADMIN_KEY, api_settings, app_client, app_services, auth, flush, seed_corpus
from tests.corpus_support import QUESTIONS

pytestmark = pytest.mark.db


@pytest.fixture(scope="module")
def client(db: Database, database_url: str) -> Iterator[TestClient]:
    with OpenAICompatServer(responder=qa_reply) as llm, app_client(db, api_settings(database_url, llm.base_url)) as c:
        yield c


@pytest.fixture(scope="module")
def world(client: TestClient) -> dict[str, Any]:
    """Tenants A and B, each with the test corpus; B asked every question in the living mode."""
    keys = {}
    for t in ("console-a", "console-b"):
        r = client.post("/v1/tenants", json={"name": t}, headers=auth(ADMIN_KEY))
        assert r.status_code == 201, r.text
        keys[t] = (r.json()["id"], r.json()["api_key"])
    (a_id, a), (b_id, b) = keys["console-a"], keys["console-b"]
    a_cid, b_cid = seed_corpus(client, a, "wiki-a"), seed_corpus(client, b, "wiki-b")
    asked = []
    for q, _ in QUESTIONS:
        r = client.post("/v1/ask", json={"question": q, "corpus": b_cid, "ablations": ["gate"]}, headers=auth(b))
        assert r.status_code == 200, r.text
        asked.append(r.json())
    flush(client)
    b_exps = client.get("/v1/experiences", headers=auth(b)).json()["items"]
    assert len(b_exps) == len(QUESTIONS)
    b_entity = client.get(f"/v1/corpora/{b_cid}/entities", params={"q": "Quell"}, headers=auth(b)).json()[0]["id"]
    return {
        "a": a, "b": b, "a_id": a_id, "b_id": b_id, "a_cid": a_cid, "b_cid": b_cid, "asked": asked,
        "b_exp": b_exps[0]["id"], "b_query": asked[0]["query_log_id"], "b_entity": b_entity,
    }  # fmt: skip


def _as_operator(tenant: int) -> dict[str, str]:
    return auth(ADMIN_KEY) | {"X-Livingrag-Tenant": str(tenant)}


def test_the_admin_key_acts_for_the_tenant_named_in_the_header(client: TestClient, world: dict[str, Any]) -> None:
    r = client.get("/v1/corpora", headers=_as_operator(world["b_id"]))
    assert r.status_code == 200 and [c["id"] for c in r.json()["items"]] == [world["b_cid"]]
    r = client.get("/v1/corpora", headers=_as_operator(world["a_id"]))
    assert [c["id"] for c in r.json()["items"]] == [world["a_cid"]]
    assert client.get("/v1/corpora", headers=auth(ADMIN_KEY)).status_code == 403  # no tenant named
    # a tenant key never switches tenant through the header
    r = client.get("/v1/corpora", headers=auth(world["a"]) | {"X-Livingrag-Tenant": str(world["b_id"])})
    assert r.status_code == 403 and "only with the admin key" in r.json()["error"]["message"]
    r = client.get("/v1/corpora", headers=auth(ADMIN_KEY) | {"X-Livingrag-Tenant": "999999"})
    assert r.status_code == 404
    for bad in ("0", "-3", "b", "1 OR 1=1"):
        assert client.get("/v1/corpora", headers=auth(ADMIN_KEY) | {"X-Livingrag-Tenant": bad}).status_code == 422
    assert client.get("/v1/corpora", headers=auth("lrg_wrong") | {"X-Livingrag-Tenant": "1"}).status_code == 403


def test_ask_reports_fusion_weights_and_the_writeback_decision(client: TestClient, world: dict[str, Any]) -> None:
    b, cid = world["b"], world["b_cid"]
    first = world["asked"][0]
    assert first["fused_experiences"] == [] and first["query_log_id"] is not None
    r = client.get(f"/v1/queries/{first['query_log_id']}/writeback", headers=auth(b))
    assert r.status_code == 200, r.text
    wb = r.json()
    assert wb["decision"] == "stored" and wb["experience_id"] is not None and wb["tau_gs"] > 0
    # each verified claim names the evidence sentence it was checked against, from its passage
    texts = {p["id"]: p["text"] for p in first["passages"]}
    supported = [c for c in wb["claims"] if c["g"] >= wb["tau_nli"] and c["passage_id"] in texts]
    assert all(c["evidence"] and c["evidence"][:40] in texts[c["passage_id"]] for c in supported)
    # a similar question fuses the stored experience, with its weight
    r = client.post("/v1/ask", json={"question": "Who directed Silver Harbor?", "corpus": cid}, headers=auth(b))
    body = r.json()
    assert body["fused_experiences"], body
    assert {x["id"] for x in body["fused_experiences"]} == set(body["fused_experience_ids"])
    assert all(x["weight"] >= 0 and x["query"] for x in body["fused_experiences"])
    flush(client)
    wb = client.get(f"/v1/queries/{body['query_log_id']}/writeback", headers=auth(b)).json()
    assert wb["decision"] in ("stored", "rejected_novelty", "rejected_grounding") and wb["novelty"] is not None
    if wb["decision"] != "rejected_novelty":
        assert wb["claims"] and all("claim" in c for c in wb["claims"])
    r = client.post(
        "/v1/ask", json={"question": QUESTIONS[2][0], "corpus": cid, "mode": "linear"}, headers=auth(b)
    ).json()
    assert client.get(f"/v1/queries/{r['query_log_id']}/writeback", headers=auth(b)).json()["decision"] == "none"


def test_experience_details_rank_the_activation_map_and_flag_changed_passages(
    client: TestClient, world: dict[str, Any]
) -> None:
    b, cid = world["b"], world["b_cid"]
    exp = client.get("/v1/experiences", params={"limit": 500}, headers=auth(b)).json()["items"][-1]
    d = client.get(f"/v1/experiences/{exp['id']}/details", headers=auth(b)).json()
    assert d["query"] == exp["query"] and d["summary"] and d["activation"]
    weights = [e["weight"] for e in d["activation"]]
    assert weights == sorted(weights, reverse=True) and all(e["name"] for e in d["activation"])
    assert d["cited_passages"] and all(p["exists"] and not p["changed"] for p in d["cited_passages"])
    # editing a cited passage marks the experience stale and the passage changed
    pid = d["cited_passages"][0]["id"]
    r = client.patch(f"/v1/corpora/{cid}/passages/{pid}", json={"title": "Renamed for the test"}, headers=auth(b))
    assert r.status_code == 200, r.text
    d = client.get(f"/v1/experiences/{exp['id']}/details", headers=auth(b)).json()
    assert d["stale"] and [p["changed"] for p in d["cited_passages"] if p["id"] == pid] == [True]


def test_list_filters_expire_and_prune_with_a_dry_run_preview(client: TestClient, world: dict[str, Any]) -> None:
    a = world["a"]
    cid = world["a_cid"]
    for q, _ in QUESTIONS:
        client.post("/v1/ask", json={"question": q, "corpus": cid, "ablations": ["gate"]}, headers=auth(a))
    flush(client)
    items = client.get("/v1/experiences", headers=auth(a)).json()["items"]
    assert len(items) == len(QUESTIONS)
    r = client.post(f"/v1/experiences/{items[0]['id']}/expire", headers=auth(a))
    assert r.status_code == 200 and r.json()["expires_at"] is not None
    expired = client.get("/v1/experiences", params={"status": "expired"}, headers=auth(a)).json()["items"]
    active = client.get("/v1/experiences", params={"status": "active"}, headers=auth(a)).json()["items"]
    assert [e["id"] for e in expired] == [items[0]["id"]] and len(active) == len(QUESTIONS) - 1
    assert client.get("/v1/experiences", params={"status": "gone"}, headers=auth(a)).status_code == 422
    high = client.get("/v1/experiences", params={"min_confidence": 1.0}, headers=auth(a)).json()["items"]
    assert all(e["confidence"] >= 1.0 for e in high)
    # dry run: counts and the rows that would go, nothing deleted
    r = client.post("/v1/experiences/prune", json={"expired": True}, headers=auth(a))
    assert r.status_code == 200, r.text
    assert r.json()["dry_run"] and r.json()["counts"]["total"] == 1
    assert [e["id"] for e in r.json()["items"]] == [items[0]["id"]]
    assert len(client.get("/v1/experiences", headers=auth(a)).json()["items"]) == len(QUESTIONS)
    r = client.post("/v1/experiences/prune", json={"expired": True, "dry_run": False}, headers=auth(a))
    assert r.json()["counts"]["total"] == 1 and r.json()["items"] == []
    assert len(client.get("/v1/experiences", headers=auth(a)).json()["items"]) == len(QUESTIONS) - 1
    # a tenant's prune never reaches another tenant
    b_before = len(client.get("/v1/experiences", params={"limit": 500}, headers=auth(world["b"])).json()["items"])
    r = client.post("/v1/experiences/prune", json={"keep": 0, "dry_run": False}, headers=auth(a))
    assert r.json()["counts"]["keep"] == len(QUESTIONS) - 1
    b_after = len(client.get("/v1/experiences", params={"limit": 500}, headers=auth(world["b"])).json()["items"])
    assert b_after == b_before
    assert client.post("/v1/experiences/prune", json={}, headers=auth(a)).status_code == 422
    assert client.post("/v1/experiences/prune", json={"unused_for": "soon"}, headers=auth(a)).status_code == 422


def test_store_health_has_growth_gates_and_query_series(client: TestClient, world: dict[str, Any]) -> None:
    r = client.get("/v1/store/health", headers=auth(world["b"]))
    assert r.status_code == 200, r.text
    h = r.json()
    assert [c["corpus_id"] for c in h["corpora"]] == [world["b_cid"]]
    assert h["corpora"][0]["experiences"] >= len(QUESTIONS)
    assert h["growth"] and h["growth"][-1]["cumulative_stored"] >= len(QUESTIONS)
    assert h["gates"] and h["gates"][0]["questions"] >= len(QUESTIONS)
    q = h["queries"][-1]
    assert q["questions"] >= len(QUESTIONS) and q["p50_ms"] <= q["p90_ms"] <= q["p99_ms"] and q["prompt_tokens"] > 0
    one = client.get("/v1/store/health", params={"corpus_id": world["b_cid"]}, headers=auth(world["b"])).json()
    assert one["growth"] == h["growth"]


def test_passage_search_and_index_job_progress(client: TestClient, world: dict[str, Any]) -> None:
    a, cid = world["a"], world["a_cid"]
    r = client.get(f"/v1/corpora/{cid}/passages", params={"q": "kiruna"}, headers=auth(a))
    assert {p["title"] for p in r.json()["items"]} == {"Kiruna", "Henrik Tallberg"}
    assert client.get(f"/v1/corpora/{cid}/passages", params={"q": "%"}, headers=auth(a)).json()["items"] == []
    docs = [{"title": f"Doc {i}", "text": f"Doc {i} mentions Lake Vättern and the town of Motala."} for i in range(3)]
    r = client.post(f"/v1/corpora/{cid}/index-jobs", json={"documents": docs}, headers=auth(a))
    assert r.status_code == 202
    app_services(client).jobs.wait(60)
    job = client.get(f"/v1/index-jobs/{r.json()['id']}", headers=auth(a)).json()
    assert job["state"] == "succeeded" and job["progress"]
    assert all(v["done"] == v["total"] == 3 for v in job["progress"].values()), job["progress"]


def test_entity_neighbourhood(client: TestClient, world: dict[str, Any]) -> None:
    b, cid = world["b"], world["b_cid"]
    found = client.get(f"/v1/corpora/{cid}/entities", params={"q": "quell"}, headers=auth(b)).json()
    assert found and all("quell" in e["name"].lower() for e in found)
    n = client.get(f"/v1/corpora/{cid}/entities/{world['b_entity']}", headers=auth(b)).json()
    assert n["entity"]["id"] == world["b_entity"] and n["passages"]
    assert n["entity"]["passages"] >= len(n["passages"]) >= 1
    few = client.get(f"/v1/corpora/{cid}/entities/{world['b_entity']}", params={"limit": 1}, headers=auth(b)).json()
    assert len(few["passages"]) == 1 and few["entity"]["passages"] == n["entity"]["passages"]
    assert n["linked"] and all(e["shared"] >= 1 and e["passage_ids"] for e in n["linked"])
    assert client.get(f"/v1/corpora/{cid}/entities/99999999", headers=auth(b)).status_code == 404


def test_tenant_a_gets_404_for_tenant_b_ids_on_the_console_routes(client: TestClient, world: dict[str, Any]) -> None:
    a, b_cid, a_cid = world["a"], world["b_cid"], world["a_cid"]
    for method, path, body in [
        ("GET", f"/v1/experiences/{world['b_exp']}/details", None),
        ("POST", f"/v1/experiences/{world['b_exp']}/expire", None),
        ("GET", f"/v1/queries/{world['b_query']}/writeback", None),
        ("GET", "/v1/store/health?corpus_id=" + str(b_cid), None),
        ("GET", f"/v1/corpora/{b_cid}/entities", None),
        ("GET", f"/v1/corpora/{b_cid}/entities/{world['b_entity']}", None),
        ("GET", f"/v1/corpora/{a_cid}/entities/{world['b_entity']}", None),
        ("POST", "/v1/experiences/prune", {"stale": True, "corpus_id": b_cid}),
        ("GET", f"/v1/experiences?corpus_id={b_cid}", None),
    ]:
        r = client.request(method, path, json=body, headers=auth(a))
        assert r.status_code == 404, (method, path, r.status_code, r.text)
    # A's own views hold nothing of B's
    h = client.get("/v1/store/health", headers=auth(a)).json()
    assert {c["corpus_id"] for c in h["corpora"]} <= {a_cid}
    r = client.get(f"/v1/experiences/{world['b_exp']}/details", headers=auth(world["b"]))
    assert r.status_code == 200 and not r.json()["expires_at"]  # A's expire did not touch it


def test_the_console_is_served_with_a_strict_csp(client: TestClient) -> None:
    r = client.get("/ui/")
    assert r.status_code == 200 and "text/html" in r.headers["content-type"]
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "default-src 'none'" in csp and "unsafe-inline" not in csp
    assert '<script type="module" src="app.js"></script>' in r.text and "<script>" not in r.text
    js = client.get("/ui/app.js")
    assert js.status_code == 200 and "javascript" in js.headers["content-type"]
    assert js.headers["x-content-type-options"] == "nosniff"
    assert client.get("/ui", follow_redirects=False).status_code in (307, 308)
    assert "content-security-policy" not in client.get("/health").headers


def test_every_console_file_is_package_data() -> None:
    """A non-editable install ships the console: each file under livingrag/api/ui matches a
    ``[tool.setuptools.package-data]`` pattern."""
    import tomllib
    from pathlib import Path, PurePosixPath

    root = Path(__file__).resolve().parents[2]
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["livingrag"]
    files = [p for p in (root / "livingrag" / "api" / "ui").rglob("*") if p.is_file()]
    assert files
    for f in files:
        rel = PurePosixPath(f.relative_to(root / "livingrag").as_posix())
        assert any(len(rel.parts) == len(PurePosixPath(p).parts) and rel.match(p) for p in patterns), rel


def test_the_console_never_writes_markup_from_data() -> None:
    """Every view builds elements and text nodes (``dom.js``): no script of the console assigns
    markup (``innerHTML``, ``outerHTML``, ``insertAdjacentHTML``, ``document.write``), the feedback
    and history views included."""
    from pathlib import Path

    ui = Path(__file__).resolve().parents[2] / "livingrag" / "api" / "ui"
    scripts = sorted(ui.rglob("*.js"))
    assert {"ask.js", "experiences.js", "common.js"} <= {p.name for p in scripts}
    for path in scripts:
        code = path.read_text()
        for sink in (".innerHTML", ".outerHTML", ".insertAdjacentHTML(", "document.write(", "eval(", "new Function("):
            assert sink not in code, (path.name, sink)
    ask = (ui / "views" / "ask.js").read_text()
    assert "/feedback`" in ask and "Correct it" in ask
    experiences = (ui / "views" / "experiences.js").read_text()
    assert "/history`" in experiences and "Gate score (heuristic)" in experiences
    assert "Confidence (GS)" not in experiences
