"""The owner route is narrow (issue 19, finding 2): only the named maintenance paths open owner
sessions or owner connections; every request a tenant key makes runs as the application role.

Two checks: a scan of the package's source for every use of the owner route (``owner_session``,
``owner_engine``, ``owner_url``) against the list below, which must match exactly (a new caller
fails until it is named here with its reason; a removed one fails until it is struck off), and a
run of the HTTP API where the owner route raises for everything a tenant key does."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import livingrag
from livingrag.db.engine import Database

OWNER_ATTRIBUTES = frozenset({"owner_session", "owner_engine", "owner_url", "_owner_sessions"})

OWNER_ROUTES: dict[str, str] = {
    # the route itself
    "db/engine.py:Database.__init__": "builds the owner engine and its sessions",
    "db/engine.py:Database.owner_session": "the owner route: sets livingrag.maintenance",
    "db/engine.py:Database.dispose": "closes the owner engine",
    # migrations and schema status (DDL, alembic_version: no tenant rows)
    "db/migrate.py:status": "reads alembic_version",
    "db/migrate.py:_run": "runs alembic upgrade/downgrade",
    "db/migrations/env.py:run_migrations_online": "alembic's connection",
    # health: the schema revision (alembic_version), no tenant rows
    "api/routes/health.py:_health": "health: schema revision",
    # tenant administration (the admin key: tenants, any tenant's keys, acting for a tenant that
    # must exist; livingrag tenant, livingrag key)
    "services/tenants.py:*": "operator: tenants and any tenant's keys",
    # cross-tenant store administration (the admin key's /v1/admin; livingrag admin)
    "services/maintenance.py:*": "operator: expiry, pruning, statistics and listing across tenants",
    # recovery at startup
    "experience/drop_log.py:log_lost_candidates": "logs lost write-backs of every tenant as dropped",
    # tenant lookup by name (CLI and library callers; the API passes ids)
    "pipeline/answer_pipeline.py:LivingRAG.resolve": "a tenant named, not numbered",
    "corpus/service.py:ensure_tenant": "the default tenant of the CLI",
    # scope-index maintenance (sizes of every scope, then DDL)
    "experience/scope_indexing.py:index_scopes": "plans and builds per-scope HNSW indexes",
    # the embedded server's read-ahead at its start (catalog queries on every database, no rows read),
    # then the load of the experience indexes into its shared buffers (a C function in pg_temp)
    "db/prewarm.py:Prewarm._read_ahead": "reads every database's experience relation files",
    "db/prewarm.py:Prewarm._load_buffers": "loads every database's experience indexes into shared buffers",
    # operator tools, not request paths
    "diagnostics.py:_where": "doctor: the server's address",
    "diagnostics.py:check_database": "doctor: server version",
    "cli/db_cmd.py:status": "db status",
    "cli/db_cmd.py:url": "db url: prints the server's connection string for the operator",
    "cli/db_cmd.py:psql": "db psql: opens psql on the server for the operator",
    "cli/db_cmd.py:replica_create": "db replica create: pg_basebackup copies the embedded server as its superuser",
    "services/database.py:memory_in_use": "db status: the server's memory settings and the store's size",
    "bench/store_bench.py:*": "benchmark harness (its own databases)",
    "bench/store_data.py:*": "benchmark harness: loads its own databases",
}


def _owner_uses() -> set[str]:
    """``module:qualname`` of every function of the package that touches the owner route."""
    root = Path(livingrag.__file__).parent
    found: set[str] = set()
    for path in sorted(root.rglob("*.py")):
        module = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))

        def visit(node: ast.AST, scope: list[str], module: str = module) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    visit(child, [*scope, child.name])
                    continue
                if isinstance(child, ast.Attribute) and child.attr in OWNER_ATTRIBUTES:
                    qual = ".".join(s for s in scope) or "<module>"
                    found.add(f"{module}:{qual}")
                visit(child, scope)

        visit(tree, [])
    return found


def _named(use: str) -> str | None:
    module, _ = use.split(":", 1)
    if use in OWNER_ROUTES:
        return use
    return f"{module}:*" if f"{module}:*" in OWNER_ROUTES else None


def test_only_the_named_paths_use_the_owner_route() -> None:
    uses = _owner_uses()
    unnamed = sorted(u for u in uses if _named(u) is None)
    assert unnamed == [], (
        f"owner route used outside OWNER_ROUTES (name it with its reason, or use a tenant session): {unnamed}"
    )
    stale = sorted(set(OWNER_ROUTES) - {_named(u) for u in uses})
    assert stale == [], f"OWNER_ROUTES names paths that no longer use the owner route: {stale}"


OPERATOR_SERVICES = frozenset(
    {"livingrag.services.tenants", "livingrag.services.maintenance", "livingrag.experience.drop_log"}
)
"""The services that open the owner route for the API (see OWNER_ROUTES)."""


def _api_modules_importing(targets: frozenset[str]) -> set[str]:
    root = Path(livingrag.__file__).parent
    found = set()
    for path in sorted((root / "api").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: set[str] = set()
            if isinstance(node, ast.Import):
                names = {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = {node.module} | {f"{node.module}.{a.name}" for a in node.names}
            if names & targets:
                found.add(path.relative_to(root).as_posix())
    return found


def test_no_other_api_module_uses_the_owner_route() -> None:
    """Of the API, only health opens the owner route itself; the admin-key routes, startup recovery
    and acting-for-a-tenant reach it through the operator's services, and nothing else does."""
    api = {u for u in _owner_uses() if u.startswith("api/")}
    assert {u.split(":")[0] for u in api} == {"api/routes/health.py"}
    assert _api_modules_importing(OPERATOR_SERVICES) == {
        "api/deps.py",
        "api/routes/tenants.py",
        "api/routes/keys.py",
        "api/routes/admin.py",
        "api/app.py",
    }


@pytest.mark.db
def test_tenant_key_requests_never_run_as_the_owner(
    db: Database, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the owner route raising, a tenant creates a corpus, adds and reads passages, asks
    (write-back included), lists experiences and its keys, and reads the store's health."""
    from livingrag.testing.openai_server import OpenAICompatServer
    from tests.api_support import ADMIN_KEY, api_settings, app_client, auth, flush, seed_corpus
    from tests.corpus_support import QUESTIONS

    calls: list[str] = []

    @contextmanager
    def refused(self: Database) -> Iterator[Any]:
        calls.append("owner_session")
        raise AssertionError("owner_session on a tenant request")
        yield  # pragma: no cover

    with OpenAICompatServer() as llm, app_client(db, api_settings(database_url, llm.base_url)) as client:
        r = client.post("/v1/tenants", json={"name": "owner-route"}, headers=auth(ADMIN_KEY))
        assert r.status_code == 201, r.text
        key = r.json()["api_key"]
        monkeypatch.setattr(Database, "owner_session", refused)
        monkeypatch.setattr(Database, "owner_engine", property(lambda _s: calls.append("owner_engine")), raising=False)
        try:
            cid = seed_corpus(client, key, "owner-route")
            r = client.get(f"/v1/corpora/{cid}/passages", headers=auth(key))
            assert r.status_code == 200, r.text
            r = client.post("/v1/ask", json={"question": QUESTIONS[0][0], "corpus": cid}, headers=auth(key))
            assert r.status_code == 200, r.text
            flush(client)
            for path in ("/v1/experiences", "/v1/keys", f"/v1/corpora/{cid}", "/v1/corpora"):
                r = client.get(path, headers=auth(key))
                assert r.status_code == 200, (path, r.text)
        finally:
            monkeypatch.undo()
    assert calls == []
