"""Load the experience store's indexes into PostgreSQL's shared buffers after the embedded server starts.

The read-ahead (:mod:`livingrag.db.prewarm`) puts the files in the OS page cache, but that is not
enough for a large tenant: its HNSW walk reads about 700 random index pages per match, each a
separate read from the OS at ~15 µs on a VM, until the scope's whole index is back in
PostgreSQL's own buffers; at 200k experiences in one scope that is thousands of matches. So after
the read-ahead, the owner loads the indexes matching walks through the buffer manager, whole, in
the order matching needs them, up to a budget of the buffers:

1. the per-scope HNSW indexes (every match of a scope with its own index walks one);
2. the entity channel (``ix_experience_entities_channel``) and the experience primary key (every
   match reads both);
3. the shared per-dimension HNSW indexes (scopes without an index of their own);
4. every other index of the experience tables, larger last;
5. the ``experiences`` table itself, when all that fits (each match reads ~100 of its rows: the
   entity channel's primary-key probes and the results), never the other tables.

The embedded server ships no ``pg_prewarm``; ``scripts/install.sh`` compiles
``livingrag/db/native/livingrag_buffers.c`` against its headers into its library directory, and
each loading session creates the function in its own ``pg_temp`` (nothing is left in the
catalogs). Without the library, only the read-ahead runs, and ``livingrag db status`` says so.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import Connection

from livingrag.db.catalog import RelationFile, database_names, owner_connection, store_relations
from livingrag.db.models import DYNAMIC_INDEX_PREFIXES, SCOPE_INDEX_PREFIX

log = logging.getLogger(__name__)

LIBRARY_NAME = "livingrag_buffers"
SHARED_HNSW_PREFIX = DYNAMIC_INDEX_PREFIXES[0]
MATCH_INDEXES = ("ix_experience_entities_channel", "experiences_pkey")
MATCH_TABLE = "experiences"  # its rows: the entity channel's primary-key probes and the results

DEFAULT_FRACTION = 0.5  # of shared_buffers: the rest stays for heap pages, the corpus and the service

_LOAD = text("SELECT pg_temp.livingrag_load_relation(CAST(:rel AS regclass), :max_blocks)")


def library_path(pkglibdir: Path) -> Path:
    """Where the compiled loader lives in a server's library directory."""
    return pkglibdir / f"{LIBRARY_NAME}.so"


def load_rank(relation: str, is_index: bool = True) -> int | None:
    """The group of the module docstring a relation belongs to (0 first); None for a table other
    than ``experiences`` (never loaded: matching reads none of its pages)."""
    if not is_index:
        return 4 if relation == MATCH_TABLE else None
    if relation.startswith(SCOPE_INDEX_PREFIX):
        return 0
    if relation in MATCH_INDEXES:
        return 1
    if relation.startswith(SHARED_HNSW_PREFIX):
        return 2
    return 3


@dataclass(frozen=True)
class LoadPlan:
    """(database, relation as regclass spells it, blocks) to load, in order, and whether the budget
    left some index out."""

    items: tuple[tuple[str, str, int], ...]
    cut: bool


def plan_loads(relations: Sequence[tuple[str, RelationFile]], budget_bytes: int, block_size: int) -> LoadPlan:
    """Which of ``relations`` ((database, relation) pairs) to load within ``budget_bytes``: by
    :func:`load_rank` across all databases (the indexes, then the ``experiences`` table), smaller
    first within a group (so that more scopes fit), each whole while the budget lasts; the first
    that does not fit is loaded in part (an HNSW index's first blocks hold its entry point and
    upper layers) and nothing after it."""
    if block_size <= 0:
        raise ValueError(f"block size must be positive, got {block_size}")
    ranked = [(rank, db, r) for db, r in relations if (rank := load_rank(r.relation, r.is_index)) is not None]
    ranked.sort(key=lambda p: (p[0], p[2].size, p[1], p[2].relation))
    left = max(0, budget_bytes) // block_size
    items: list[tuple[str, str, int]] = []
    cut = False
    for _, db, r in ranked:
        whole = -(-r.size // block_size)
        blocks = min(whole, left)
        cut = cut or blocks < whole
        if blocks > 0:
            items.append((db, r.qualified or r.relation, blocks))
            left -= blocks
    return LoadPlan(tuple(items), cut)


@dataclass(frozen=True)
class BufferLoad:
    """What a load did: relations and blocks loaded, relations that were gone (dropped
    meanwhile), whether the budget cut it, and how long it took."""

    relations: int
    blocks: int
    missing: int
    truncated: bool
    seconds: float
    block_size: int

    def as_dict(self) -> dict[str, object]:
        """JSON-ready."""
        return {
            "relations": self.relations,
            "mb": round(self.blocks * self.block_size / 1024**2, 1),
            "missing": self.missing,
            "truncated": self.truncated,
            "seconds": round(self.seconds, 2),
        }


def create_loader(conn: Connection, library: str = LIBRARY_NAME) -> None:
    """Create ``pg_temp.livingrag_load_relation`` in this session from ``$libdir/<library>`` (the
    owner's session: a C function needs a superuser). Raises when the library is not installed on
    the server."""
    if not library.replace("_", "").isalnum():
        raise ValueError(f"library name must be letters, digits and underscores, got {library!r}")
    conn.execute(
        text(
            "CREATE OR REPLACE FUNCTION pg_temp.livingrag_load_relation(regclass, bigint) RETURNS bigint"
            f" AS '$libdir/{library}', 'livingrag_load_relation' LANGUAGE C STRICT"
        )
    )


def load_relations(conn: Connection, relations: Sequence[tuple[str, int]]) -> tuple[int, int, int]:
    """Load (relation, blocks) pairs of the connected database through the loader, committing
    after each so that no lock is held longer than one relation's load. Returns (relations
    loaded, blocks loaded, relations gone: dropped meanwhile, skipped)."""
    done = blocks = missing = 0
    for relation, want in relations:
        exists = conn.execute(text("SELECT to_regclass(:r) IS NOT NULL"), {"r": relation}).scalar_one()
        if not exists:
            missing += 1
            conn.commit()
            continue
        blocks += int(conn.execute(_LOAD, {"rel": relation, "max_blocks": want}).scalar_one())
        conn.commit()
        done += 1
    return done, blocks, missing


def buffer_budget(conn: Connection, fraction: float) -> tuple[int, int]:
    """(bytes, block size): ``fraction`` of the server's ``shared_buffers``."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be within [0, 1], got {fraction}")
    row = conn.execute(
        text(
            "SELECT (SELECT setting::bigint FROM pg_settings WHERE name = 'shared_buffers'),"
            " (SELECT setting::bigint FROM pg_settings WHERE name = 'block_size')"
        )
    ).one()
    buffers, block = int(row[0]), int(row[1])  # shared_buffers is counted in blocks
    return int(buffers * block * fraction), block


def load_store_indexes(owner_url: str, fraction: float = DEFAULT_FRACTION, library: str = LIBRARY_NAME) -> BufferLoad:
    """Load the experience indexes of every database on the server at ``owner_url`` into its
    shared buffers, within ``fraction`` of them (:func:`plan_loads`). Raises when the loader is
    not installed (the first ``CREATE FUNCTION`` fails)."""
    t0 = time.perf_counter()
    with owner_connection(owner_url) as conn:
        names = database_names(conn)
        budget, block = buffer_budget(conn, fraction)
        create_loader(conn, library)  # fails here, before any work, when the library is missing
    plan = plan_loads(store_relations(owner_url, names), budget, block)
    done = blocks = missing = 0
    for name in dict.fromkeys(db for db, _, _ in plan.items):
        try:
            with owner_connection(owner_url, name) as conn:
                create_loader(conn, library)
                d, b, m = load_relations(conn, [(rel, n) for db, rel, n in plan.items if db == name])
        except Exception as exc:  # a database dropped meanwhile
            log.info("buffer load: skipped database %s: %s", name, exc)
            continue
        done, blocks, missing = done + d, blocks + b, missing + m
    return BufferLoad(done, blocks, missing, plan.cut, time.perf_counter() - t0, block)


__all__ = [
    "DEFAULT_FRACTION",
    "LIBRARY_NAME",
    "MATCH_INDEXES",
    "MATCH_TABLE",
    "BufferLoad",
    "LoadPlan",
    "buffer_budget",
    "create_loader",
    "library_path",
    "load_rank",
    "load_relations",
    "load_store_indexes",
    "plan_loads",
]
