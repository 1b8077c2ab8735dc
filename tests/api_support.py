"""Support for the HTTP API tests: settings for a test database and a loopback LLM, an in-process
app (FastAPI TestClient, real HTTP semantics, real Postgres) and a real ``livingrag serve``
subprocess on loopback for the reliability tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from livingrag.config import Settings, get_settings
from tests.conftest import db_settings_for
from tests.corpus_support import CORPUS

ADMIN_KEY = "6OkuGdf6IUsXoUDUBh5x6oalC2uO8koyqyumYoGXDCA"  # strong enough for serve (livingrag.api.admin_key)
ROOT = Path(__file__).resolve().parents[1]


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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_env(database_url: str, llm_url: str, **extra: str) -> dict[str, str]:
    """Environment of a ``livingrag serve`` subprocess against the test database and loopback LLM."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIVINGRAG_")}
    env |= {
        "PYTHONPATH": str(ROOT),
        "LIVINGRAG_DB__URL": database_url,
        "LIVINGRAG_LLM__PROVIDER": "openai",
        "LIVINGRAG_LLM__BASE_URL": llm_url,
        "LIVINGRAG_LLM__MODEL": "test",
        "LIVINGRAG_LLM__TIMEOUT_S": "5",
        "LIVINGRAG_LLM__MAX_RETRIES": "0",
        "LIVINGRAG_GATES__VERIFIER": "offline",
        "LIVINGRAG_API__ADMIN_KEY": ADMIN_KEY,
    }
    return env | extra


class Server:
    """A ``livingrag serve`` subprocess on a loopback port."""

    def __init__(
        self, env: dict[str, str], port: int | None = None, log_path: Path | None = None, args: tuple[str, ...] = ()
    ) -> None:
        self.env = env
        self.args = args
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 120.0) -> Server:
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        cmd = [sys.executable, "-m", "livingrag.cli.main", "serve", "--port", str(self.port), "--log-level", "warning"]
        cmd += self.args
        self.proc = subprocess.Popen(cmd, env=self.env, cwd=ROOT, stdout=out, stderr=out)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}; see {self.log_path}")
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        raise TimeoutError(f"server not healthy within {timeout} s")

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@contextmanager
def running_server(env: dict[str, str], log_path: Path | None = None) -> Iterator[Server]:
    srv = Server(env, log_path=log_path).start()
    try:
        yield srv
    finally:
        srv.stop()


@contextmanager
def app_client(db: Any, settings: Settings, *, store: Any = None) -> Iterator[Any]:
    """An in-process app on the session's database (TestClient); the pipeline is closed afterwards."""
    from fastapi.testclient import TestClient

    from livingrag.api import create_app
    from livingrag.pipeline.core import LivingRAG

    rag = LivingRAG(settings, db=db, store=store)
    try:
        with TestClient(create_app(settings, db=db, rag=rag)) as client:
            yield client
    finally:
        rag.close(timeout=30)


def flush(client: Any) -> None:
    """Wait for the app's queued write-backs."""
    assert client.app.state.services.rag.flush(60)
