"""Shared fixtures: one PostgreSQL server per test session, a fresh database migrated to head,
and a fresh tenant per test for isolation.

Set ``LIVINGRAG_TEST_DB_URL`` to run against an external PostgreSQL + pgvector server (its user
needs CREATEDB and CREATEROLE); otherwise an embedded server runs in a temporary directory.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from livingrag.config import DBSettings
from livingrag.db.engine import Database


@pytest.fixture(scope="session")
def pg_server_url() -> Iterator[str]:
    """Owner URL of the PostgreSQL server used by the whole test session."""
    external = os.environ.get("LIVINGRAG_TEST_DB_URL")
    if external:
        yield DBSettings(url=SecretStr(external)).url.get_secret_value()  # type: ignore[union-attr]
        return
    from livingrag.db.embedded import start_embedded

    data_dir = Path(tempfile.mkdtemp(prefix="livingrag-test-pg-"))
    server = start_embedded(data_dir, cleanup_mode="delete")
    yield server.url
    server.stop()
    shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def make_database_url(pg_server_url: str) -> Iterator[Callable[[], str]]:
    """Create fresh, empty databases on the test server; all are dropped at the end."""
    created: list[str] = []
    admin = create_engine(pg_server_url, isolation_level="AUTOCOMMIT")

    def make() -> str:
        name = f"lrg_test_{uuid.uuid4().hex[:12]}"
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        created.append(name)
        return make_url(pg_server_url).set(database=name).render_as_string(hide_password=False)

    yield make
    with admin.connect() as conn:
        for name in created:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def db_settings_for(url: str, **kw: Any) -> DBSettings:
    return DBSettings(url=SecretStr(url), data_dir=Path(tempfile.gettempdir()) / "livingrag-unused", **kw)


def loopback_llm_env(mp: pytest.MonkeyPatch, database_url: str, llm_base_url: str, *, verifier: str) -> None:
    """The commands of this process use the test database and the loopback OpenAI-compatible LLM
    at ``llm_base_url`` (model ``loopback-qa``, no retries), with ``gates.verifier = verifier``."""
    mp.setenv("LIVINGRAG_DB__URL", database_url)
    mp.setenv("LIVINGRAG_LLM__PROVIDER", "openai")
    mp.setenv("LIVINGRAG_LLM__BASE_URL", llm_base_url)
    mp.setenv("LIVINGRAG_LLM__MODEL", "loopback-qa")
    mp.setenv("LIVINGRAG_LLM__MAX_RETRIES", "0")
    mp.setenv("LIVINGRAG_GATES__VERIFIER", verifier)


@pytest.fixture(scope="session")
def database_url(make_database_url: Callable[[], str]) -> str:
    """URL of the session's database, migrated to head."""
    from livingrag.db import migrate

    url = make_database_url()
    db = Database(db_settings_for(url))
    migrate.upgrade(db)
    db.dispose()
    return url


@pytest.fixture(scope="session")
def db(database_url: str) -> Iterator[Database]:
    """The session's :class:`Database` (schema at head)."""
    database = Database(db_settings_for(database_url))
    yield database
    database.dispose()


@pytest.fixture
def make_tenant(db: Database) -> Callable[..., tuple[int, str]]:
    """Create a fresh tenant (unique name) and return (id, api_key)."""
    from livingrag.db.repositories import tenants

    def make(prefix: str = "t") -> tuple[int, str]:
        with db.owner_session() as s:
            rec, key = tenants.create_tenant(s, f"{prefix}-{uuid.uuid4().hex[:10]}")
        return rec.id, key

    return make


@pytest.fixture
def tenant(make_tenant: Callable[..., tuple[int, str]]) -> int:
    """A fresh tenant for this test: tests isolate themselves by tenant."""
    return make_tenant()[0]
