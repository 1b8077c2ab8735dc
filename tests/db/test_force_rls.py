"""Row-level security is forced (issue 19, finding 2): the tables' owner is bound by the policies
too and reaches every tenant's rows only through the owner route (``Database.owner_session``,
which sets ``livingrag.maintenance``); the application role cannot take that route.

The test server's owner is a superuser, which bypasses RLS even when it is forced, so the
behaviour is tested on a database migrated by a non-superuser owner, as in production. Every
behaviour test runs with ``db.app_url`` unset (the app logs in as the owner and switches to
``db.app_role``) and set to a login role of its own."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ProgrammingError

from livingrag.db import migrate
from livingrag.db.engine import Database
from livingrag.db.models import GATE_TABLES, JOB_TABLES, KEY_TABLES, TENANT_OWNED_TABLES, TRUST_TABLES
from livingrag.db.repositories import api_keys, recovery, tenants
from tests.conftest import db_settings_for
from tests.db.test_rls import _seed

pytestmark = pytest.mark.db
OWNER = "livingrag_test_owner"
LOGIN = "livingrag_test_force_login"
FORCED = ("tenants", *TENANT_OWNED_TABLES, *KEY_TABLES, *TRUST_TABLES, *JOB_TABLES, *GATE_TABLES)


def test_rls_is_forced_on_every_tenant_table(db: Database) -> None:
    """Every table of the schema with a tenant_id column (and tenants) has RLS enabled and forced."""
    with db.owner_engine.connect() as c:
        rows = c.execute(
            text(
                "SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity FROM pg_class c"
                " WHERE c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace"
                " AND (c.relname = 'tenants' OR EXISTS (SELECT 1 FROM pg_attribute a"
                "   WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped))"
            )
        ).all()
    found = {name: (enabled, forced) for name, enabled, forced in rows}
    assert set(found) == set(FORCED)
    assert {t for t, (enabled, forced) in found.items() if not (enabled and forced)} == set()


@pytest.fixture(scope="module")
def owned_url(pg_server_url: str, database_url: str) -> Iterator[str]:
    """A fresh database owned and migrated by a non-superuser role (``database_url`` first: the
    application role exists). The superuser only creates the roles, the database and pgvector."""
    name = f"lrg_owned_{uuid.uuid4().hex[:10]}"
    admin = create_engine(pg_server_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        for role in (OWNER, LOGIN):
            c.execute(
                text(
                    f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{role}') THEN "
                    f"CREATE ROLE {role} LOGIN NOSUPERUSER NOBYPASSRLS PASSWORD 'force-test'; END IF; END $$"
                )
            )
        c.execute(text(f"GRANT livingrag_app TO {OWNER}, {LOGIN}"))  # SET ROLE / the app's login role
        c.execute(text(f'CREATE DATABASE "{name}" OWNER {OWNER}'))
    url = make_url(pg_server_url).set(database=name)
    superuser = create_engine(url, isolation_level="AUTOCOMMIT")
    with superuser.connect() as c:
        c.execute(text("CREATE EXTENSION vector"))
    superuser.dispose()
    owner_url = url.set(username=OWNER, password="force-test").render_as_string(hide_password=False)
    owner_db = Database(db_settings_for(owner_url))
    migrate.upgrade(owner_db)
    owner_db.dispose()
    yield owner_url
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(scope="module", params=["app_role", "app_url"])
def owned(request: pytest.FixtureRequest, owned_url: str) -> Iterator[Database]:
    """The non-superuser owner's database, its app sessions as ``db.app_role`` or ``db.app_url``."""
    kw = {}
    if request.param == "app_url":
        kw["app_url"] = make_url(owned_url).set(username=LOGIN).render_as_string(hide_password=False)
    database = Database(db_settings_for(owned_url, **kw))
    database.check_app_role()
    yield database
    database.dispose()


@pytest.fixture
def two_tenants(owned: Database) -> Callable[[], tuple[int, int]]:
    def make() -> tuple[int, int]:
        ids = []
        for tag in ("a", "b"):
            with owned.owner_session() as s:
                rec, _ = tenants.create_tenant(s, f"force-{tag}-{uuid.uuid4().hex[:8]}")
            _seed(owned, rec.id, f"{tag}{rec.id}")
            ids.append(rec.id)
        return ids[0], ids[1]

    return make


def test_the_owner_is_a_non_superuser(owned: Database) -> None:
    with owned.owner_engine.connect() as c:
        assert c.execute(text("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")).one() == (
            False,
            False,
        )
        owners = set(c.execute(text("SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = 'public'")).scalars())
    assert owners == {OWNER}


def test_an_owner_connection_off_the_owner_route_is_bound_by_rls(
    owned: Database, two_tenants: Callable[[], tuple[int, int]]
) -> None:
    """A plain owner connection sees no tenant's row, one naming a tenant sees only that tenant's,
    and the owner cannot write a row for a tenant it did not name."""
    a, b = two_tenants()
    with owned.owner_engine.connect() as c:
        for table in FORCED:
            assert c.execute(text(f"SELECT count(*) FROM {table}")).scalar() == 0, table
        c.execute(text("SELECT set_config('livingrag.tenant_id', :t, true)"), {"t": str(a)})
        for table in (*TENANT_OWNED_TABLES, *JOB_TABLES):
            seen = set(c.execute(text(f"SELECT DISTINCT tenant_id FROM {table}")).scalars())
            assert seen == {a}, table
        with pytest.raises(ProgrammingError, match="row-level security"):
            c.execute(text("INSERT INTO tenants (name) VALUES ('planted-by-owner')"))
        c.rollback()
        with pytest.raises(ProgrammingError, match="row-level security"):
            c.execute(
                text("INSERT INTO query_log (tenant_id, corpus_id, query, mode) SELECT :b, 1, 'q', 'x'"),
                {"b": b},
            )
        c.rollback()


def test_the_owner_route_reaches_every_tenant(owned: Database, two_tenants: Callable[[], tuple[int, int]]) -> None:
    """owner_session: tenant administration, key lookup, crash recovery and deletion work for the
    non-superuser owner under forced RLS."""
    a, b = two_tenants()
    with owned.owner_session() as s:
        for table in (*TENANT_OWNED_TABLES, *JOB_TABLES):
            seen = set(
                s.execute(text(f"SELECT DISTINCT tenant_id FROM {table} WHERE tenant_id IN (:a, :b)"), {"a": a, "b": b})
                .scalars()
                .all()
            )
            assert seen == {a, b}, table
        assert {t.id for t in tenants.list_tenants(s)} >= {a, b}
        _, key = api_keys.create_key(s, a, "second", ["read"])
    # the SECURITY DEFINER key lookup runs as the owner and sets the maintenance flag itself
    with owned.app_session() as s:
        grant = api_keys.grant_for_key(s, key)
    assert grant is not None and (grant.tenant_id, grant.scopes) == (a, {"read"})
    with owned.tenant_session(a) as s:
        s.execute(
            text(
                "INSERT INTO query_log (tenant_id, corpus_id, query, mode, answer, created_at)"
                " SELECT :t, id, 'lost?', 'living', 'yes', now() - interval '1 hour' FROM corpora"
            ),
            {"t": a},
        )
    now = datetime.now(UTC)
    with owned.owner_session() as s:
        assert recovery.log_lost_candidates(s, before=now - timedelta(minutes=5), since=now - timedelta(days=1)) >= 1
    with owned.owner_session() as s:
        tenants.delete_tenant(s, b)
    with owned.owner_session() as s:
        for table in (*TENANT_OWNED_TABLES, *KEY_TABLES, *JOB_TABLES):
            assert s.execute(text(f"SELECT count(*) FROM {table} WHERE tenant_id = :b"), {"b": b}).scalar() == 0


def test_the_application_role_cannot_take_the_owner_route(
    owned: Database, two_tenants: Callable[[], tuple[int, int]]
) -> None:
    """Setting livingrag.maintenance does nothing for the application role: the maintenance
    policy applies to the tables' owner alone."""
    a, b = two_tenants()
    with owned.app_session() as s:
        s.execute(text("SELECT set_config('livingrag.maintenance', 'on', true)"))
        for table in ("tenants", *TENANT_OWNED_TABLES, *JOB_TABLES):
            assert s.execute(text(f"SELECT count(*) FROM {table}")).scalar() == 0, table
    with owned.tenant_session(a) as s:
        s.execute(text("SELECT set_config('livingrag.maintenance', 'on', true)"))
        for table in (*TENANT_OWNED_TABLES, *JOB_TABLES):
            assert s.execute(text(f"SELECT count(*) FROM {table} WHERE tenant_id = :b"), {"b": b}).scalar() == 0
        with pytest.raises(ProgrammingError, match=r"permission denied|row-level security"):
            s.execute(text("INSERT INTO tenants (name) VALUES ('planted-by-app')"))


def test_migrations_run_as_the_non_superuser_owner_with_data(owned_url: str) -> None:
    """0006 and 0007 downgrade and upgrade again as the non-superuser owner with rows of two
    tenants in every table; the data migrations' connection takes the owner route."""
    owner = Database(db_settings_for(owned_url))
    try:
        for tag in ("m1", "m2"):
            with owner.owner_session() as s:
                rec, _ = tenants.create_tenant(s, f"force-{tag}-{uuid.uuid4().hex[:8]}")
            _seed(owner, rec.id, f"{tag}{rec.id}")

        def counts() -> dict[str, int]:
            with owner.owner_session() as s:
                # the tables that exist at 0005 (the feedback tables of 0011 are made anew, empty)
                kept = ("tenants", *TENANT_OWNED_TABLES, *KEY_TABLES)
                return {t: s.execute(text(f"SELECT count(*) FROM {t}")).scalar_one() for t in kept}

        before = counts()
        assert all(before.values())
        migrate.downgrade(owner, "0005")
        with owner.owner_engine.connect() as c:  # not forced at 0005: the owner bypasses RLS
            assert c.execute(text("SELECT count(*) FROM passages")).scalar() == before["passages"]
        migrate.upgrade(owner)
        assert counts() == before
        with owner.owner_engine.connect() as c:
            assert c.execute(text("SELECT count(*) FROM passages")).scalar() == 0
            assert c.execute(text("SELECT current_setting('livingrag.maintenance', true)")).scalar() in ("", None)
    finally:
        owner.dispose()


def test_the_index_job_doors_reach_every_tenant_for_the_application_role(
    owned: Database, two_tenants: Callable[[], tuple[int, int]]
) -> None:
    """Index-job workers run as the application role: with the non-superuser owner and forced RLS,
    the migration's functions count, take and put back the jobs of every tenant (and only those
    doors do: the role's own session sees no tenant's job)."""
    from livingrag.db.repositories import index_jobs

    a, b = two_tenants()  # each with one queued job (tests.db.test_rls._seed)
    with owned.app_session() as s:
        assert s.execute(text("SELECT count(*) FROM index_jobs")).scalar() == 0
        assert index_jobs.count_all_active(s) >= 2
    taken = set()
    with owned.app_session() as s:
        while (claimed := index_jobs.claim_next(s, worker="w", worker_lock=1)) is not None:  # no session holds 1
            taken.add(claimed[0])
    assert {a, b} <= taken
    with owned.tenant_session(a) as s:
        assert {j.state for j in index_jobs.list_jobs(s)} == {"running"}
    with owned.app_session() as s:
        back = index_jobs.recover_orphans(s, stale_after_s=60, max_attempts=2, failed_reason="gone: {why}")
    assert {(o.tenant_id, o.state) for o in back} >= {(a, "queued"), (b, "queued")}
    assert all("process is gone" in o.why for o in back)
    with owned.tenant_session(b) as s:
        assert {(j.state, j.attempts) for j in index_jobs.list_jobs(s)} == {("queued", 1)}
