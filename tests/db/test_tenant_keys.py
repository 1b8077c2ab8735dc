"""tenant_id is part of every key between tenant tables (issue 19, finding 3): the catalog holds no
primary key, unique constraint, unique index or foreign key of a tenant table without it, so a row
can only reference a row of its own tenant, even written by the owner (foreign-key checks bypass
row-level security), and the schema is distributable by tenant_id (Citus's rule)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy import Connection, text
from sqlalchemy.exc import IntegrityError

from livingrag.db import migrate
from livingrag.db.engine import Database
from tests.conftest import db_settings_for
from tests.db.test_migrations import _counts, _populate_v1
from tests.db.test_rls import _seed

pytestmark = pytest.mark.db

KEY_DEBTS: frozenset[str] = frozenset()
"""Constraints allowed to lack tenant_id (none; a debt named here must only ever shrink)."""

_CONSTRAINTS = """
WITH tenant_tables AS (
  SELECT c.oid, c.relname, a.attnum AS tenant_att
  FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped
  WHERE c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace
)
SELECT k.conname, k.contype, t.relname, k.conkey, k.confkey, t.tenant_att,
       p.relname AS parent, pt.tenant_att AS parent_tenant_att
FROM pg_constraint k
JOIN tenant_tables t ON t.oid = k.conrelid
LEFT JOIN pg_class p ON p.oid = k.confrelid
LEFT JOIN tenant_tables pt ON pt.oid = k.confrelid
WHERE k.contype IN ('p', 'u', 'f')
UNION ALL
SELECT k.conname, k.contype, c.relname, k.conkey, k.confkey, NULL, t.relname, t.tenant_att
FROM pg_constraint k
JOIN pg_class c ON c.oid = k.conrelid
JOIN tenant_tables t ON t.oid = k.confrelid
WHERE k.contype = 'f' AND k.conrelid NOT IN (SELECT oid FROM tenant_tables)
"""


def _violations(db: Database) -> list[str]:
    with db.owner_engine.connect() as c:
        return _violations_on(c)


def _violations_on(c: Connection) -> list[str]:
    """Every primary key, unique constraint or index and foreign key of a tenant table (or into one)
    that lacks tenant_id, as ``table.constraint: why``."""
    out = []
    rows = c.execute(text(_CONSTRAINTS)).all()
    unique_indexes = c.execute(
        text(
            "SELECT i.indexrelid::regclass::text, c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid"
            " JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'tenant_id'"
            " WHERE i.indisunique AND c.relnamespace = current_schema()::regnamespace"
            " AND NOT a.attnum = ANY(i.indkey::int2[])"
            " AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)"  # checked above
        )
    ).all()
    for name, kind, table, key, fkey, tenant_att, parent, parent_tenant_att in rows:
        if name in KEY_DEBTS:
            continue
        where = f"{table}.{name}"
        if kind in ("p", "u"):
            if tenant_att not in key:
                out.append(f"{where}: {'primary' if kind == 'p' else 'unique'} key without tenant_id")
            continue
        pairs = set(zip(key, fkey, strict=True))
        if tenant_att is None:
            out.append(f"{where}: a table without tenant_id references tenant table {parent}")
        elif parent_tenant_att is None:  # the tenants table itself: its id is the tenant
            if parent != "tenants" or len(pairs) != 1 or next(iter(pairs))[0] != tenant_att:
                out.append(f"{where}: foreign key to {parent} not through tenant_id")
        elif (tenant_att, parent_tenant_att) not in pairs:
            out.append(f"{where}: foreign key to {parent} without tenant_id on both sides")
    out += [f"{table}.{index}: unique index without tenant_id" for index, table in unique_indexes]
    return sorted(out)


def test_every_key_between_tenant_tables_has_tenant_id(db: Database) -> None:
    assert _violations(db) == []


def test_the_catalog_check_finds_a_key_without_tenant_id(db: Database) -> None:
    """The check itself: a single-column foreign key and a unique constraint without tenant_id,
    added in a transaction that is rolled back, are both reported."""
    with db.owner_engine.connect() as c:
        c.execute(text("ALTER TABLE query_log ADD CONSTRAINT probe_uq UNIQUE (id)"))
        c.execute(
            text(
                "ALTER TABLE writeback_log ADD CONSTRAINT probe_fk FOREIGN KEY (query_log_id) REFERENCES query_log (id)"
            )
        )
        c.execute(text("CREATE UNIQUE INDEX probe_ix ON passages (content_hash, id)"))
        found = _violations_on(c)
        c.rollback()
    assert found == [
        "passages.probe_ix: unique index without tenant_id",
        "query_log.probe_uq: unique key without tenant_id",
        "writeback_log.probe_fk: foreign key to query_log without tenant_id on both sides",
    ]


# (table, column, the _seed key of the row it references) for every reference between tenant tables
REFERENCES = (
    ("sentences", "passage_id", "passage"),
    ("entity_sentences", "entity_id", "entity"),
    ("entity_sentences", "sentence_id", "sentence"),
    ("passage_entities", "passage_id", "passage"),
    ("passage_entities", "entity_id", "entity"),
    ("passage_links", "source_id", "passage"),
    ("passage_links", "target_id", "passage"),
    ("experience_entities", "experience_id", "experience"),
    ("writeback_log", "experience_id", "experience"),
)


def _row(table: str, column: str, ids: dict[str, int], tenant: int, ref: int) -> tuple[str, dict[str, int]]:
    """An INSERT of a ``table`` row of ``tenant`` (ids: its own rows) whose ``column`` is ``ref``."""
    own = {
        "sentences": {"passage_id": ids["passage"], "position": 9, "text": 0},
        "entity_sentences": {"entity_id": ids["entity"], "sentence_id": ids["sentence"]},
        "passage_entities": {"passage_id": ids["passage"], "entity_id": ids["entity"], "mentions": 1, "weight": 1},
        "passage_links": {"source_id": ids["passage"], "target_id": ids["passage"]},
        "experience_entities": {"experience_id": ids["experience"], "entity_id": ids["entity"], "weight": 1},
        "writeback_log": {"experience_id": ids["experience"], "query": 0, "decision": 0},
    }[table]
    values = own | {column: ref, "tenant_id": tenant, "corpus_id": ids["corpus"]}
    literal = {"text": "'x'", "query": "'q'", "decision": "'stored'"}
    cols = ", ".join(values)
    params = ", ".join(literal.get(k, f":{k}") for k in values)
    return f"INSERT INTO {table} ({cols}) VALUES ({params})", {k: v for k, v in values.items() if k not in literal}


def test_a_row_cannot_reference_another_tenants_row_even_as_the_owner(
    db: Database, make_tenant: Callable[..., tuple[int, str]]
) -> None:
    a, _ = make_tenant("a")
    b, _ = make_tenant("b")
    ids_a = _seed(db, a, f"a{a}")
    ids_b = _seed(db, b, f"b{b}")
    for table, column, key in REFERENCES:
        # the owner route (the test server's superuser: RLS does not apply at all)
        statement, params = _row(table, column, ids_a, a, ids_b[key])
        with pytest.raises(IntegrityError, match="foreign key"), db.owner_session() as s:
            s.execute(text(statement), params)
    with db.owner_session() as s:  # the same rows pointing at A's own rows are fine (links: a new target)
        other = s.execute(
            text(
                "INSERT INTO passages (tenant_id, corpus_id, text, content_hash, length) "
                "VALUES (:t, :c, 'x', 'own-other', 1) RETURNING id"
            ),
            {"t": a, "c": ids_a["corpus"]},
        ).scalar_one()
        statement, params = _row("passage_links", "target_id", ids_a, a, other)
        s.execute(text(statement), params)
        statement, params = _row("writeback_log", "experience_id", ids_a, a, ids_a["experience"])
        s.execute(text(statement), params)


def test_deleting_an_experience_clears_only_the_logs_experience_id(
    db: Database, make_tenant: Callable[..., tuple[int, str]]
) -> None:
    a, _ = make_tenant("a")
    ids = _seed(db, a, f"a{a}")
    with db.tenant_session(a) as s:
        s.execute(
            text("UPDATE writeback_log SET experience_id = :x WHERE id = :w"),
            {"x": ids["experience"], "w": ids["writeback"]},
        )
        s.execute(text("DELETE FROM experiences WHERE id = :x"), {"x": ids["experience"]})
        row = s.execute(
            text("SELECT tenant_id, experience_id FROM writeback_log WHERE id = :w"), {"w": ids["writeback"]}
        )
        assert row.one() == (a, None)


def test_0007_downgrades_and_upgrades_with_data(make_database_url: Callable[[], str]) -> None:
    fresh = Database(db_settings_for(make_database_url()))
    try:
        migrate.upgrade(fresh)
        before = _populate_v1(fresh)
        assert _violations(fresh) == []
        migrate.downgrade(fresh, "0006")
        assert _counts(fresh) == before
        assert _violations(fresh) != []  # the single-column keys are back
        migrate.upgrade(fresh)
        assert _counts(fresh) == before
        assert _violations(fresh) == []
    finally:
        fresh.dispose()
