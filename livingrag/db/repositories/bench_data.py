"""The synthetic experience store of ``livingrag bench store`` (:mod:`livingrag.bench.store_data`
builds its rows): the SQL of its bulk load into a scratch database, and what the harness reads back
(the scopes and row counts of a kept store, the highest ids before its write-back run).

The bulk load runs on one psycopg connection of the scratch database's owner, which the harness
holds and commits between the steps (indexes dropped, each chunk copied, rows finished, each index
built; ``VACUUM`` in autocommit mode): those functions take its cursor. The others take a session.
Like every repository, nothing here commits.
"""

from __future__ import annotations

from typing import Any

from psycopg import Cursor
from sqlalchemy import text
from sqlalchemy.orm import Session

COPY_EXPERIENCES = (
    "COPY experiences (id, tenant_id, corpus_id, query, query_template, query_embedding, embedding_dim, activation,"
    " summary, answer, created_at, confidence, source_passage_ids, corpus_version) FROM STDIN WITH (FORMAT BINARY)"
)
"""The columns, in order, of the experience rows in binary COPY format
(:func:`livingrag.bench.store_data.experience_rows_binary`)."""
COPY_ENTITIES = (
    "COPY experience_entities (experience_id, entity_id, tenant_id, corpus_id, weight) FROM STDIN WITH (FORMAT BINARY)"
)
"""The columns, in order, of the entity rows in binary COPY format
(:func:`livingrag.bench.store_data.entity_rows_binary`)."""
STORE_TABLES = ("experiences", "experience_entities")


def drop_secondary_indexes(cur: Cursor[Any]) -> list[str]:
    """Drop the indexes of the experience tables that back no constraint (rows load faster without
    them); returns their definitions (``CREATE INDEX`` statements), for :func:`build_index`."""
    cur.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE tablename IN ('experiences', 'experience_entities')"
        " AND indexname NOT IN (SELECT conname FROM pg_constraint)"
    )
    definitions: list[str] = []
    for name, definition in cur.fetchall():
        definitions.append(definition)
        cur.execute(f'DROP INDEX "{name}"')
    return definitions


def begin_bulk_load(cur: Cursor[Any]) -> None:
    """For this connection: no foreign-key triggers (``session_replication_role = replica``; the
    rows are the harness's own, consistent by construction) and no statement timeout."""
    cur.execute("SET session_replication_role = replica")
    cur.execute("SET statement_timeout = 0")


def copy_rows(cur: Cursor[Any], experiences: bytes, entities: bytes) -> None:
    """COPY one chunk: its experience rows (:data:`COPY_EXPERIENCES`), then their entity rows
    (:data:`COPY_ENTITIES`), both in binary COPY format."""
    with cur.copy(COPY_EXPERIENCES) as cp:
        cp.write(experiences)
    with cur.copy(COPY_ENTITIES) as cp:
        cp.write(entities)


def end_bulk_load(cur: Cursor[Any]) -> None:
    """After the rows: the experience id sequence past the highest id loaded, triggers on again."""
    cur.execute("SELECT setval(pg_get_serial_sequence('experiences', 'id'), (SELECT max(id) FROM experiences))")
    cur.execute("SET session_replication_role = DEFAULT")


def prepare_index_builds(cur: Cursor[Any]) -> None:
    """For this connection's index builds: 3 GB of ``maintenance_work_mem`` and two parallel workers."""
    cur.execute("SET maintenance_work_mem = '3GB'")
    cur.execute("SET max_parallel_maintenance_workers = 2")


def build_index(cur: Cursor[Any], definition: str) -> None:
    """Build one index dropped by :func:`drop_secondary_indexes` (``definition`` is its own, as
    ``pg_indexes`` gave it)."""
    cur.execute(definition)


def vacuum_analyze(cur: Cursor[Any]) -> None:
    """``VACUUM ANALYZE`` both experience tables (the cursor's connection in autocommit mode)."""
    for table in STORE_TABLES:
        cur.execute(f"VACUUM ANALYZE {table}")


def scopes(session: Session) -> list[tuple[int, int]]:
    """``(tenant id, corpus id)`` of every corpus, in the order they were created (ids ascending)."""
    rows = session.execute(
        text("SELECT t.id, c.id FROM tenants t JOIN corpora c ON c.tenant_id = t.id ORDER BY t.id, c.id")
    ).all()
    return [(int(t), int(c)) for t, c in rows]


def count_loaded_experiences(session: Session, n: int) -> int:
    """Experiences with an id up to ``n`` (a bulk load of ``n`` rows numbers them 1 to ``n``)."""
    return int(session.execute(text("SELECT count(*) FROM experiences WHERE id <= :n"), {"n": n}).scalar_one())


def count_entity_rows(session: Session) -> int:
    """Rows of ``experience_entities``, every scope's."""
    return int(session.execute(text("SELECT count(*) FROM experience_entities")).scalar_one())


def highest_ids(session: Session) -> tuple[int, int]:
    """The highest experience id and the highest entity id any experience names (0 for none)."""
    rows = int(session.execute(text("SELECT coalesce(max(id), 0) FROM experiences")).scalar_one())
    top = int(session.execute(text("SELECT coalesce(max(entity_id), 0) FROM experience_entities")).scalar_one())
    return rows, top


__all__ = [
    "COPY_ENTITIES",
    "COPY_EXPERIENCES",
    "begin_bulk_load",
    "build_index",
    "copy_rows",
    "count_entity_rows",
    "count_loaded_experiences",
    "drop_secondary_indexes",
    "end_bulk_load",
    "highest_ids",
    "prepare_index_builds",
    "scopes",
    "vacuum_analyze",
]
