"""Support for the HTTP API tests: settings for a test database and a loopback LLM, an in-process
app (FastAPI TestClient, real HTTP semantics, real Postgres); the real ``livingrag serve``
subprocess on loopback for the reliability tests is :mod:`livingrag.testing.server`'s."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from livingrag.config import Settings, get_settings
from livingrag.testing.server import ADMIN_KEY, Server, free_port, running_server, server_env
from tests.conftest import db_settings_for
from tests.corpus_support import CORPUS

if TYPE_CHECKING:
    from livingrag.api.deps import Services

ROOT = Path(__file__).resolve().parents[1]
__all__ = [  # the subprocess server lives in livingrag.testing.server (the load benchmark starts it too)
    "ADMIN_KEY",
    "ROOT",
    "Server",
    "api_settings",
    "app_client",
    "app_services",
    "auth",
    "flush",
    "free_port",
    "running_server",
    "seed_corpus",
    "server_env",
]


def api_settings(database_url: str, llm_url: str, **groups: Any) -> Settings:
    """Settings for the app under test: the test database, the loopback LLM, the offline verifier."""
    llm = {"provider": "openai", "base_url": llm_url, "model": "test", "timeout_s": 2.0, "max_retries": 0}
    llm |= groups.pop("llm", {})
    api = {"admin_key": ADMIN_KEY} | groups.pop("api", {})
    gates = {"verifier": "offline"} | groups.pop("gates", {})
    return get_settings(db=db_settings_for(database_url), llm=llm, api=api, gates=gates, **groups)


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def seed_corpus(client: Any, key: str, name: str = "wiki", docs: list[dict[str, str]] | None = None) -> int:
    """Create a corpus through the API and add the test corpus's passages; returns its id."""
    r = client.post("/v1/corpora", json={"name": name}, headers=auth(key))
    assert r.status_code == 201, r.text
    cid = int(r.json()["id"])
    r = client.post(f"/v1/corpora/{cid}/passages", json={"passages": docs or CORPUS}, headers=auth(key))
    assert r.status_code == 201, r.text
    return cid


@contextmanager
def app_client(db: Any, settings: Settings, *, store: Any = None) -> Iterator[Any]:
    """An in-process app on the session's database (TestClient); the pipeline is closed afterwards."""
    from fastapi.testclient import TestClient

    from livingrag.api import create_app
    from livingrag.pipeline.answer_pipeline import LivingRAG

    rag = LivingRAG(settings, db=db, store=store)
    try:
        with TestClient(create_app(settings, db=db, rag=rag)) as client:
            yield client
    finally:
        rag.close(timeout=30)


def flush(client: Any) -> None:
    """Wait for the app's queued write-backs."""
    assert app_services(client).rag.flush(60)


def app_services(client: Any) -> Services:
    """The in-process app's services (``client.app``, typed by Starlette as a bare ASGI app)."""
    svc: Services = client.app.state.services
    return svc
