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

With read standbys (``db.read_urls``), :attr:`Database.reader` is a view of the same database
whose :meth:`~Database.tenant_read` and :meth:`~Database.tenant_session` run on a hot standby
(engines built like the app engine's, one set per standby); the question path's reads take it (the
corpus version and preset checks, graph loads, experience matching) and every write stays on the
primary. Which standby, when the primary answers instead (lag, read your writes, a standby that
failed) is :mod:`livingrag.db.replicas`'. A tenant session that wrote records the primary's WAL
position after its commit, so that the tenant's later reads see it.

Callers own transactions: repositories take a :class:`~sqlalchemy.orm.Session` and never commit.
"""

from __future__ import annotations

import copy
import functools
import logging
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import psycopg
from sqlalchemy import Engine, TextClause, create_engine, event, text
from sqlalchemy.exc import ArgumentError, DBAPIError, DisconnectionError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from livingrag.config import DBSettings, mask_url
from livingrag.db.embedded import EmbeddedServer, memory_plan_for, start_embedded
from livingrag.db.replicas import WRITE_LSN_SQL, ReplicaSet, Standby, parse_lsn
from livingrag.errors import ConfigError, DatabaseError, DatabaseUnavailable, ServerUnreachable, StandbyLost

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


_WROTE_SQL = text("SELECT pg_current_xact_id_if_assigned() IS NOT NULL")
"""Whether the transaction has written anything (it has a transaction id only then)."""
_CORPUS_VERSION_SQL = "SELECT version FROM corpora WHERE id = %(c)s"

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


def _scope_each_transaction(
    session: Session, scope: TextClause, params: Mapping[str, str], began: list[bool] | None = None
) -> None:
    """Run ``scope`` (the transaction-local settings: tenant, role, maintenance, ...) as the first
    statement of each transaction of ``session``; ``began[0]`` is set once one began."""

    @event.listens_for(session, "after_begin")
    def _scope(_session: Session, _tx: Any, connection: Any) -> None:
        connection.execute(scope, params)
        if began is not None:
            began[0] = True


@contextmanager
def _committed(session: Session) -> Iterator[Session]:
    """``session`` for one unit of work: committed when the block ends, rolled back on any error
    (a database error raised as :func:`_wrap_errors` maps it), closed either way."""
    with _wrap_errors(), session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise


class Database:
    """Owns the engines for one server (and its read standbys). Use :meth:`tenant_session` and
    :meth:`owner_session`, and :attr:`reader` for the question path's reads."""

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
        self._routes_reads = False
        """True on the view :attr:`reader` returns: its reads go to the standbys."""
        self._reader: Database | None = None
        self._primary: Database | None = None
        """On the :attr:`reader` view: the database it is a view of."""
        self.replicas: ReplicaSet | None = None
        """The read standbys (``db.read_urls``), or None: every read on the primary."""
        if settings.read_urls:
            try:
                self.replicas = self._make_replicas(settings)
            except BaseException:
                self.close()
                raise

    def _make_replicas(self, settings: DBSettings) -> ReplicaSet:
        """The standbys of ``db.read_urls``, their engines built like the app engine (same role
        handling: a login bound by RLS with ``db.app_url``, else ``SET ROLE db.app_role``)."""
        urls = [(u.get_secret_value(), mask_url(u.get_secret_value())) for u in settings.read_urls]

        def make(url: str, autocommit: bool) -> Engine:
            try:
                return self._make_engine(
                    url,
                    role=self._app_role,
                    pool_size=settings.pool_size if autocommit else 2,
                    pre_ping=not autocommit,
                    autocommit=autocommit,
                )
            except (ArgumentError, ValueError) as exc:
                raise ConfigError(f"LIVINGRAG_DB__READ_URLS: {mask_url(url)} is not a usable URL: {exc}") from None

        return ReplicaSet(
            urls,
            make_engine=make,
            round_trip=lambda engine, scope, statement, params: self._one_round_trip(
                scope, statement, params, engine=engine
            ),
            primary_engine=lambda: self.read_engine,
            max_lag_ms=settings.max_replica_lag_ms,
            wait_ms=settings.read_your_writes_wait_ms,
            retry_s=settings.replica_retry_s,
        )

    @property
    def reader(self) -> Database:
        """This database for the question path's reads: a view whose :meth:`tenant_read` and
        :meth:`tenant_session` run on a read standby (``db.read_urls``; see
        :mod:`livingrag.db.replicas` for which one, and when the primary answers instead). It
        shares this database's engines, and closing it closes nothing. Without standbys, this
        database itself. Only reads may go through it: a standby refuses writes."""
        if self.replicas is None or self._routes_reads:
            return self
        if self._reader is None:
            _ = self.read_engine  # created before the copy, so that both share it
            view = copy.copy(self)
            view._routes_reads = True
            view._reader, view._primary = view, self
            self._reader = view
        return self._reader

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
    def tenant_session(
        self, tenant_id: int, *, local_settings: Mapping[str, str] | None = None, read_floor: bool = True
    ) -> Iterator[Session]:
        """A session confined by RLS to ``tenant_id``; commits on success, rolls back on error.
        ``local_settings`` (server settings such as ``hnsw.ef_search``) are set for each of its
        transactions in the same statement as the tenant, so they cost no extra round trip.

        With read standbys, each of its transactions that wrote records the primary's WAL position
        after its commit (one round trip before and one after), so that this tenant's later reads
        in this process see it (read your writes, :mod:`livingrag.db.replicas`); ``read_floor=False``
        leaves that out for bookkeeping writes no question reads back (the query log, use counts,
        write-back decisions). On the :attr:`reader` view the session runs on a standby
        (:meth:`_standby_session`)."""
        if not isinstance(tenant_id, int) or isinstance(tenant_id, bool) or tenant_id <= 0:
            raise ValueError(f"tenant_id must be a positive integer, got {tenant_id!r}")
        if self._routes_reads and self.replicas is not None:
            with self._standby_session(self.replicas, tenant_id, local_settings) as standby_session:
                yield standby_session
            return
        scope, params = local_settings_statement(self._scope_settings(tenant_id, local_settings))
        session = self._app_sessions()
        began = [False]
        _scope_each_transaction(session, scope, params, began)
        if read_floor and self.replicas is not None:
            self._track_writes(session, tenant_id, began)
        with _committed(session):
            yield session

    def _track_writes(self, session: Session, tenant_id: int | None, began: list[bool]) -> None:
        """Have each transaction of ``session`` that wrote note the primary's WAL position after
        its commit (:meth:`ReplicaSet.note_write`); ``began[0]`` says whether the transaction ran
        a statement (an empty one is not asked)."""
        wrote = [False]

        @event.listens_for(session, "before_commit")
        def _did_write(sess: Session) -> None:
            sess.flush()  # the commit's own flush comes after this event: pending objects are written first
            if began[0]:
                wrote[0] = bool(sess.connection().execute(_WROTE_SQL).scalar())

        @event.listens_for(session, "after_commit")
        def _note(_sess: Session) -> None:
            if wrote[0]:
                self._note_write(tenant_id)
            began[0] = wrote[0] = False

        @event.listens_for(session, "after_rollback")
        def _forget(_sess: Session) -> None:
            began[0] = wrote[0] = False

    def _note_write(self, tenant_id: int | None) -> None:
        """Record the primary's WAL insert position for ``tenant_id`` (None: every tenant) right
        after a commit. A primary that does not answer now leaves it unrecorded (logged): the
        commit itself stands."""
        if self.replicas is None:
            return
        try:
            lsn = parse_lsn(self._one_round_trip({}, WRITE_LSN_SQL, {})[0][0])
        except DatabaseError as exc:
            log.warning("could not read the WAL position after a commit (reads may not see it yet): %s", exc)
            return
        if lsn is not None:
            self.replicas.note_write(tenant_id, lsn)

    @contextmanager
    def _standby_session(
        self, replicas: ReplicaSet, tenant_id: int, local_settings: Mapping[str, str] | None
    ) -> Iterator[Session]:
        """A tenant session on the standby :meth:`ReplicaSet.route` chooses (None: the primary's,
        as :meth:`tenant_session` makes it). A standby whose connection cannot be had is marked down
        and the next choice taken; one that fails while the caller reads is marked down and the
        failure raised as :class:`StandbyLost` (the caller may send the read again)."""
        tried: list[Standby] = []
        standby: Standby | None = None
        while True:
            standby = replicas.route(tenant_id, exclude=tried)
            if standby is None:
                break
            try:
                with standby.session_engine.connect():
                    pass  # a live pooled connection (pinged when idle) before the caller's reads
                break
            except (DBAPIError, psycopg.Error) as exc:
                replicas.mark_down(standby, exc)
                tried.append(standby)
        if standby is None:
            primary = self._primary or self
            with primary.tenant_session(tenant_id, local_settings=local_settings, read_floor=False) as session:
                yield session
            return
        scope, params = local_settings_statement(self._scope_settings(tenant_id, local_settings))
        session = standby.sessions()
        _scope_each_transaction(session, scope, params)
        try:
            with _committed(session):
                yield session
        except (DatabaseUnavailable, psycopg.OperationalError, psycopg.InterfaceError) as exc:
            # (the graph loader's COPY runs on the driver's connection: its errors come unwrapped)
            replicas.mark_down(standby, exc)
            raise StandbyLost(f"read standby {standby.shown} failed: {_first_line(exc)}") from exc
        standby.reads += 1

    @contextmanager
    def corpus_version_floor(self, tenant_id: int, corpus_id: int, version: int) -> Iterator[None]:
        """Within this scope the reads of ``tenant_id`` on the :attr:`reader` view go to a standby
        that holds at least ``version`` of the corpus (waiting up to
        ``db.read_your_writes_wait_ms`` for one to replay it), else to the primary: a question with
        ``min_corpus_version`` after a change made through any process. Without standbys, nothing."""
        if self.replicas is None:
            yield
            return
        scope = self._scope_settings(tenant_id, None)

        def holds(engine: Engine) -> bool:
            rows = self._one_round_trip(scope, _CORPUS_VERSION_SQL, {"c": int(corpus_id)}, engine=engine)
            return bool(rows) and int(rows[0][0]) >= version

        with self.replicas.requirement(tenant_id, holds):
            yield

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
        exactly as it confines a tenant session. On the :attr:`reader` view it runs on a read standby
        (a standby that fails is skipped and the read sent to the next, at last to the primary).

        Pooled connections are not pinged before use: a connection found dead (the server
        restarted since it was pooled) retires the whole pool and the read is sent once more on a
        new connection (it is read-only, so sending it again is safe); a server that is still away
        is ``DatabaseUnavailable``, as is an operational error (``statement_timeout`` included)."""
        if not isinstance(tenant_id, int) or isinstance(tenant_id, bool) or tenant_id <= 0:
            raise ValueError(f"tenant_id must be a positive integer, got {tenant_id!r}")
        scope = self._scope_settings(tenant_id, local_settings)
        if self._routes_reads and self.replicas is not None:
            return self.replicas.read(
                tenant_id, scope, statement, params, lambda: self._one_round_trip(scope, statement, params)
            )
        return self._one_round_trip(scope, statement, params)

    def app_statement(self, statement: str, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        """Run one statement as the application role with no tenant (driver syntax) and return its
        rows, as :meth:`tenant_read` runs its statement: one implicit transaction, one round trip,
        no pre-ping. A connection found dead is retired and the statement sent once more, so the
        statement must be safe to run twice (the API key lookup is: its only write stamps
        ``last_used_at``)."""
        return self._one_round_trip(self._scope_settings(None, None), statement, params)

    def _one_round_trip(
        self,
        scope: Mapping[str, str],
        statement: str,
        params: Mapping[str, Any],
        *,
        engine: Engine | None = None,
    ) -> list[tuple[Any, ...]]:
        """``scope`` (``set_config(..., true)`` each; none: no scope statement) and ``statement``
        pipelined on an autocommit connection of ``engine`` (default :attr:`read_engine`; see
        :meth:`tenant_read`). :class:`ServerUnreachable` when no connection could be had or the
        connection was lost again on the second try; :class:`DatabaseUnavailable` for another
        operational error (a statement timeout)."""
        n, scope_params = _settings_params(scope)
        scope_sql = _set_config_driver_sql(n) if n else None
        engine = self.read_engine if engine is None else engine
        for attempt in range(2):
            with _wrap_errors():
                try:
                    record = engine.raw_connection()
                except (OperationalError, psycopg.OperationalError) as exc:  # the pool's connect errors come unwrapped
                    raise ServerUnreachable(f"database unavailable: {_first_line(exc)}") from exc
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
                        if isinstance(exc, psycopg.Error):  # a server restart surfaces as any of them
                            raise ServerUnreachable(f"database unavailable: {_first_line(exc)}") from exc
                    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
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
            roles = {current: how}
            if self.settings.app_url is not None and login != current:
                roles[login] = how
            for who, read_how in self._standby_roles():
                roles.setdefault(who, read_how)
            found = {who: s.execute(_ROLE_REACH_SQL, {"who": who}).all() for who in roles}
        out: list[str] = []
        for who, rows in found.items():
            how = roles[who]
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

    def _standby_roles(self) -> list[tuple[str, str]]:
        """(role, which read URL) for the role each reachable standby's reads run as and, when it
        differs, its login: a standby has the primary's catalog, so they are checked there."""
        if self.replicas is None:
            return []
        out = []
        for standby in self.replicas.standbys:
            try:
                rows = self._one_round_trip(
                    self._scope_settings(None, None),
                    "SELECT current_user::text, session_user::text",
                    {},
                    engine=standby.read_engine,
                )
            except DatabaseUnavailable:
                continue  # check_replicas names it
            current, login = rows[0]
            out.append((current, f"the LIVINGRAG_DB__READ_URLS login {standby.shown}"))
            if self.settings.app_url is not None and login != current:
                out.append((login, f"the LIVINGRAG_DB__READ_URLS login {standby.shown}"))
        return out

    def check_replicas(self) -> None:
        """:class:`ConfigError` naming each read URL (``db.read_urls``, password masked) that cannot
        serve reads now: unreachable, or not a hot standby. Then the standbys are watched on a
        thread of this process (:meth:`ReplicaSet.start`). Nothing without read URLs."""
        if self.replicas is None:
            return
        self.replicas.check_once()
        problems = [f"{s.shown}: {s.error}" for s in self.replicas.standbys if not s.up]
        if problems:
            raise ConfigError(
                "LIVINGRAG_DB__READ_URLS: "
                + "; ".join(problems)
                + ". Each read URL must reach a hot standby (a streaming replica) of the database in "
                "LIVINGRAG_DB__URL; fix or remove it."
            )
        self.replicas.start()

    def replica_status(self) -> list[dict[str, Any]]:
        """Each read standby's state and lag (:meth:`ReplicaSet.status`); empty without read URLs."""
        return self.replicas.status() if self.replicas is not None else []

    def check_app_role(self) -> None:
        """:class:`ConfigError` naming each reason when application transactions would not be bound by
        row-level security (see :meth:`app_role_problems`): tenants could then read each other's rows;
        first, each read URL that cannot serve reads (:meth:`check_replicas`)."""
        self.check_replicas()
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
            _scope_each_transaction(session, scope, params)
        with _committed(session):
            yield session

    @contextmanager
    def owner_session(self) -> Iterator[Session]:
        """The owner route: a session of the tables' owner that sees and writes every tenant's rows,
        for the named maintenance paths only (tenant and key administration with the admin key,
        crash recovery, cross-tenant expiry/prune/stats, scope-index planning, the CLI's operator
        commands; ``tests/db/test_owner_route.py`` lists them and fails on any other caller).

        Row-level security is forced on the tenant tables (migration 0006), so the owner is bound by
        the policies like any role; each transaction of this session sets
        ``livingrag.maintenance = 'on'``, which the ``owner_maintenance`` policy honours for the
        tables' owner alone (a superuser owner bypasses RLS regardless). With read standbys, a
        transaction that wrote makes every tenant's later reads in this process wait for it
        (:meth:`tenant_session`)."""
        scope, params = local_settings_statement({MAINTENANCE_SETTING: "on"})
        session = self._owner_sessions()
        began = [False]
        _scope_each_transaction(session, scope, params, began)
        if self.replicas is not None:  # it may change any tenant's rows: every tenant's reads need it
            self._track_writes(session, None, began)

        with _committed(session):
            yield session

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
        if self.replicas is not None:
            self.replicas.dispose()

    def dispose(self) -> None:
        """Close every pooled connection (nothing on the :attr:`reader` view, which shares them)."""
        if self._routes_reads:
            return
        self.dispose_app_pools()
        self.owner_engine.dispose()

    def close(self) -> None:
        """Dispose the engines, stop watching the standbys and release this process's hold on the
        embedded server (nothing on the :attr:`reader` view)."""
        if self._routes_reads:
            return
        if self.replicas is not None:
            self.replicas.close()
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
