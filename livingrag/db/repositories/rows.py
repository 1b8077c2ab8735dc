"""What repositories read off a statement's result beyond its rows."""

from __future__ import annotations

from typing import Any

from sqlalchemy import CursorResult, Result


def rowcount(result: Result[*tuple[Any, ...]]) -> int:
    """The number of rows an UPDATE/DELETE/INSERT matched. ``Session.execute`` is typed to return a
    plain :class:`~sqlalchemy.Result`, but a DML statement's result is a :class:`~sqlalchemy.CursorResult`,
    the class that carries ``rowcount``; anything else is a caller's mistake."""
    if not isinstance(result, CursorResult):
        raise TypeError(f"rowcount needs the CursorResult of a DML statement, got {type(result).__name__}")
    return int(result.rowcount)
