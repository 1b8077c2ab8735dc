"""The query log names the experience an answer was reused from (answer reuse for repeated questions).

``reused_experience_id`` is set when a question repeated an earlier, grounded one and was answered
from its experience without an LLM call (``experience.answer_reuse``); NULL otherwise. No foreign
key: deleting or pruning an experience must not touch the log.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("ALTER TABLE query_log ADD COLUMN reused_experience_id bigint")


def downgrade() -> None:
    op.execute("ALTER TABLE query_log DROP COLUMN IF EXISTS reused_experience_id")
