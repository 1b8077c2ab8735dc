"""Fuzzing the OpenAPI spec with hypothesis: for every operation the spec documents, requests with
random path and query parameters and bodies (random JSON, or the operation's own fields filled
with random values of any type) never get a 500, and every error is the structured body.

Runs on a database of its own: the fuzzer holds the admin key and may delete any tenant."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from livingrag.db import migrate
from livingrag.db.engine import Database
from livingrag.testing.openai_server import OpenAICompatServer
from tests.api_support import ADMIN_KEY, api_settings, app_client, auth, seed_corpus
from tests.conftest import db_settings_for

pytestmark = pytest.mark.db

EXAMPLES = 40

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
    | st.sampled_from(["\x00", "wiki\x00", "\ud800", " ", "x" * 5000, "1", "wiki"])
)
json_values = st.recursive(
    json_scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)  # fmt: skip
id_like = st.integers(min_value=-5, max_value=2**70) | st.sampled_from(["0", "abc", "1e3", "-1", "%00", "999999999999"])


@pytest.fixture(scope="module")
def fuzz_db(make_database_url: Callable[[], str]) -> Iterator[tuple[Database, str]]:
    url = make_database_url()
    db = Database(db_settings_for(url))
    migrate.upgrade(db)
    db.dispose()
    database = Database(db_settings_for(url))
    yield database, url
    database.dispose()


@pytest.fixture(scope="module")
def fuzz(fuzz_db: tuple[Database, str]) -> Iterator[tuple[TestClient, str, int, dict[str, Any]]]:
    db, url = fuzz_db
    with OpenAICompatServer() as llm, app_client(db, api_settings(url, llm.base_url)) as client:
        r = client.post("/v1/tenants", json={"name": "fuzz"}, headers=auth(ADMIN_KEY))
        key = r.json()["api_key"]
        cid = seed_corpus(client, key)
        yield client, key, cid, client.get("/openapi.json").json()


def _operations() -> list[tuple[str, str]]:
    from livingrag.api import create_app
    from livingrag.config import get_settings

    spec = create_app(get_settings()).openapi()
    return [(p, m) for p, item in spec["paths"].items() for m in item if m in ("get", "post", "patch", "delete")]


def _resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref:
        return spec["components"]["schemas"][ref.rsplit("/", 1)[1]]
    return schema


@st.composite
def requests(draw: st.DrawFn, spec: dict[str, Any], path: str, method: str, cid: int) -> dict[str, Any]:
    op = spec["paths"][path][method]
    url = path
    params: dict[str, Any] = {}
    for p in op.get("parameters", []):
        if p["in"] == "path":
            value = draw(st.just(cid) | id_like) if p["name"] == "corpus_id" else draw(id_like | st.integers(1, 50))
            url = url.replace("{" + p["name"] + "}", str(value))
        elif p["in"] == "query" and draw(st.booleans()):
            params[p["name"]] = draw(id_like | st.booleans() | st.text(max_size=10))
    body: Any = None
    if "requestBody" in op:
        schema = _resolve(spec, op["requestBody"]["content"]["application/json"]["schema"])
        props = list(schema.get("properties", {}))
        items = st.lists(
            st.fixed_dictionaries({}, optional={"text": json_values, "title": json_values, "external_id": json_values}),
            max_size=3,
        )
        body = draw(
            json_values
            | st.fixed_dictionaries({}, optional={k: json_values for k in props})
            | st.fixed_dictionaries({}, optional={k: items | id_like for k in props})
        )
    admin = path.startswith(("/v1/tenants", "/v1/admin"))
    return {"method": method.upper(), "url": url, "params": params, "json": body, "admin": admin}


@pytest.mark.parametrize(("path", "method"), _operations())
def test_no_operation_answers_500(fuzz: tuple[TestClient, str, int, dict[str, Any]], path: str, method: str) -> None:
    client, key, cid, spec = fuzz
    client = TestClient(client.app, raise_server_exceptions=False)  # see 500s as responses

    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(req=requests(spec, path, method, cid))
    def check(req: dict[str, Any]) -> None:
        headers = auth(ADMIN_KEY if req["admin"] else key)
        body = None if req["json"] is None else json.dumps(req["json"]).encode()  # \u escapes: lone surrogates too
        headers |= {"content-type": "application/json"}
        r = client.request(req["method"], req["url"], params=req["params"], content=body, headers=headers)
        assert r.status_code != 500 and r.status_code < 600, (req, r.status_code, r.text)
        if r.status_code >= 400:
            err = r.json()["error"]
            assert isinstance(err["code"], str) and isinstance(err["message"], str) and err["message"], r.text

    check()
