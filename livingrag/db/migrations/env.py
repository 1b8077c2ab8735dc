"""Alembic environment.

The connection comes from ``config.attributes["connection"]`` when livingrag runs a migration
itself; otherwise from livingrag's settings (an external URL, or the embedded server).
The application role name comes from ``config.attributes["app_role"]`` or the settings.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from livingrag.db.models import Base, include_in_autogenerate

target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        transaction_per_migration=True,
        include_name=include_in_autogenerate,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    config = context.config
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    from livingrag.config import get_settings
    from livingrag.db.engine import Database

    settings = get_settings()
    config.attributes.setdefault("app_role", settings.db.app_role)
    db = Database(settings.db)
    try:
        with db.owner_engine.connect() as conn:
            _run(conn)
            conn.commit()
    finally:
        db.dispose()


if context.is_offline_mode():
    raise SystemExit("offline (--sql) migrations are not supported: the migrations inspect the server")
run_migrations_online()
