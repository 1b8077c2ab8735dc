"""Whole databases on the connected server: whether one exists, its comment, creating and dropping
it (the benchmark harnesses' scratch databases, ``livingrag bench store``). ``CREATE DATABASE`` and
``DROP DATABASE`` cannot run inside a transaction: the caller gives a connection in autocommit mode
(:func:`livingrag.db.scratch.autocommit_engine`), and owns it.

A database name is written into the statements as a quoted identifier: the caller names it (the
harness's own ``livingrag_bench_<hex>``, or a name the operator gave), never a request.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection


def _quoted(name: str) -> str:
    """``name`` as a quoted identifier inside :func:`~sqlalchemy.text` (colons escaped, as below)."""
    return '"' + name.replace('"', '""').replace(":", "\\:") + '"'


def _literal(value: str) -> str:
    """``value`` as an SQL string literal inside :func:`~sqlalchemy.text` (a utility statement takes
    no bind parameter): quotes doubled, colons escaped so that none reads as a parameter."""
    return "'" + value.replace("'", "''").replace(":", "\\:") + "'"


def database_exists(conn: Connection, name: str) -> bool:
    """Whether the server holds a database ``name``."""
    return conn.execute(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}).first() is not None


def database_comment(conn: Connection, name: str) -> str | None:
    """The comment of the database ``name`` (None: no comment, or no such database)."""
    raw = conn.execute(
        text("SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = :n"), {"n": name}
    ).scalar()
    return None if raw is None else str(raw)


def create_database(conn: Connection, name: str, *, comment: str | None = None) -> None:
    """Create the database ``name`` (empty: no schema, no extension), with ``comment`` if given."""
    conn.execute(text(f"CREATE DATABASE {_quoted(name)}"))
    if comment is not None:
        conn.execute(text(f"COMMENT ON DATABASE {_quoted(name)} IS {_literal(comment)}"))


def drop_database(conn: Connection, name: str) -> None:
    """Drop the database ``name`` if it exists, ending its sessions (``WITH (FORCE)``)."""
    conn.execute(text(f"DROP DATABASE IF EXISTS {_quoted(name)} WITH (FORCE)"))


__all__ = ["create_database", "database_comment", "database_exists", "drop_database"]
