"""A partial index on the entities that have no vector yet.

After every indexing run the indexer looks for entities a concurrent change left without a vector
(``graph_writer.entities_without_embedding``: there are almost never any). Without an index that
look-up read every entity of the corpus: 17 ms of a 5-passage add on 2Wiki's corpus (40,799
entities), in the request of every passage add. The index holds only the rows it looks for, so it
is empty nearly always and costs the writes nothing.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("CREATE INDEX ix_entities_without_vector ON entities (corpus_id) WHERE embedding IS NULL")


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS ix_entities_without_vector")
