"""The database server as ``livingrag db status`` shows it: its running memory settings and the
space the experience store takes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from livingrag.db.catalog import relation_files
from livingrag.db.repositories.server_settings import MEMORY_SETTINGS as MEMORY_SETTINGS
from livingrag.db.repositories.server_settings import memory_settings_mb

if TYPE_CHECKING:
    from livingrag.db.engine import Database


def memory_in_use(db: Database) -> tuple[dict[str, int], int | None]:
    """The server's running values of :data:`MEMORY_SETTINGS` in MB, and the bytes of the
    relations' files on disk for the embedded server (None for an external one)."""
    with db.owner_engine.connect() as conn:
        running = memory_settings_mb(conn)
        store_bytes = sum(r.size for r in relation_files(conn)) if db.embedded else None
    return running, store_bytes
