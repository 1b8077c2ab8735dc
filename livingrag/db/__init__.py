"""PostgreSQL + pgvector: engines, embedded server, tables, migrations and repositories."""

from livingrag.db.engine import Database

__all__ = ["Database"]
