"""Catalog queries: where the connected server keeps a table's files (the table, its TOAST table and
every index of both), its segment size and its databases. Read-only; the caller must be allowed to
read ``data_directory``, as the embedded server's owner is. (Not under ``repositories``: the
embedded server's read-ahead uses it, and repositories import the engine that starts that server.)"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.pool import NullPool

log = logging.getLogger(__name__)

EXPERIENCE_TABLES = ("experiences", "experience_entities")

# Indexes first: a match walks an HNSW graph page by page, in no order the disk likes, while the
# heap rows it then fetches are fewer and mostly near each other.
_SQL = text(
    """
    WITH base AS (
        SELECT c.oid, c.reltoastrelid FROM unnest(CAST(:tables AS text[])) AS n(name)
        JOIN pg_class c ON c.oid = to_regclass(n.name)
    ), rels AS (
        SELECT oid FROM base
        UNION SELECT reltoastrelid FROM base WHERE reltoastrelid <> 0
        UNION SELECT i.indexrelid FROM pg_index i
              WHERE i.indrelid IN (SELECT oid FROM base UNION SELECT reltoastrelid FROM base)
    )
    SELECT c.relname, c.relkind, pg_relation_filepath(c.oid), pg_relation_size(c.oid), c.oid::regclass::text
    FROM rels JOIN pg_class c ON c.oid = rels.oid
    WHERE pg_relation_filepath(c.oid) IS NOT NULL
    ORDER BY c.relkind = 'i' DESC, pg_relation_size(c.oid) DESC, c.relname
    """
)


@dataclass(frozen=True)
class RelationFile:
    """One relation's main fork: its name, the path of its first segment file, its size in bytes,
    whether it is an index, and its name as ``regclass`` spells it (schema-qualified where the
    search path does not find it, as for a TOAST table's index; None: the bare name)."""

    relation: str
    path: Path
    size: int
    is_index: bool
    qualified: str | None = None


def segment_bytes(conn: Connection) -> int:
    """The server's segment size in bytes (``segment_size`` x ``block_size``; 1 GB by default)."""
    row = conn.execute(
        text(
            "SELECT (SELECT setting::bigint FROM pg_settings WHERE name = 'segment_size')"
            " * (SELECT setting::bigint FROM pg_settings WHERE name = 'block_size')"
        )
    ).scalar_one()
    return int(row)


def relation_files(conn: Connection, tables: tuple[str, ...] = EXPERIENCE_TABLES) -> list[RelationFile]:
    """The main-fork files of ``tables`` (those that exist in this database), their TOAST tables and
    all their indexes: indexes first, larger first. Paths are absolute (``data_directory`` joined to
    ``pg_relation_filepath``, which is already absolute for another tablespace)."""
    data_dir = Path(str(conn.execute(text("SELECT current_setting('data_directory')")).scalar_one()))
    rows = conn.execute(_SQL, {"tables": list(tables)}).all()
    return [
        RelationFile(relation=name, path=data_dir / path, size=int(size), is_index=kind == "i", qualified=qualified)
        for name, kind, path, size, qualified in rows
    ]


def database_names(conn: Connection) -> list[str]:
    """The server's databases that accept connections, templates left out."""
    rows = conn.execute(
        text("SELECT datname FROM pg_database WHERE datallowconn AND NOT datistemplate ORDER BY datname")
    ).all()
    return [r[0] for r in rows]


@contextmanager
def owner_connection(owner_url: str, database: str | None = None) -> Iterator[Connection]:
    """One unpooled connection of the server's owner, to ``database`` (None: the URL's own)."""
    url = make_url(owner_url)
    if database is not None:
        url = url.set(database=database)
    engine = create_engine(url.render_as_string(hide_password=False), poolclass=NullPool)
    try:
        with engine.connect() as conn:
            yield conn
    finally:
        engine.dispose()


def store_relations(owner_url: str, names: list[str]) -> list[tuple[str, RelationFile]]:
    """(database, relation) for the experience relations (:func:`relation_files`) of each of the
    databases ``names`` on the server at ``owner_url``; a database dropped meanwhile is skipped."""
    found: list[tuple[str, RelationFile]] = []
    for name in names:
        try:
            with owner_connection(owner_url, name) as conn:
                found += [(name, r) for r in relation_files(conn)]
        except Exception as exc:  # a database dropped between the two queries
            log.info("skipped database %s: %s", name, exc)
    return found


__all__ = [
    "EXPERIENCE_TABLES",
    "RelationFile",
    "database_names",
    "owner_connection",
    "relation_files",
    "segment_bytes",
    "store_relations",
]
