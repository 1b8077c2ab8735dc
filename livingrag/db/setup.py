"""Opening the database for work that needs its schema: connect, then migrate or check.

:class:`~livingrag.db.engine.Database` only connects (and starts the embedded server, whose
connection it is). The schema step is this module's, called explicitly by whoever builds the
application (the CLI commands, ``serve``, ``demo``, the HTTP app, the pipeline and the evaluation
stream when they open the database themselves):

* the embedded server's database is upgraded to the migrations' head (it belongs to this
  installation: a fresh machine needs no separate migrate step);
* an external server's schema is only checked (one read of ``alembic_version``): when it is missing
  or behind, :class:`~livingrag.errors.SchemaOutOfDate` names ``livingrag db upgrade``, which its
  operator runs as the owner after each upgrade of livingrag.

``livingrag db upgrade|downgrade|status`` and ``livingrag doctor`` open a bare ``Database`` and
call :mod:`livingrag.db.migrate` themselves.
"""

from __future__ import annotations

from livingrag.config import DBSettings
from livingrag.db import migrate
from livingrag.db.engine import Database


def open_database(settings: DBSettings) -> Database:
    """A :class:`Database` for ``settings`` whose schema is at the migrations' head: the embedded
    server's is upgraded to it, an external one's is checked (:class:`~livingrag.errors.SchemaOutOfDate`
    naming ``livingrag db upgrade`` when it is missing or behind). The caller closes it; a refused
    schema closes it before the error propagates."""
    db = Database(settings)
    try:
        migrate.ensure_schema(db, auto_upgrade=db.embedded is not None)
    except BaseException:
        db.close()
        raise
    return db


__all__ = ["open_database"]
