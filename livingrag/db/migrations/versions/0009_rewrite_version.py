"""``corpora.rewrite_version``: the corpus version of its last change that was not an append.

Adding passages only appends rows to the graph tables: new passages, their sentences, new
entities and edges that name a new passage. Updating or deleting passages, or giving an existing
entity its vector, changes rows a loaded graph already holds. The version counter cannot tell the
two apart; this column can. A process that holds the graph of version ``v`` and finds
``rewrite_version <= v`` reads only the rows after the ones it holds (the graph cache's appended
load) instead of every id and edge of the corpus.

Existing corpora start with ``rewrite_version = version``: whatever happened before is treated as
a rewrite.

Two indexes serve that read: ``passages (corpus_id, id)`` and ``entities (corpus_id, id)`` find a
corpus's rows above a given id, and its highest passage id, without reading the rest.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-06
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("ALTER TABLE corpora ADD COLUMN rewrite_version bigint NOT NULL DEFAULT 0")
    op.execute("UPDATE corpora SET rewrite_version = version")
    op.execute("CREATE INDEX ix_passages_corpus_id ON passages (corpus_id, id)")
    op.execute("CREATE INDEX ix_entities_corpus_id ON entities (corpus_id, id)")


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS ix_entities_corpus_id")
    op.execute("DROP INDEX IF EXISTS ix_passages_corpus_id")
    op.execute("ALTER TABLE corpora DROP COLUMN rewrite_version")
