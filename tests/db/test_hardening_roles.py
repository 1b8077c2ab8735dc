"""The startup guard follows role membership (issue 42, item 1).

``Database.check_app_role`` refuses an application role that row-level security does not bind. A
login that is merely a *member* of a superuser, of a ``BYPASSRLS`` role or of the tables' owner
(directly or through other roles, inheriting or only able to ``SET ROLE``) is not bound either: it
can ``SET ROLE`` to that role, and as the owner turn ``livingrag.maintenance`` on (the
``owner_maintenance`` policy applies ``TO <owner>``) or disable RLS. Each such login is refused,
naming the role, the chain of membership and what to revoke; the ordinary login (a member of
``livingrag_app`` only) still starts.

Roles are cluster-wide: each test makes roles with unique names and drops them afterwards."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url

from livingrag.db import migrate
from livingrag.db.engine import Database
from livingrag.errors import ConfigError
from tests.conftest import db_settings_for

pytestmark = pytest.mark.db
PASSWORD = "hardening-roles"
OWNER = "lrg_hardening_owner"


@pytest.fixture(scope="module")
def superuser(pg_server_url: str) -> Iterator[Engine]:
    engine = create_engine(pg_server_url, isolation_level="AUTOCOMMIT")
    yield engine
    engine.dispose()


@pytest.fixture
def make_role(superuser: Engine) -> Iterator[Callable[[str], str]]:
    """``make_role(options)``: a role with a unique name made with ``options`` (``{name}`` in them is
    the role itself); every role made is dropped at the end of the test."""
    made: list[str] = []

    def make(options: str, *, prefix: str = "lrg_h") -> str:
        name = f"{prefix}_{uuid.uuid4().hex[:8]}"
        with superuser.connect() as c:
            c.execute(text(f"CREATE ROLE {name} {options.format(name=name)}"))
        made.append(name)
        return name

    yield make
    with superuser.connect() as c:
        for name in reversed(made):
            c.execute(text(f"DROP ROLE IF EXISTS {name}"))


def _login_db(url: str, login: str) -> Database:
    app_url = make_url(url).set(username=login, password=PASSWORD).render_as_string(hide_password=False)
    return Database(db_settings_for(url, app_url=app_url))


def _refusal(url: str, login: str) -> str:
    """The error ``check_app_role`` raises for ``login`` as the app login (fails if none)."""
    database = _login_db(url, login)
    try:
        with pytest.raises(ConfigError) as caught:
            database.check_app_role()
        return str(caught.value)
    finally:
        database.dispose()


def _starts(url: str, login: str) -> None:
    database = _login_db(url, login)
    try:
        assert database.app_role_problems() == []
        database.check_app_role()
    finally:
        database.dispose()


@pytest.fixture(scope="module")
def owned_url(pg_server_url: str, database_url: str, superuser: Engine) -> Iterator[str]:
    """A database owned and migrated by a non-superuser role (as in production): the tables'
    owner is then an ordinary role whose members the old guard let through."""
    name = f"lrg_hardening_{uuid.uuid4().hex[:10]}"
    with superuser.connect() as c:
        c.execute(
            text(
                f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{OWNER}') THEN "
                f"CREATE ROLE {OWNER} LOGIN NOSUPERUSER NOBYPASSRLS PASSWORD '{PASSWORD}'; END IF; END $$"
            )
        )
        c.execute(text(f"GRANT livingrag_app TO {OWNER}"))
        c.execute(text(f'CREATE DATABASE "{name}" OWNER {OWNER}'))
    url = make_url(pg_server_url).set(database=name)
    su = create_engine(url, isolation_level="AUTOCOMMIT")
    with su.connect() as c:
        c.execute(text("CREATE EXTENSION vector"))
    su.dispose()
    owner_url = url.set(username=OWNER, password=PASSWORD).render_as_string(hide_password=False)
    owner_db = Database(db_settings_for(owner_url))
    migrate.upgrade(owner_db)
    owner_db.dispose()
    yield owner_url
    with superuser.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def _superuser_name(superuser: Engine) -> str:
    with superuser.connect() as c:
        return str(c.execute(text("SELECT current_user")).scalar_one())


def test_a_login_that_is_a_member_of_a_superuser_is_refused_naming_the_chain(
    database_url: str, superuser: Engine, make_role: Callable[..., str]
) -> None:
    """``CREATE ROLE web LOGIN IN ROLE livingrag_app, postgres`` (the issue's example)."""
    su = _superuser_name(superuser)
    web = make_role(f"LOGIN PASSWORD '{PASSWORD}' IN ROLE livingrag_app, {su}")
    message = _refusal(database_url, web)
    assert f"role '{web}'" in message and "LIVINGRAG_DB__APP_URL" in message
    assert f"member of '{su}'" in message and f"{web} → {su}" in message and "superuser" in message
    assert f'REVOKE "{su}" FROM "{web}"' in message


def test_a_member_of_a_bypassrls_role_through_another_role_is_refused(
    database_url: str, make_role: Callable[..., str]
) -> None:
    bypass = make_role("NOLOGIN BYPASSRLS")
    middle = make_role(f"NOLOGIN IN ROLE {bypass}")
    web = make_role(f"LOGIN PASSWORD '{PASSWORD}' IN ROLE livingrag_app, {middle}")
    message = _refusal(database_url, web)
    assert f"member of '{bypass}'" in message and f"{web} → {middle} → {bypass}" in message
    assert "BYPASSRLS" in message and f'REVOKE "{middle}" FROM "{web}"' in message


def test_a_member_of_the_table_owner_is_refused_even_without_inheriting(
    owned_url: str, superuser: Engine, make_role: Callable[..., str]
) -> None:
    """Membership in the owner, inherited or not (SET ROLE is enough to take the maintenance
    route), makes a login the owner in all but name."""
    inheriting = make_role(f"LOGIN PASSWORD '{PASSWORD}' IN ROLE livingrag_app, {OWNER}")
    message = _refusal(owned_url, inheriting)
    assert f"member of '{OWNER}'" in message and f"{inheriting} → {OWNER}" in message
    assert "owns" in message and "livingrag.maintenance" in message

    setter = make_role(f"LOGIN PASSWORD '{PASSWORD}' IN ROLE livingrag_app")
    with superuser.connect() as c:
        if int(c.execute(text("SHOW server_version_num")).scalar_one()) < 160000:
            pytest.skip("membership options (INHERIT FALSE, SET TRUE) need PostgreSQL 16")
        c.execute(text(f"GRANT {OWNER} TO {setter} WITH INHERIT FALSE, SET TRUE"))
    # the hole: without inheriting anything this login can SET ROLE to the owner, whom the
    # owner_maintenance policies let through every tenant's rows once livingrag.maintenance is on
    login = make_url(owned_url).set(username=setter, password=PASSWORD)
    engine = create_engine(login)
    try:
        with engine.connect() as c:
            c.execute(text(f"SET ROLE {OWNER}"))
            c.execute(text("SET livingrag.maintenance = 'on'"))
            assert c.execute(text("SELECT current_user")).scalar() == OWNER
    finally:
        engine.dispose()
    message = _refusal(owned_url, setter)
    assert f"member of '{OWNER}'" in message and f'REVOKE "{OWNER}" FROM "{setter}"' in message


def test_a_login_hiding_behind_a_default_role_is_refused(
    owned_url: str, superuser: Engine, make_role: Callable[..., str]
) -> None:
    """A login whose default role is livingrag_app (``ALTER ROLE ... SET role``) runs as
    livingrag_app, but ``RESET ROLE`` gives it back its own memberships: the login is checked too."""
    web = make_role(f"LOGIN PASSWORD '{PASSWORD}' IN ROLE livingrag_app, {OWNER}")
    with superuser.connect() as c:
        c.execute(text(f"ALTER ROLE {web} SET role = 'livingrag_app'"))
    database = _login_db(owned_url, web)
    try:
        with database.app_session() as s:
            assert s.execute(text("SELECT current_user, session_user")).one() == ("livingrag_app", web)
    finally:
        database.dispose()
    message = _refusal(owned_url, web)
    assert f"role '{web}'" in message and f"member of '{OWNER}'" in message


def test_the_ordinary_app_login_still_starts(database_url: str, owned_url: str, make_role: Callable[..., str]) -> None:
    for url in (database_url, owned_url):
        web = make_role(f"LOGIN PASSWORD '{PASSWORD}' IN ROLE livingrag_app")
        _starts(url, web)
    # and the app role itself, switched to from the owner URL (no LIVINGRAG_DB__APP_URL)
    for url in (database_url, owned_url):
        database = Database(db_settings_for(url))
        try:
            database.check_app_role()
        finally:
            database.dispose()
