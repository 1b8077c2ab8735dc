"""Engines and sessions.

Two engines share one server:

* the *owner* engine (``db.url`` or the embedded superuser) runs migrations and, through
  :meth:`Database.owner_session` only (the owner route), the named operator-wide maintenance
  paths (tenant management, recovery, cross-tenant expiry). Row-level security is forced on the
  tenant tables (migration 0006), so a non-superuser owner is bound by the policies as well and
  reaches every tenant's rows only in a transaction that sets ``livingrag.maintenance``;
* the *app* engine runs everything done on behalf of a tenant. Its connections either log in as a
  role bound by row-level security (``db.app_url``) or switch to ``db.app_role`` right after
  connecting and again at the start of every transaction (``SET LOCAL ROLE``). A tenant session
  sets ``livingrag.tenant_id`` in that same first statement, so RLS confines it to that tenant's
  rows even if a query forgets a filter. :meth:`Database.check_app_role` refuses a role that RLS
  would not bind.

Callers own transactions: repositories take a :class:`~sqlalchemy.orm.Session` and never commit.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import psycopg
from sqlalchemy import Engine, TextClause, create_engine, event, text
from sqlalchemy.exc import DBAPIError, DisconnectionError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from livingrag.config import DBSettings
from livingrag.db.embedded import EmbeddedServer, memory_plan_for, start_embedded
from livingrag.errors import ConfigError, DatabaseError, DatabaseUnavailable

log = logging.getLogger(__name__)

TENANT_SETTING = "livingrag.tenant_id"
MAINTENANCE_SETTING = "livingrag.maintenance"
"""Set to ``on`` by :meth:`Database.owner_session` in each of its transactions: with it the
``owner_maintenance`` policy (migration 0006) lets the tables' owner reach every tenant's rows."""


def _register_vector(dbapi_conn: Any, _record: Any) -> None:
    from pgvector.psycopg import register_vector

    try:
        register_vector(dbapi_conn)
    except Exception:  # the extension is not installed yet (before the first migration)
        dbapi_conn.rollback()


def _set_config_text(n: int, placeholder: str) -> str:
    """``SELECT set_config(k0, v0, true), ...`` for ``n`` settings, parameters written with
    ``placeholder`` (``":{}"`` for SQLAlchemy, ``"%({})s"`` for the driver)."""
    return "SELECT " + ", ".join(
        f"set_config({placeholder.format(f'k{i}')}, {placeholder.format(f'v{i}')}, true)" for i in range(n)
    )


@functools.lru_cache(maxsize=16)
def _set_config_sql(n: int) -> TextClause:
    return text(_set_config_text(n, ":{}"))


@functools.lru_cache(maxsize=16)
def _set_config_driver_sql(n: int) -> str:
    return _set_config_text(n, "%({})s")


def _settings_params(settings: Mapping[str, str]) -> tuple[int, dict[str, str]]:
    pairs = [(str(k), str(v)) for k, v in settings.items()]
    params = {f"k{i}": k for i, (k, _) in enumerate(pairs)} | {f"v{i}": v for i, (_, v) in enumerate(pairs)}
    return len(pairs), params


def local_settings_statement(settings: Mapping[str, str]) -> tuple[TextClause, dict[str, str]]:
    """One statement (and its parameters) that sets ``settings`` until the end of the transaction
    (``set_config(name, value, true)`` each, i.e. ``SET LOCAL``)."""
    n, params = _settings_params(settings)
    return _set_config_sql(n), params


IDLE_PING_S = 1.0
"""A pooled connection idle for longer than this is pinged before it is handed out."""


def _ping_when_idle(engine: Engine, idle_s: float) -> None:
    """Ping a pooled connection at checkout only when it sat idle for over ``idle_s`` seconds.

    SQLAlchemy's ``pool_pre_ping`` pings at every checkout: one extra round trip per session, which
    under 32 clients was 7 % of the service's busy time. A connection given back a moment ago is
    almost surely alive; one that sat in the pool (a server restart, an idle timeout) is what the
    ping is for. A failed ping raises ``DisconnectionError``, on which the pool discards the
    connection and hands out a new one (up to three tries), as pre-ping does.
    """

    @event.listens_for(engine, "checkin")
    def _returned(_dbapi_conn: Any, record: Any) -> None:
        if record is not None:
            record.info["livingrag_returned_at"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _handed_out(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        returned = record.info.get("livingrag_returned_at")
        if returned is None or time.monotonic() - returned <= idle_s:
            return  # new, or used a moment ago
        try:
            with dbapi_conn.cursor() as cur:
                cur.execute("SELECT 1")
            if not dbapi_conn.autocommit:
                dbapi_conn.rollback()
        except Exception as exc:
            raise DisconnectionError(f"pooled connection failed its ping: {exc}") from exc


class Database:
    """Owns the engines for one server. Use :meth:`tenant_session` and :meth:`owner_session`."""

    def __init__(
        self,
        settings: DBSettings,
        *,
        embedded_cleanup: str | None = "stop",
    ) -> None:
        """Connect to ``settings``' server (starting the embedded one when ``db.url`` is unset); the
        schema is left as it is: :func:`livingrag.db.setup.open_database` or
        :mod:`livingrag.db.migrate` migrate or check it."""
        self.settings = settings
        self.embedded: EmbeddedServer | None = None
        if settings.url is None:
            self.embedded = start_embedded(
                settings.data_dir,
                cleanup_mode=embedded_cleanup,
                memory=memory_plan_for(settings),
                prewarm=settings.prewarm,
                prewarm_buffers_fraction=settings.prewarm_buffers_fraction,
            )
            owner_url = self.embedded.url
        else:
            owner_url = settings.url.get_secret_value()
        self.owner_url = owner_url
        self.owner_engine = self._make_engine(owner_url, role=None, pool_size=2)
        self._app_url = settings.app_url.get_secret_value() if settings.app_url is not None else owner_url
        self._app_role = None if settings.app_url is not None else settings.app_role
        self.app_engine = self._make_engine(self._app_url, role=self._app_role, pool_size=settings.pool_size)
        self._read_engine: Engine | None = None
        self._read_engine_lock = threading.Lock()
        self._app_sessions = sessionmaker(self.app_engine, expire_on_commit=False)
        self._owner_sessions = sessionmaker(self.owner_engine, expire_on_commit=False)

    def _make_engine(
        self, url: str, *, role: str | None, pool_size: int, pre_ping: bool = True, autocommit: bool = False
    ) -> Engine:
        s = self.settings
        options = f"-c statement_timeout={s.statement_timeout_ms}"
        engine = create_engine(
            url,
            pool_size=pool_size,
            max_overflow=s.max_overflow,
            pool_pre_ping=False,  # see _ping_when_idle
            **({"isolation_level": "AUTOCOMMIT"} if autocommit else {}),
            pool_recycle=1800,
            connect_args={"connect_timeout": max(1, int(s.connect_timeout_s)), "options": options},
        )
        event.listen(engine, "connect", _register_vector)
        if pre_ping:
            _ping_when_idle(engine, IDLE_PING_S)
        if role is not None:

            def _set_role(dbapi_conn: Any, _record: Any) -> None:
                with dbapi_conn.cursor() as cur:
                    cur.execute(f'SET ROLE "{role}"')
                dbapi_conn.commit()

            event.listen(engine, "connect", _set_role)
        return engine

    @contextmanager
    def tenant_session(self, tenant_id: int, *, local_settings: Mapping[str, str] | None = None) -> Iterator[Session]:
        """A session confined by RLS to ``tenant_id``; commits on success, rolls back on error.
        ``local_settings`` (server settings such as ``hnsw.ef_search``) are set for each of its
        transactions in the same statement as the tenant, so they cost no extra round trip."""
        if not isinstance(tenant_id, int) or isinstance(tenant_id, bool) or tenant_id <= 0:
            raise ValueError(f"tenant_id must be a positive integer, got {tenant_id!r}")
        scope, params = local_settings_statement(self._scope_settings(tenant_id, local_settings))
        session = self._app_sessions()

        @event.listens_for(session, "after_begin")
        def _scope(_session: Session, _tx: Any, connection: Any) -> None:
            connection.execute(scope, params)

        with _wrap_errors(), session:
            try:
                yield session
                session.commit()
            except BaseException:
                session.rollback()
                raise

    def tenant_read(
        self,
        tenant_id: int,
        statement: str,
        params: Mapping[str, Any],
        *,
        local_settings: Mapping[str, str] | None = None,
    ) -> list[tuple[Any, ...]]:
        """Run one read-only ``statement`` (driver syntax: ``%(name)s`` parameters) for
        ``tenant_id`` and return its rows: the hot path of matching.

        Unlike :meth:`tenant_session` it bypasses the ORM: on an autocommit connection of
        :attr:`read_engine` it pipelines the scope statement (tenant and ``local_settings``,
        ``set_config(..., true)``) and the statement before one Sync, so both run in one implicit
        transaction that ends with them, in one network round trip and with no ``BEGIN`` or
        ``COMMIT`` message (0.25 ms for ``SELECT 1`` against 0.85 ms with an explicit transaction
        and a pre-ping on checkout). If the scope statement fails, the statement does not run. The
        statement is prepared on the connection (parsed once per connection; with
        ``plan_cache_mode = force_generic_plan`` in ``local_settings`` also planned once) and its
        rows come in binary format (``bytea`` columns as raw bytes, not hex text). RLS confines it
        exactly as it confines a tenant session.

        Pooled connections are not pinged before use: a connection found dead (the server
        restarted since it was pooled) retires the whole pool and the read is sent once more on a
        new connection (it is read-only, so sending it again is safe); a server that is still away
        is ``DatabaseUnavailable``, as is an operational error (``statement_timeout`` included)."""
        if not isinstance(tenant_id, int) or isinstance(tenant_id, bool) or tenant_id <= 0:
            raise ValueError(f"tenant_id must be a positive integer, got {tenant_id!r}")
        return self._one_round_trip(self._scope_settings(tenant_id, local_settings), statement, params)

    def app_statement(self, statement: str, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        """Run one statement as the application role with no tenant (driver syntax) and return its
        rows, as :meth:`tenant_read` runs its statement: one implicit transaction, one round trip,
        no pre-ping. A connection found dead is retired and the statement sent once more, so the
        statement must be safe to run twice (the API key lookup is: its only write stamps
        ``last_used_at``)."""
        return self._one_round_trip(self._scope_settings(None, None), statement, params)

    def _one_round_trip(
        self, scope: Mapping[str, str], statement: str, params: Mapping[str, Any]
    ) -> list[tuple[Any, ...]]:
        """``scope`` (``set_config(..., true)`` each; none: no scope statement) and ``statement``
        pipelined on an autocommit connection of :attr:`read_engine` (see :meth:`tenant_read`)."""
        n, scope_params = _settings_params(scope)
        scope_sql = _set_config_driver_sql(n) if n else None
        engine = self.read_engine
        for attempt in range(2):
            with _wrap_errors():
                try:
                    record = engine.raw_connection()
                except psycopg.OperationalError as exc:  # the pool's own connect errors come unwrapped
                    raise DatabaseUnavailable(f"database unavailable: {_first_line(exc)}") from exc
            try:
                conn = record.driver_connection
                assert conn is not None  # a checked-out pool record always holds its psycopg connection
                try:
                    with conn.pipeline():
                        if scope_sql is not None:
                            conn.execute(scope_sql, scope_params, prepare=True)
                        cur = conn.cursor(binary=True)
                        cur.execute(statement, params, prepare=True)
                    return cur.fetchall()
                except BaseException as exc:
                    lost = bool(conn.closed or conn.broken)
                    if lost:
                        record.invalidate()
                        if attempt == 0 and isinstance(exc, psycopg.Error):
                            engine.dispose(close=False)  # its other connections predate the restart too
                            continue
                    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError) or (
                        lost and isinstance(exc, psycopg.Error)
                    ):  # a server restart surfaces as either, in pipeline mode too
                        raise DatabaseUnavailable(f"database unavailable: {_first_line(exc)}") from exc
                    raise
            finally:
                record.close()
        raise AssertionError("unreachable: the second attempt returns or raises")

    @property
    def read_engine(self) -> Engine:
        """The engine of :meth:`tenant_read`: the app engine's URL and role, autocommit
        connections (each read is one implicit transaction), no pre-ping; opened on first use,
        with the app engine's pool size."""
        if self._read_engine is None:
            with self._read_engine_lock:
                if self._read_engine is None:
                    self._read_engine = self._make_engine(
                        self._app_url,
                        role=self._app_role,
                        pool_size=self.settings.pool_size,
                        pre_ping=False,
                        autocommit=True,
                    )
        return self._read_engine

    def _scope_settings(self, tenant_id: int | None, local_settings: Mapping[str, str] | None) -> dict[str, str]:
        """What a transaction of the app engine sets first, in one statement: the role (when the app logs
        in as the owner: ``SET LOCAL ROLE``, so that no transaction runs as the owner even on a
        connection whose session-level ``SET ROLE`` was reset or never ran, as behind a
        transaction-pooling proxy), the tenant and the caller's server settings."""
        out = {"role": self._app_role} if self._app_role is not None else {}
        if tenant_id is not None:
            out[TENANT_SETTING] = str(tenant_id)
        return out | dict(local_settings or {})

    def app_role_problems(self) -> list[str]:
        """Why the role that application transactions run as would not be bound by row-level security:
        it is a superuser, has BYPASSRLS, owns tables that have RLS (RLS is forced, but the owner may
        take the maintenance route, see :meth:`owner_session`) or their schema, is named by the
        ``owner_maintenance`` policies, or reads past privileges and RLS (``pg_read_all_data``, the
        server-file roles); or it is a member, by any chain of grants (inherited or only allowing
        ``SET ROLE``), of a role that is or does any of that. With ``db.app_url`` the login
        (``session_user``) is checked as well as the role it runs as: ``RESET ROLE`` gives a login
        with a default role back its own memberships. Empty when it is bound."""
        how = "the LIVINGRAG_DB__APP_URL login" if self.settings.app_url is not None else "LIVINGRAG_DB__APP_ROLE"
        with self.app_session() as s:
            current, login = s.execute(text("SELECT current_user, session_user")).one()
            roles = [current] + ([login] if self.settings.app_url is not None and login != current else [])
            found = {who: s.execute(_ROLE_REACH_SQL, {"who": who}).all() for who in roles}
        out: list[str] = []
        for who, rows in found.items():
            for path, *flags in rows:
                what = _role_powers(*flags)
                if not what:
                    continue
                if len(path) == 1:
                    out.extend(f"role {who!r} ({how}) {w}" for w in what)
                    continue
                fix = (
                    f"give the database another owner than {path[-2]!r}"
                    if path[1] == "pg_database_owner"
                    else f'REVOKE "{path[1]}" FROM "{path[0]}"'
                )
                out.append(
                    f"role {who!r} ({how}) is a member of {path[-1]!r} ({' → '.join(path)}), which "
                    + " and ".join(what)
                    + f": {fix}"
                )
        return out

    def check_app_role(self) -> None:
        """:class:`ConfigError` naming each reason when application transactions would not be bound by
        row-level security (see :meth:`app_role_problems`): tenants could then read each other's rows."""
        problems = self.app_role_problems()
        if problems:
            raise ConfigError(
                "refusing to serve tenants: " + "; ".join(problems) + ". Row-level security would not confine "
                "the application's queries. Use a role without SUPERUSER or BYPASSRLS that owns no table or schema "
                "and is a member of no role that does (revoke the memberships named above): "
                "LIVINGRAG_DB__APP_URL=<a login role that is a member of livingrag_app only>, or unset it "
                "and leave LIVINGRAG_DB__APP_ROLE at livingrag_app (created by the migrations)."
            )

    @contextmanager
    def app_session(self) -> Iterator[Session]:
        """An application-role session with no tenant: RLS shows it no tenant-owned row."""
        scope, params = local_settings_statement(self._scope_settings(None, None))
        session = self._app_sessions()
        if params:

            @event.listens_for(session, "after_begin")
            def _scope(_session: Session, _tx: Any, connection: Any) -> None:
                connection.execute(scope, params)

        with _wrap_errors(), session:
            try:
                yield session
                session.commit()
            except BaseException:
                session.rollback()
                raise

    @contextmanager
    def owner_session(self) -> Iterator[Session]:
        """The owner route: a session of the tables' owner that sees and writes every tenant's rows,
        for the named maintenance paths only (tenant and key administration with the admin key,
        crash recovery, cross-tenant expiry/prune/stats, scope-index planning, the CLI's operator
        commands; ``tests/db/test_owner_route.py`` lists them and fails on any other caller).

        Row-level security is forced on the tenant tables (migration 0006), so the owner is bound by
        the policies like any role; each transaction of this session sets
        ``livingrag.maintenance = 'on'``, which the ``owner_maintenance`` policy honours for the
        tables' owner alone (a superuser owner bypasses RLS regardless)."""
        scope, params = local_settings_statement({MAINTENANCE_SETTING: "on"})
        session = self._owner_sessions()

        @event.listens_for(session, "after_begin")
        def _maintenance(_session: Session, _tx: Any, connection: Any) -> None:
            connection.execute(scope, params)

        with _wrap_errors(), session:
            try:
                yield session
                session.commit()
            except BaseException:
                session.rollback()
                raise

    def ping(self) -> bool:
        try:
            with self.app_engine.connect() as conn:
                conn.execute(text("SELECT 1"))
            return True
        except Exception:
            return False

    def dispose_app_pools(self) -> None:
        """Close the pooled connections of the app and read engines (new ones connect on demand:
        after a migration, whose new types the old connections do not know)."""
        self.app_engine.dispose()
        if self._read_engine is not None:
            self._read_engine.dispose()

    def dispose(self) -> None:
        self.dispose_app_pools()
        self.owner_engine.dispose()

    def close(self) -> None:
        """Dispose the engines and release this process's hold on the embedded server."""
        self.dispose()
        if self.embedded is not None:
            self.embedded.stop()
            self.embedded = None


_PAST_RLS_ROLES = {
    "pg_read_all_data": "reads every table and column whatever the grants (key hashes included)",
    "pg_write_all_data": "writes every table and column whatever the grants (keys included)",
    "pg_read_server_files": "reads the server's files (every tenant's data)",
    "pg_write_server_files": "writes the server's files",
    "pg_execute_server_program": "runs programs on the server",
}

_ROLE_REACH_SQL = text(
    """
    WITH RECURSIVE edges(member, roleid) AS (
      SELECT m.member, m.roleid FROM pg_auth_members m
      UNION ALL  -- the database's owner is pg_database_owner, the owner of schema public
      SELECT d.datdba, to_regrole('pg_database_owner')::oid FROM pg_database d
      WHERE d.datname = current_database() AND to_regrole('pg_database_owner') IS NOT NULL
    ), chain(oid, path) AS (
      SELECT r.oid, ARRAY[r.rolname::text] FROM pg_roles r WHERE r.rolname = :who
      UNION ALL
      SELECT e.roleid, ch.path || g.rolname::text
      FROM chain ch JOIN edges e ON e.member = ch.oid JOIN pg_roles g ON g.oid = e.roleid
      WHERE g.rolname::text <> ALL (ch.path)
    ), reach AS (
      SELECT DISTINCT ON (oid) oid, path FROM chain ORDER BY oid, cardinality(path), path
    )
    SELECT reach.path, r.rolsuper, r.rolbypassrls,
      (SELECT count(*) FROM pg_class c WHERE c.relrowsecurity AND c.relowner = r.oid),
      (SELECT coalesce(string_agg(DISTINCT n.nspname, ', '), '') FROM pg_namespace n
         JOIN pg_class c ON c.relnamespace = n.oid WHERE c.relrowsecurity AND n.nspowner = r.oid),
      EXISTS (SELECT 1 FROM pg_policy p WHERE r.oid = ANY (p.polroles)
         AND coalesce(pg_get_expr(p.polqual, p.polrelid), '') || coalesce(pg_get_expr(p.polwithcheck, p.polrelid), '')
             LIKE '%livingrag.maintenance%'),
      r.rolcreaterole AND current_setting('server_version_num')::int < 160000,
      r.rolname::text
    FROM reach JOIN pg_roles r ON r.oid = reach.oid
    ORDER BY cardinality(reach.path), reach.path
    """
)
"""Each role ``:who`` is, or is a member of by a chain of grants (the shortest, as role names), with
what of it RLS does not bind: superuser, BYPASSRLS, tables with RLS owned, schemas of such tables
owned, named by a maintenance policy, CREATEROLE before PostgreSQL 16 (it could grant itself any
role), its name (for the predefined roles that read past privileges)."""


def _role_powers(
    superuser: bool, bypass: bool, owned: int, schemas: str, maintenance: bool, createrole: bool, name: str
) -> list[str]:
    """What a role (one row of :data:`_ROLE_REACH_SQL`) can do that row-level security does not bind."""
    out = []
    if superuser:
        out.append("is a superuser")
    if bypass:
        out.append("has BYPASSRLS")
    if owned:
        out.append(f"owns {owned} table(s) with row-level security")
    if schemas:
        out.append(f"owns the schema(s) {schemas} of tables with row-level security")
    if maintenance:
        out.append("may turn livingrag.maintenance on (the owner_maintenance policies name it)")
    if createrole:
        out.append("has CREATEROLE (before PostgreSQL 16 it can grant itself any role)")
    if name in _PAST_RLS_ROLES:
        out.append(_PAST_RLS_ROLES[name])
    return out


@contextmanager
def _wrap_errors() -> Iterator[None]:
    """Translate driver errors into :mod:`livingrag.errors` once, at the border."""
    try:
        yield
    except OperationalError as exc:
        raise DatabaseUnavailable(f"database unavailable: {_first_line(exc)}") from exc
    except DBAPIError as exc:
        if exc.connection_invalidated:
            raise DatabaseUnavailable(f"database connection lost: {_first_line(exc)}") from exc
        raise


def _first_line(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    return str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__


__all__ = ["MAINTENANCE_SETTING", "TENANT_SETTING", "Database", "DatabaseError", "DatabaseUnavailable"]
