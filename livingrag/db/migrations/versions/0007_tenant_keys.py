"""tenant_id is part of every primary, unique and foreign key between tenant tables.

Foreign keys used to point at single global ids (``sentences.passage_id -> passages.id`` and so
on). Foreign-key checks bypass row-level security, so a tenant-A row could reference a tenant-B
row by its id. Now each parent's primary key is ``(tenant_id, id)`` and each child references it
with ``(tenant_id, <parent>_id)``: a reference can only name a row of the referencing row's own
tenant, for every role, the owner and superusers included. The same keys make the schema
distributable by ``tenant_id`` (Citus requires the distribution column in every unique constraint
and every foreign key between distributed tables).

* primary keys: ``(tenant_id, id)`` for corpora, passages, sentences, entities, experiences,
  writeback_log, query_log and api_keys; ``(tenant_id, ...)`` before the link tables' pairs;
* unique constraints gain ``tenant_id``: passages' ``(tenant_id, corpus_id, content_hash)``,
  entities' ``(tenant_id, corpus_id, normalized_name)``, api_keys' ``(key_hash, tenant_id)`` (key
  hashes are sha256 of 256 random bits, unique by construction; the constraint's index, led by
  ``key_hash``, serves the key lookup);
* foreign keys between tenant tables become composite, named ``fk_<table>_<column>``;
  ``writeback_log``'s to experiences sets only ``experience_id`` to NULL on delete
  (``ON DELETE SET NULL (experience_id)``, PostgreSQL 15+).

``corpora``'s ``(id, tenant_id)`` unique constraint of 0001 stays: the corpus foreign keys of every
tenant table already include ``tenant_id`` and reference it. The tenants table is the tenant
itself (a reference table for Citus): its keys have no tenant_id to include.

Downgrade restores the single-column keys of 0005 (ids come from identity columns, so they are
unique across tenants unless rows were inserted with explicit ids).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# table -> primary key columns after tenant_id (same columns before, without tenant_id)
PRIMARY_KEYS: dict[str, tuple[str, ...]] = {
    "corpora": ("id",),
    "passages": ("id",),
    "sentences": ("id",),
    "entities": ("id",),
    "entity_sentences": ("entity_id", "sentence_id"),
    "passage_entities": ("passage_id", "entity_id"),
    "passage_links": ("source_id", "target_id"),
    "experiences": ("id",),
    "experience_entities": ("experience_id", "entity_id"),
    "writeback_log": ("id",),
    "query_log": ("id",),
    "api_keys": ("id",),
}

# (table, column, parent table, ON DELETE action)
REFERENCES: tuple[tuple[str, str, str, str], ...] = (
    ("sentences", "passage_id", "passages", "CASCADE"),
    ("entity_sentences", "entity_id", "entities", "CASCADE"),
    ("entity_sentences", "sentence_id", "sentences", "CASCADE"),
    ("passage_entities", "passage_id", "passages", "CASCADE"),
    ("passage_entities", "entity_id", "entities", "CASCADE"),
    ("passage_links", "source_id", "passages", "CASCADE"),
    ("passage_links", "target_id", "passages", "CASCADE"),
    ("experience_entities", "experience_id", "experiences", "CASCADE"),
    ("writeback_log", "experience_id", "experiences", "SET NULL"),
)

# name -> (table, columns before, columns after)
UNIQUES: dict[str, tuple[str, str, str]] = {
    "uq_passages_corpus_hash": ("passages", "corpus_id, content_hash", "tenant_id, corpus_id, content_hash"),
    "uq_entities_corpus_normalized": (
        "entities",
        "corpus_id, normalized_name",
        "tenant_id, corpus_id, normalized_name",
    ),
    "uq_api_keys_key_hash": ("api_keys", "key_hash", "key_hash, tenant_id"),
}


def _fk_name(table: str, column: str) -> str:
    return f"fk_{table}_{column.removesuffix('_id')}"


def upgrade() -> None:
    for table, column, _parent, _action in REFERENCES:
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {table}_{column}_fkey")
    for table, columns in PRIMARY_KEYS.items():
        op.execute(
            f"ALTER TABLE {table} DROP CONSTRAINT {table}_pkey, "
            f"ADD CONSTRAINT {table}_pkey PRIMARY KEY (tenant_id, {', '.join(columns)})"
        )
    for name, (table, _before, after) in UNIQUES.items():
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}, ADD CONSTRAINT {name} UNIQUE ({after})")
    for table, column, parent, action in REFERENCES:
        on_delete = f"SET NULL ({column})" if action == "SET NULL" else action
        op.execute(
            f"ALTER TABLE {table} ADD CONSTRAINT {_fk_name(table, column)} FOREIGN KEY (tenant_id, {column}) "
            f"REFERENCES {parent} (tenant_id, id) ON DELETE {on_delete}"
        )


def downgrade() -> None:
    for table, column, _parent, _action in reversed(REFERENCES):
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {_fk_name(table, column)}")
    for name, (table, before, _after) in UNIQUES.items():
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}, ADD CONSTRAINT {name} UNIQUE ({before})")
    for table, columns in PRIMARY_KEYS.items():
        op.execute(
            f"ALTER TABLE {table} DROP CONSTRAINT {table}_pkey, "
            f"ADD CONSTRAINT {table}_pkey PRIMARY KEY ({', '.join(columns)})"
        )
    for table, column, parent, action in REFERENCES:
        op.execute(
            f"ALTER TABLE {table} ADD CONSTRAINT {table}_{column}_fkey FOREIGN KEY ({column}) "
            f"REFERENCES {parent} (id) ON DELETE {action}"
        )
