"""The corpus graph's rows (a pure module: numpy only): merging new items into an ordered sequence
without sorting it again, and finding the rows of ids. The rows are kept in content order; a load
after passages were added merges the new rows into the rows it holds
(:func:`livingrag.db.repositories.graph_tables.load_graph_tables_appended`), and the graph is built
by looking its edges' ids up (:func:`livingrag.corpus.graph_loader.graph_from_tables`).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")


def insertion_points(old: Sequence[Any] | np.ndarray, new: Sequence[Any] | np.ndarray) -> np.ndarray:
    """For each item of ``new``, the number of items of ``old`` that sort before it:
    ``q[i] = #{j : old[j] < new[i]}``. ``old`` must be strictly ascending (not checked: it is the
    caller's invariant, and checking it would cost a pass over it); ``new`` is checked to be
    strictly ascending with no item among ``old``, and a ``ValueError`` names the first that is
    not. Strings compare by code point, so PostgreSQL's ``COLLATE "C"`` (UTF-8 byte) order is the
    order meant."""
    _check_ascending(new, "new")
    if isinstance(old, np.ndarray) and isinstance(new, np.ndarray):
        q = np.searchsorted(old, new, side="left").astype(np.int64)
    else:
        q = np.fromiter((bisect.bisect_left(old, x) for x in new), dtype=np.int64, count=len(new))
    for i, p in enumerate(q.tolist()):
        if p < len(old) and old[p] == new[i]:
            raise ValueError(f"new item {_plain(new[i])!r} is already among the old items")
    return q


def _check_ascending(items: Sequence[Any] | np.ndarray, name: str) -> None:
    if isinstance(items, np.ndarray):
        bad = np.flatnonzero(items[1:] <= items[:-1])
        if len(bad):
            at = int(bad[0]) + 1
            raise ValueError(f"{name} items are not strictly ascending at {at}: {_plain(items[at])!r}")
        return
    for i in range(1, len(items)):
        if not items[i - 1] < items[i]:
            raise ValueError(f"{name} items are not strictly ascending at {i}: {items[i]!r}")


def _plain(x: Any) -> Any:
    """A numpy scalar as the Python value it holds (for messages)."""
    return x.item() if isinstance(x, np.generic) else x


def merged_positions(n_old: int, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each old and each new item lands once the new ones are inserted at ``q`` (ascending
    insertion points into ``n_old`` old items, as :func:`insertion_points` gives): new item ``i``
    at ``q[i] + i``, old item ``j`` at ``j + #{i : q[i] <= j}``."""
    q = np.asarray(q, dtype=np.int64)
    old = np.arange(n_old, dtype=np.int64)
    return old + np.searchsorted(q, old, side="right"), q + np.arange(len(q), dtype=np.int64)


def insert_items(old: Sequence[T], q: np.ndarray, new: Sequence[T]) -> list[T]:
    """``old`` with ``new[i]`` inserted before ``old[q[i]]`` (``q`` ascending; equal points keep
    ``new``'s order): the list form of ``np.insert(old, q, new)``."""
    if len(q) != len(new):
        raise ValueError(f"{len(q)} insertion points for {len(new)} new items")
    out: list[T] = []
    at = 0
    for p, item in zip(q.tolist(), new, strict=True):
        if p < at or p > len(old):
            raise ValueError(f"insertion point {p} is out of order or past the {len(old)} old items")
        out.extend(old[at:p])
        out.append(item)
        at = p
    out.extend(old[at:])
    return out


def insert_rows(old: np.ndarray, q: np.ndarray, new: np.ndarray) -> np.ndarray:
    """``np.insert(old, q, new, axis=0)`` for few new rows into many old ones, copied as the
    ``len(q) + 1`` blocks of old rows between the points (about 1.5x faster on 40k x 384 float32:
    it is a copy at memory speed). ``old`` itself when there is nothing to insert."""
    q = np.asarray(q, dtype=np.int64)
    if len(q) != len(new):
        raise ValueError(f"{len(q)} insertion points for {len(new)} new rows")
    if len(q) == 0:
        return old
    if np.any(np.diff(q) < 0) or q[0] < 0 or q[-1] > len(old):
        raise ValueError(f"insertion points must ascend within 0..{len(old)}")
    out = np.empty((len(old) + len(new), *old.shape[1:]), dtype=old.dtype)
    at = 0
    for i, p in enumerate(q.tolist()):
        out[at + i : p + i] = old[at:p]
        out[p + i] = new[i]
        at = p
    out[at + len(q) :] = old[at:]
    return out


class IdRows:
    """The row of each id of ``ids`` (unique), looked up many times: a dense table over the ids'
    span when it is at most a few times their number (a corpus's ids mostly are: one sequence),
    else a sorted copy searched with ``searchsorted``."""

    def __init__(self, ids: np.ndarray) -> None:
        self.ids = np.asarray(ids, dtype=np.int64)
        n = len(self.ids)
        self.lo = int(self.ids.min()) if n else 0
        span = int(self.ids.max()) - self.lo + 1 if n else 0
        self.table: np.ndarray | None = None
        if n and span <= 4 * n + 65_536:
            self.table = np.full(span, -1, dtype=np.int64)
            self.table[self.ids - self.lo] = np.arange(n, dtype=np.int64)
        elif n:
            self.order = np.argsort(self.ids, kind="stable")
            self.sorted = self.ids[self.order]

    def find(self, wanted: np.ndarray) -> np.ndarray:
        """Row of each wanted id, -1 where it is not among ``ids``."""
        wanted = np.asarray(wanted, dtype=np.int64)
        if len(self.ids) == 0:
            return np.full(len(wanted), -1, dtype=np.int64)
        if self.table is not None:
            at = wanted - self.lo
            inside = (at >= 0) & (at < len(self.table))
            rows = np.full(len(wanted), -1, dtype=np.int64)
            rows[inside] = self.table[at[inside]]
            return rows
        pos = np.searchsorted(self.sorted, wanted).clip(0, len(self.ids) - 1)
        return np.where(self.sorted[pos] == wanted, self.order[pos], -1).astype(np.int64)

    def rows(self, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Row of each wanted id (0 where absent) and a mask of the wanted ids that are present."""
        rows = self.find(wanted)
        ok = rows >= 0
        return np.where(ok, rows, 0), ok


__all__ = ["IdRows", "insert_items", "insert_rows", "insertion_points", "merged_positions"]
