"""Per-scope HNSW indexes of experience query embeddings: the SQL that lists, builds and drops them.

The shared index of migration 0002 holds every tenant's experiences; a match walks its graph and
throws away the rows of other scopes, so its cost grows with the whole store, not with the scope
(at 1,000,000 experiences over 4 tenants it dominated matching). A scope index is a partial index
over one (tenant, corpus) pair::

    CREATE INDEX ix_exp_scope_<tenant>_<corpus>_<dim> ON experiences
      USING hnsw ((query_embedding::halfvec(<dim>)) halfvec_cosine_ops)
      WHERE embedding_dim = <dim> AND tenant_id = <tenant> AND corpus_id = <corpus>

Preselection writes the scope's ids into its statement (see
``experience_candidates._preselect_sql``), so the planner proves this predicate and walks the
scope's own graph; scopes without one keep using the shared index. Indexes are built and dropped
``CONCURRENTLY`` (write-backs go on meanwhile), which cannot run inside a transaction: the
functions that change indexes take a connection in autocommit mode, and the caller owns it. A build
that was interrupted leaves an *invalid* index, which the planner ignores; :func:`list_scope_indexes`
reports it so that it can be rebuilt.
"""

from __future__ import annotations

import re

from sqlalchemy import Connection, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from livingrag.db.models import SCOPE_INDEX_PREFIX
from livingrag.errors import InvalidInput
from livingrag.types import MAX_HNSW_DIM, ScopeIndex, ScopeSize

PREFIX = SCOPE_INDEX_PREFIX
_NAME = re.compile(rf"^{PREFIX}(\d+)_(\d+)_(\d+)$")


def _positive(value: int, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidInput(f"{what} must be a positive integer, got {value!r}")
    return value


def index_name(tenant_id: int, corpus_id: int, dim: int) -> str:
    """``ix_exp_scope_<tenant>_<corpus>_<dim>`` (at most 58 characters for 64-bit ids, under
    PostgreSQL's 63)."""
    t, c, d = _positive(tenant_id, "tenant_id"), _positive(corpus_id, "corpus_id"), _positive(dim, "dim")
    if d > MAX_HNSW_DIM:
        raise InvalidInput(f"HNSW index dimension must lie in [1, {MAX_HNSW_DIM}], got {d}")
    return f"{PREFIX}{t}_{c}_{d}"


def parse_index_name(name: str) -> tuple[int, int, int] | None:
    """(tenant id, corpus id, dim) of a scope index name; None for any other name."""
    m = _NAME.match(name)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def scope_sizes(session: Session, tenant_id: int | None = None) -> list[ScopeSize]:
    """Every corpus (of ``tenant_id``, or of all tenants in an owner session) with its dimension
    and number of experiences, counted from the (tenant, corpus, created_at) index."""
    rows = session.execute(
        text(
            """
            SELECT c.tenant_id, c.id, c.embedding_dim,
                   (SELECT count(*) FROM experiences e WHERE e.tenant_id = c.tenant_id AND e.corpus_id = c.id)
            FROM corpora c
            WHERE CAST(:t AS bigint) IS NULL OR c.tenant_id = :t
            ORDER BY c.tenant_id, c.id
            """
        ),
        {"t": tenant_id},
    ).all()
    return [ScopeSize(int(t), int(c), int(d), int(n)) for t, c, d, n in rows]


def list_scope_indexes(session: Session | Connection) -> list[ScopeIndex]:
    """The scope indexes on ``experiences`` (valid or not), in name order."""
    rows = session.execute(
        text(
            """
            SELECT i.relname, x.indisvalid, pg_relation_size(i.oid)
            FROM pg_index x
            JOIN pg_class i ON i.oid = x.indexrelid
            WHERE x.indrelid = 'experiences'::regclass AND i.relname LIKE :p
            ORDER BY i.relname
            """
        ),
        {"p": PREFIX + "%"},
    ).all()
    out = []
    for name, valid, size in rows:
        parsed = parse_index_name(name)
        if parsed is not None:
            out.append(ScopeIndex(name, *parsed, valid=bool(valid), size_bytes=int(size)))
    return out


def create_scope_index(conn: Connection, tenant_id: int, corpus_id: int, dim: int) -> str:
    """Build the scope index of (tenant, corpus) ``CONCURRENTLY`` (``conn`` in autocommit mode);
    returns its name. An existing index of that name is left as it is (drop an invalid one first)."""
    name = index_name(tenant_id, corpus_id, dim)
    conn.execute(
        text(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON experiences"
            f" USING hnsw ((query_embedding::halfvec({dim})) halfvec_cosine_ops)"
            f" WHERE embedding_dim = {dim} AND tenant_id = {int(tenant_id)} AND corpus_id = {int(corpus_id)}"
        )
    )
    return name


def no_statement_timeout(conn: Connection) -> None:
    """Lift ``statement_timeout`` for this connection (an index build may run for hours)."""
    conn.execute(text("SET statement_timeout = 0"))


def set_build_memory(conn: Connection, maintenance_work_mem: str) -> None:
    """``maintenance_work_mem`` for this connection's index builds (an HNSW build is several times
    faster when its graph fits in it); PostgreSQL rejects a malformed value with an error naming it."""
    try:
        conn.execute(text("SELECT set_config('maintenance_work_mem', :v, false)"), {"v": str(maintenance_work_mem)})
    except DBAPIError as exc:
        first = str(getattr(exc, "orig", exc)).strip().splitlines()[0]
        raise InvalidInput(f"maintenance_work_mem {maintenance_work_mem!r} was refused: {first}") from exc


def drop_scope_index(conn: Connection, name: str) -> None:
    """Drop a scope index ``CONCURRENTLY`` (``conn`` in autocommit mode); any other name is refused."""
    if parse_index_name(name) is None:
        raise InvalidInput(f"{name!r} is not the name of a scope index ({PREFIX}<tenant>_<corpus>_<dim>)")
    conn.execute(text(f"DROP INDEX CONCURRENTLY IF EXISTS {name}"))
