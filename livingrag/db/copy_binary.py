"""Bulk reads and writes with PostgreSQL's binary COPY.

Reads: a query whose columns all have a fixed width (bigint, integer, real, double precision,
and pgvector ``vector`` of a known dimension) is streamed with ``COPY (...) TO STDOUT (FORMAT
BINARY)`` and parsed by numpy in one pass (no Python object per row).

Writes: rows are copied into a temporary table (``COPY ... FROM STDIN (FORMAT BINARY)``) and moved
into the real table with ``INSERT ... SELECT``: PostgreSQL refuses ``COPY FROM`` into a table with
row-level security, and the temporary table has none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

_SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
_WIDTH = {"int8": (">i8", 8), "int4": (">i4", 4), "float4": (">f4", 4), "float8": (">f8", 8)}

Column = tuple[str, str] | tuple[str, str, int]
"""(name, "int8" | "int4" | "float4" | "float8") or (name, "vector", dimension)."""


def raw_connection(session: Session) -> Any:
    """The psycopg connection under ``session``, inside the session's current transaction."""
    return session.connection().connection.driver_connection


def _dtype(columns: Sequence[Column]) -> np.dtype:
    fields: list[tuple[Any, ...]] = [("_n", ">i2")]
    for col in columns:
        name, kind = col[0], col[1]
        fields.append((f"_l_{name}", ">i4"))
        if kind == "vector":
            dim = _vector_dim(col)
            fields += [(f"_d_{name}", ">i2"), (f"_u_{name}", ">i2"), (name, ">f4", (dim,))]
        else:
            fields.append((name, _WIDTH[kind][0]))
    return np.dtype(fields)


def _expected_length(col: Column) -> int:
    return 4 + 4 * _vector_dim(col) if col[1] == "vector" else _WIDTH[col[1]][1]


def _vector_dim(col: Column) -> int:
    """The dimension of a ``(name, "vector", dim)`` column."""
    if len(col) != 3:
        raise ValueError(f"vector column {col[0]!r} needs its dimension: (name, 'vector', dim)")
    return int(col[2])


def copy_out_fixed(
    session: Session, query: str, columns: Sequence[Column], params: Mapping[str, Any] | None = None
) -> dict[str, np.ndarray]:
    """Run ``query`` through binary COPY and return one native-endian numpy array per column.

    Every value must be non-NULL and of the declared fixed width (vectors of the given dimension);
    anything else raises ValueError naming the column.
    """
    conn = raw_connection(session)
    chunks: list[bytes] = []
    with conn.cursor() as cur, cur.copy(f"COPY ({query}) TO STDOUT (FORMAT BINARY)", params) as copy:
        for data in copy:
            chunks.append(bytes(data))
    buf = b"".join(chunks)
    if not buf.startswith(_SIGNATURE):
        raise ValueError("unexpected COPY output (no binary signature)")
    ext_len = int.from_bytes(buf[15:19], "big")
    body = memoryview(buf)[19 + ext_len : len(buf) - 2]  # the trailer is int16 -1
    dt = _dtype(columns)
    if len(body) % dt.itemsize:
        raise ValueError(
            f"COPY rows are not of fixed width {dt.itemsize}: a NULL or a vector of another dimension in "
            f"{[c[0] for c in columns]}"
        )
    rows = np.frombuffer(body, dtype=dt)
    out: dict[str, np.ndarray] = {}
    if len(rows) and not np.all(rows["_n"] == len(columns)):
        raise ValueError("COPY rows have an unexpected number of columns")
    for col in columns:
        name = col[0]
        if len(rows) and not np.all(rows[f"_l_{name}"] == _expected_length(col)):
            raise ValueError(f"column {name!r}: NULL or unexpected width in COPY output")
        arr = rows[name]
        native = arr.dtype.newbyteorder("=") if arr.dtype.subdtype is None else arr.dtype.base.newbyteorder("=")
        out[name] = np.ascontiguousarray(arr.astype(native))
    return out


def copy_in(
    session: Session, table: str, columns: Sequence[str], types: Sequence[str], rows: Iterable[Sequence[Any]]
) -> int:
    """Binary-COPY ``rows`` into ``table`` (a temporary table); returns the number of rows."""
    conn = raw_connection(session)
    n = 0
    cols = ", ".join(columns)
    with conn.cursor() as cur, cur.copy(f"COPY {table} ({cols}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(list(types))
        for row in rows:
            copy.write_row(row)
            n += 1
    return n


__all__ = ["copy_in", "copy_out_fixed", "raw_connection"]
