"""What the connected PostgreSQL server runs with and offers, and which of its processes serves a
connection (read-only)."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

MEMORY_SETTINGS = ("shared_buffers", "effective_cache_size", "maintenance_work_mem")
_UNIT_BYTES = {"B": 1, "kB": 1024, "8kB": 8192, "MB": 1024**2, "GB": 1024**3}


def memory_settings_mb(conn: Connection) -> dict[str, int]:
    """The server's running values of :data:`MEMORY_SETTINGS`, in MB."""
    rows = conn.execute(
        text("SELECT name, setting, unit FROM pg_settings WHERE name = ANY(:names)"), {"names": list(MEMORY_SETTINGS)}
    ).all()
    return {name: int(int(setting) * _UNIT_BYTES.get(unit or "B", 1) // 1024**2) for name, setting, unit in rows}


def server_version(conn: Connection) -> str | None:
    """The server's ``server_version``."""
    version = conn.execute(text("SHOW server_version")).scalar()
    return None if version is None else str(version)


def vector_extension(conn: Connection) -> tuple[str | None, str | None]:
    """pgvector's ``(available, installed)`` versions on the server (None: not available / not
    installed in this database)."""
    available = conn.execute(text("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'")).scalar()
    installed = conn.execute(text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")).scalar()
    return (None if available is None else str(available), None if installed is None else str(installed))


def backend_pid(conn: Connection) -> int:
    """The process id of the server process serving ``conn`` (``pg_backend_pid()``)."""
    return int(conn.execute(text("SELECT pg_backend_pid()")).scalar_one())


__all__ = ["MEMORY_SETTINGS", "backend_pid", "memory_settings_mb", "server_version", "vector_extension"]
