"""Property-based fuzzing of every tenant route (issue 42, item 5) with two tenants: tenant A's
requests, with ids drawn from A's rows, B's rows and junk (0, negative, past bigint, not numbers,
NUL), query strings and text fields drawn from hostile strings (NUL, lone surrogates, LIKE
wildcards, quotes, SQL) and random text, and raw bodies nested too deeply or not UTF-8, never get
a 5xx, never an error body with internal text (a traceback, the driver's or the ORM's name, SQL),
never one of tenant B's rows (B's passages carry a marker word that A's answers must never show;
a path naming B's row is never a success) and never change B's rows.

Bounded (:data:`EXAMPLES`, derandomized, no example database) so that it runs in scripts/test.sh
in well under a minute; tests/api/test_api_fuzz.py fuzzes the OpenAPI operations, the admin ones too,
on a database of its own."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from livingrag.db.engine import Database
from livingrag.testing.openai_server import OpenAICompatServer, qa_reply
from tests.api_support import ADMIN_KEY, api_settings, app_client, app_services, auth, flush, seed_corpus
from tests.corpus_support import CORPUS, QUESTIONS

pytestmark = pytest.mark.db

EXAMPLES = 300
"""Requests per run: about 10 s here (2 cores, the loopback LLM), 25 s with the setup."""

MARKER = "Zorvex"
"""A word only tenant B's passages (and so its entities, questions and answers) contain."""

B_CORPUS = [
    {"title": "Zorvexa Keep", "text": "Zorvexa Keep is a castle built by Quilmar Zorvex in 1402 near Tarnholm."},
    {"title": "Quilmar Zorvex", "text": "Quilmar Zorvex was a stonemason from Tarnholm who built Zorvexa Keep."},
    {"title": "Tarnholm", "text": "Tarnholm is a hill town where the Zorvex family kept its archives."},
]
B_QUESTIONS = ["Who built Zorvexa Keep?", "Where was Quilmar Zorvex from?"]
B_CORPUS_NAME = "b-private"

INTERNAL = ("Traceback", "psycopg", "sqlalchemy", "RecursionError", "SELECT ", "INSERT ", "UPDATE ", "[SQL", "WHERE ")
"""Words an error body never holds unless the request itself did (an error may quote the input)."""

HOSTILE = [
    "\x00", "a\x00b", "\ud800", "x\udfffy", "%", "_", "%_%", "\\", "\\%", "'", '"', "' OR '1'='1",
    "1; DROP TABLE passages; --", "$1", "%(q)s", ":q", "{}", "[]", "null", "NaN", "Infinity", "-1", "0",
    "1e309", "9999999d", "99999999999999999999w", "100000y", " ", "", "\u202e", "\ufeff", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    "x" * 300, "Quell", "Silver Harbor", B_CORPUS_NAME, "wiki", "living", "linear", "gate", "read",
]  # fmt: skip
JUNK_IDS = [0, -1, 2**31, 2**63 - 1, 2**63, 2**64, 10**30, "abc", "1e3", "1.5", " 1", "\x00", "%00", "²", "１", ""]

texts = st.sampled_from(HOSTILE) | st.text(max_size=40)
numbers = st.integers(min_value=-(2**70), max_value=2**70) | st.floats(allow_nan=True) | st.sampled_from(JUNK_IDS)
json_scalars = st.none() | st.booleans() | numbers.filter(lambda v: not isinstance(v, str)) | texts
json_values = st.recursive(
    json_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3), max_leaves=8
)

PARAM_TABLE = {
    "corpus_id": "corpora",
    "passage_id": "passages",
    "entity_id": "entities",
    "experience_id": "experiences",
    "query_id": "query_log",
    "query_log_id": "query_log",
    "key_id": "api_keys",
    "job_id": "jobs",
}
"""Which rows an id parameter names (path, query or body)."""


@pytest.fixture(scope="module")
def client(db: Database, database_url: str) -> Iterator[TestClient]:
    with OpenAICompatServer(responder=qa_reply) as llm, app_client(db, api_settings(database_url, llm.base_url)) as c:
        yield TestClient(c.app, raise_server_exceptions=False)  # a 500 is a response here


def _tenant(client: TestClient, name: str, corpus_name: str, docs: list[dict[str, str]], questions: list[str]) -> Any:
    r = client.post("/v1/tenants", json={"name": f"{name}-{uuid.uuid4().hex[:8]}"}, headers=auth(ADMIN_KEY))
    assert r.status_code == 201, r.text
    tid, key = r.json()["id"], r.json()["api_key"]
    cid = seed_corpus(client, key, corpus_name, docs)
    for q in questions:
        r = client.post("/v1/ask", json={"question": q, "corpus": cid, "ablations": ["gate"]}, headers=auth(key))
        assert r.status_code == 200, r.text
    r = client.post(f"/v1/corpora/{cid}/index-jobs", json={"documents": docs[:1]}, headers=auth(key))
    assert r.status_code == 202, r.text
    return tid, key, cid, r.json()["id"]


@pytest.fixture(scope="module")
def world(client: TestClient, db: Database) -> dict[str, Any]:
    """Tenants A and B, each with a corpus, answered questions, experiences, an index job and keys;
    the ids of each tenant's rows per table."""
    a_id, a, a_cid, a_job = _tenant(client, "fuzz-a", "wiki", CORPUS, [q for q, _ in QUESTIONS[:3]])
    b_id, b, b_cid, b_job = _tenant(client, "fuzz-b", B_CORPUS_NAME, B_CORPUS, B_QUESTIONS)
    flush(client)
    app_services(client).jobs.wait(60)
    keys = {}
    for scopes in (["read"], ["write"], ["feedback"], ["admin"]):
        r = client.post("/v1/keys", json={"name": scopes[0], "scopes": scopes}, headers=auth(a))
        assert r.status_code == 201, r.text
        keys[scopes[0]] = r.json()
    r = client.post("/v1/keys", json={"name": "b-second", "scopes": ["read"]}, headers=auth(b))
    assert r.status_code == 201, r.text
    ids = {}
    for who, tid in (("a", a_id), ("b", b_id)):
        ids[who] = _ids(db, tid)
    ids["a"]["jobs"], ids["b"]["jobs"] = [a_job], [b_job]
    # deleting A's corpus is fuzzed on a spare one, so that A's passages stay for the other requests
    r = client.post("/v1/corpora", json={"name": "spare"}, headers=auth(a))
    assert r.status_code == 201, r.text
    ids["a"]["corpora"].append(r.json()["id"])
    # A's fuzzing never revokes the keys it fuzzes with: only its spare admin-scoped key is a target
    ids["a"]["api_keys"] = [keys["admin"]["id"]]
    assert ids["b"]["experiences"] and ids["b"]["entities"], ids["b"]
    return {
        "a_id": a_id, "a": a, "a_cid": a_cid, "b_id": b_id, "b": b, "b_cid": b_cid, "ids": ids,
        "keys": {k: v["key"] for k, v in keys.items()}, "b_rows": _rows(db, b_id),
    }  # fmt: skip


def _ids(db: Database, tenant_id: int) -> dict[str, list[Any]]:
    with db.owner_session() as s:
        return {
            t: [r[0] for r in s.execute(text(f"SELECT id FROM {t} WHERE tenant_id = :t ORDER BY id LIMIT 20"),
                                          {"t": tenant_id})]
            for t in ("corpora", "passages", "entities", "experiences", "query_log", "api_keys")
        }  # fmt: skip


def _rows(db: Database, tenant_id: int) -> dict[str, Any]:
    """What B holds, to compare after the fuzzing."""
    with db.owner_session() as s:
        out: dict[str, Any] = {
            t: s.execute(text(f"SELECT count(*) FROM {t} WHERE tenant_id = :t"), {"t": tenant_id}).scalar_one()
            for t in ("corpora", "passages", "entities", "experiences", "query_log", "answer_feedback", "api_keys")
        }
        out["passages_text"] = s.execute(
            text("SELECT string_agg(title || text, '|' ORDER BY id) FROM passages WHERE tenant_id = :t"),
            {"t": tenant_id},
        ).scalar_one()
        out["experiences_state"] = s.execute(
            text("SELECT string_agg(id || stale::text || trust || coalesce(expires_at::text, ''), '|' ORDER BY id)"
                 " FROM experiences WHERE tenant_id = :t"),
            {"t": tenant_id},
        ).scalar_one()  # fmt: skip
        out["revoked"] = s.execute(
            text("SELECT count(*) FROM api_keys WHERE tenant_id = :t AND revoked_at IS NOT NULL"), {"t": tenant_id}
        ).scalar_one()
    return out


def _operations(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """Every tenant operation: the admin-key ones (/v1/tenants, /v1/admin) reach every tenant by
    design and are fuzzed in tests/api/test_api_fuzz.py."""
    return [
        (path, method)
        for path, item in spec["paths"].items()
        for method in item
        if method in ("get", "post", "patch", "delete") and not path.startswith(("/v1/tenants", "/v1/admin"))
    ]


def _schema(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    return spec["components"]["schemas"][ref.rsplit("/", 1)[1]] if ref else schema


def _mostly(typed: st.SearchStrategy[Any], other: st.SearchStrategy[Any], tenths: int = 8) -> st.SearchStrategy[Any]:
    """``typed`` in ``tenths`` of ten draws, else ``other``."""
    return st.integers(0, 9).flatmap(lambda n: typed if n < tenths else other)


def _id_values(w: dict[str, Any], table: str) -> st.SearchStrategy[Any]:
    """A's ids of ``table`` (half the draws), B's (three in ten), junk (the rest)."""
    mine, theirs = st.sampled_from(w["ids"]["a"][table]), st.sampled_from(w["ids"]["b"][table])
    return st.integers(0, 9).flatmap(lambda n: mine if n < 5 else theirs if n < 8 else st.sampled_from(JUNK_IDS))


def _value(spec: dict[str, Any], w: dict[str, Any], name: str, schema: dict[str, Any], depth: int = 0) -> Any:
    """A strategy for one field: mostly of its type (so that most requests pass validation and
    reach the database with hostile text in them), sometimes anything."""
    schema = _schema(spec, schema)
    if "anyOf" in schema:
        return st.one_of([_value(spec, w, name, s, depth) for s in schema["anyOf"] if s.get("type") != "null"])
    kind = schema.get("type")
    typed: st.SearchStrategy[Any]
    if name in PARAM_TABLE and kind in ("integer", "string", None):
        typed = _id_values(w, PARAM_TABLE[name])
    elif name == "corpus":
        typed = _id_values(w, "corpora") | st.sampled_from(["wiki", B_CORPUS_NAME]) | texts
    elif name == "ids":
        typed = st.lists(_id_values(w, "passages"), min_size=1, max_size=3)
    elif kind == "string":
        typed = st.sampled_from(schema["enum"]) if "enum" in schema else texts
    elif kind == "integer":
        typed = st.integers(0, 60)
    elif kind == "number":
        typed = st.floats(0, 1)
    elif kind == "boolean":
        typed = st.booleans()
    elif kind == "array" and depth < 3:
        typed = st.lists(_value(spec, w, name, schema.get("items", {}), depth + 1), min_size=1, max_size=3)
    elif kind == "object" and depth < 3 and "properties" in schema:
        props, required = schema["properties"], set(schema.get("required", ()))
        typed = st.fixed_dictionaries(
            {k: _value(spec, w, k, v, depth + 1) for k, v in props.items() if k in required},
            optional={k: _value(spec, w, k, v, depth + 1) for k, v in props.items() if k not in required},
        )
    else:
        typed = json_values
    return _mostly(typed, json_values, 9 if depth else 8)


RAW_BODIES = {
    "deep-array": b"[" * 50_000 + b"]" * 50_000,
    "deep-object": b'{"a":' * 5_000 + b"1" + b"}" * 5_000,
    "latin-1": b'{"question": "caf\xe9", "corpus": 1}',
    "utf-16": b"\xff\xfe\x00",
    "cut": b"{",
    "nul-escape": b'{"text": "\\u0000"}',
    "surrogate-escape": b'{"question": "\\ud800", "corpus": "\\u0000"}',
}
"""Bodies no JSON encoder writes, by name (the name is what a failing example shows)."""


def _escape(value: Any) -> str:
    """``value`` percent-escaped for a URL (JSON for a list or an object)."""
    shown = json.dumps(value) if isinstance(value, dict | list) or value is None else str(value)
    return quote(shown.encode("utf-8", "surrogatepass"), safe="")


@st.composite
def requests(draw: st.DrawFn, spec: dict[str, Any], w: dict[str, Any]) -> dict[str, Any]:
    path, method = draw(st.sampled_from(_operations(spec)))
    op = spec["paths"][path][method]
    url, b_rows, params = path, False, {}
    for p in op.get("parameters", []):
        name, schema = p["name"], p.get("schema", {})
        if p["in"] == "path":
            value = draw(_id_values(w, PARAM_TABLE[name]) if name in PARAM_TABLE else texts)
            if (method, path, value) == ("delete", "/v1/corpora/{corpus_id}", w["a_cid"]):
                value = w["ids"]["a"]["corpora"][-1]  # the spare
            b_rows |= name in PARAM_TABLE and value in w["ids"]["b"][PARAM_TABLE[name]]
            url = url.replace("{" + name + "}", _escape(value))
        elif p["in"] == "query" and draw(st.booleans()):
            params[name] = draw(_value(spec, w, name, schema))
    if params:  # escaped here: a lone surrogate goes as the bytes it would be (not UTF-8), as a client may send
        url += "?" + "&".join(f"{_escape(k)}={_escape(v)}" for k, v in params.items())
    content: bytes | None = None
    if "requestBody" in op:
        if draw(st.integers(0, 9)) == 0:
            content = draw(st.sampled_from(sorted(RAW_BODIES))).encode()  # a name, the body at send time
        else:
            body = draw(_value(spec, w, "body", op["requestBody"]["content"]["application/json"]["schema"]))
            content = json.dumps(body).encode()  # \u escapes: NUL and lone surrogates reach the server as JSON
    who = draw(st.sampled_from(["a", "a", "a", "read", "write", "feedback", "operator", "operator-junk"]))
    headers: dict[str, Any]
    if who == "a":
        headers = auth(w["a"])
    elif who == "operator":
        headers = auth(ADMIN_KEY) | {"X-Livingrag-Tenant": str(w["a_id"])}
    elif who == "operator-junk":
        junk = draw(st.sampled_from(["²", "¹2", "0", "-1", str(2**63), str(10**30), " 1 ", "1 OR 1=1", "9999999"]))
        headers = auth(ADMIN_KEY) | {"X-Livingrag-Tenant": junk.encode("latin-1")}  # bytes: as sent
    else:
        headers = auth(w["keys"][who])
    headers = {**headers, "content-type": b"application/json"}
    return {"method": method.upper(), "url": url, "params": params, "content": content, "headers": headers,
            "b_rows": b_rows}  # fmt: skip


def _check(req: dict[str, Any], r: Any) -> None:
    shown = {k: v for k, v in req.items() if k != "headers"}
    assert r.status_code < 500, (shown, r.status_code, r.text)
    assert MARKER.lower() not in r.text.lower(), ("tenant B's data reached A", shown, r.text)
    if req["b_rows"]:
        assert r.status_code >= 400, ("a path naming B's row succeeded for A", shown, r.status_code, r.text)
    if r.status_code >= 400:
        err = r.json()["error"]
        assert isinstance(err["code"], str) and isinstance(err["message"], str) and err["message"], r.text
        asked = repr(req["url"]) + repr(req["params"]) + repr(req["content"])
        for word in INTERNAL:
            assert word not in r.text or word in asked, (word, shown, r.text)


def test_tenant_routes_never_5xx_leak_internals_or_reach_another_tenant(
    client: TestClient, world: dict[str, Any], db: Database
) -> None:
    spec = client.get("/openapi.json").json()

    @settings(
        max_examples=EXAMPLES, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(req=requests(spec, world))
    def check(req: dict[str, Any]) -> None:
        content = RAW_BODIES.get((req["content"] or b"").decode("utf-8", "replace"), req["content"])
        r = client.request(req["method"], req["url"], content=content, headers=req["headers"])
        _check(req, r)

    check()
    flush(client)
    app_services(client).jobs.wait(60)
    assert _rows(db, world["b_id"]) == world["b_rows"]  # A changed nothing of B's
