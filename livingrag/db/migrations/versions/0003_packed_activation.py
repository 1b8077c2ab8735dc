"""Experiences keep their activation map packed for the preselection query as well.

``activation_packed`` is a stored generated column: the map's (entity id, weight) pairs as
big-endian int8 / float8 bytes, computed by Postgres from ``activation`` on every insert and
update, so it can never disagree with the jsonb map an operator reads or edits. Preselection used
to build these bytes from the jsonb map for each of its 64 candidates on every query (about a
quarter of the statement's time at 100,000 experiences).

Adding a stored column rewrites the experiences table and rebuilds its indexes, the HNSW index
included: about 5 minutes for 100,000 experiences on the 2-core development machine (migrations
run without the pool's statement timeout).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # IMMUTABLE so that a generated column may use it; a non-numeric weight fails the cast and so
    # rejects the row (with Postgres's error naming the bad value) instead of storing a wrong map.
    op.execute(
        """
        CREATE FUNCTION livingrag_pack_activation(a jsonb) RETURNS bytea
          LANGUAGE sql IMMUTABLE PARALLEL SAFE
          AS $$ SELECT string_agg(int8send(kv.key::bigint) || float8send(kv.value::float8), ''::bytea)
                FROM jsonb_each_text(a) kv $$
        """
    )
    op.execute(
        "ALTER TABLE experiences ADD COLUMN activation_packed bytea"
        " GENERATED ALWAYS AS (livingrag_pack_activation(activation)) STORED"
    )


def downgrade() -> None:
    op.execute("ALTER TABLE experiences DROP COLUMN IF EXISTS activation_packed")
    op.execute("DROP FUNCTION IF EXISTS livingrag_pack_activation(jsonb)")
