"""SQL statement errors as the logs may show them: without their parameters (tenant data)."""

from __future__ import annotations

from sqlalchemy.exc import StatementError


def hide_sql_parameters(exc: BaseException) -> None:
    """Make every SQLAlchemy statement error in ``exc``'s chain print its statement without its
    parameters (tenant data: a search string, a passage's text), wherever it is formatted later
    (this log, the ASGI server's traceback)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, StatementError):
            cur.hide_parameters = True
        cur = cur.__cause__ or cur.__context__
