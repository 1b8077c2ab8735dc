"""Reaching a scratch database of the configured server (the benchmark harnesses' own, ``livingrag
bench store``): an engine of the server's owner in autocommit mode, to create and drop whole
databases (:mod:`livingrag.db.repositories.databases`), and the connection string of one of them."""

from __future__ import annotations

from sqlalchemy import Engine, create_engine
from sqlalchemy.engine import make_url


def autocommit_engine(url: str) -> Engine:
    """An engine on ``url`` whose connections run each statement in its own transaction, as
    ``CREATE DATABASE`` and ``DROP DATABASE`` need; the caller disposes of it."""
    return create_engine(url, isolation_level="AUTOCOMMIT")


def database_url(url: str, database: str) -> str:
    """``url`` with its database replaced by ``database`` (password kept: the string connects)."""
    return make_url(url).set(database=database).render_as_string(hide_password=False)


__all__ = ["autocommit_engine", "database_url"]
