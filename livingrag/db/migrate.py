"""Running the alembic migrations from code, and checking that a database is current."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, text

from livingrag.errors import SchemaOutOfDate

if TYPE_CHECKING:
    from livingrag.db.engine import Database

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"  # shipped in the package (wheel or editable)
# Serialises migrations of one database; Postgres advisory lock across processes.
_MIGRATION_LOCK_KEY = 0x4C5247  # "LRG"
_local_lock = threading.Lock()


def alembic_config(connection: Connection | None = None, *, app_role: str = "livingrag_app") -> Config:
    if not MIGRATIONS_DIR.is_dir():
        raise FileNotFoundError(f"migrations folder not found at {MIGRATIONS_DIR}")
    cfg = Config()  # no alembic.ini needed: an installed wheel has none
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("path_separator", "os")
    cfg.set_main_option("file_template", "%%(rev)s_%%(slug)s")
    cfg.attributes["app_role"] = app_role
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    if len(heads) != 1:
        raise RuntimeError(f"migrations have {len(heads)} heads: {heads}")
    return heads[0]


def current_revision(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


@dataclass(frozen=True)
class SchemaStatus:
    current: str | None
    head: str

    @property
    def up_to_date(self) -> bool:
        return self.current == self.head


def status(db: Database) -> SchemaStatus:
    with db.owner_engine.connect() as conn:
        return SchemaStatus(current=current_revision(conn), head=head_revision())


def _run(db: Database, fn: str, revision: str) -> None:
    with _local_lock, db.owner_engine.connect() as conn:
        conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _MIGRATION_LOCK_KEY})
        # the pool's statement_timeout guards queries, not schema changes: rewriting or indexing a
        # large experiences table legitimately takes longer (reset when the connection returns)
        conn.execute(text("SET statement_timeout = 0"))
        # RLS is forced on the tenant tables (0006): a data migration run by a non-superuser owner
        # reaches every tenant's rows only through the owner route's maintenance setting
        conn.execute(text("SET livingrag.maintenance = 'on'"))
        conn.commit()
        try:
            cfg = alembic_config(conn, app_role=db.settings.app_role)
            getattr(command, fn)(cfg, revision)
            conn.commit()
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _MIGRATION_LOCK_KEY})
            conn.execute(text("RESET statement_timeout"))
            conn.execute(text("RESET livingrag.maintenance"))
            conn.commit()
    # Connections opened before the migration may hold stale type info (the vector type).
    db.dispose_app_pools()


def upgrade(db: Database, revision: str = "head") -> None:
    """Apply migrations up to ``revision``."""
    _run(db, "upgrade", revision)


def downgrade(db: Database, revision: str) -> None:
    """Revert migrations down to ``revision`` (``base`` removes the whole schema)."""
    _run(db, "downgrade", revision)


def ensure_schema(db: Database, *, auto_upgrade: bool) -> None:
    """Bring the embedded database up to date, or refuse an out-of-date external one."""
    st = status(db)
    if st.up_to_date:
        return
    if auto_upgrade:
        upgrade(db)
        return
    if st.current is None:
        raise SchemaOutOfDate("the database has no livingrag schema; run `livingrag db upgrade` to create it")
    raise SchemaOutOfDate(
        f"the database schema is at revision {st.current} but this livingrag needs {st.head}; "
        "run `livingrag db upgrade` first"
    )
