"""The id -> row lookup the graph build uses (livingrag.sorted_merge.IdRows), both ways it
looks ids up, on hand-built ids."""

from __future__ import annotations

import numpy as np

from livingrag.sorted_merge import IdRows


def test_dense_ids_are_looked_up_in_a_table() -> None:
    rows = IdRows(np.array([12, 10, 11, 15]))
    assert rows.table is not None
    got, ok = rows.rows(np.array([10, 15, 13, 9, 16, 12]))
    assert got.tolist() == [1, 3, 0, 0, 0, 0] and ok.tolist() == [True, True, False, False, False, True]
    assert rows.find(np.array([10, 15, 13, 9, 16, 12])).tolist() == [1, 3, -1, -1, -1, 0]


def test_sparse_ids_are_searched_in_a_sorted_copy() -> None:
    rows = IdRows(np.array([7, 3_000_000, 5, 9_000_000]))
    assert rows.table is None
    got, ok = rows.rows(np.array([9_000_000, 5, 6, 10_000_000, 0, 7]))
    assert got.tolist() == [3, 2, 0, 0, 0, 0] and ok.tolist() == [True, True, False, False, False, True]
    assert rows.find(np.array([9_000_000, 5, 6, 10_000_000, 0, 7])).tolist() == [3, 2, -1, -1, -1, 0]


def test_no_ids_find_nothing() -> None:
    got, ok = IdRows(np.array([], dtype=np.int64)).rows(np.array([1, 2]))
    assert got.tolist() == [0, 0] and ok.tolist() == [False, False]
    assert IdRows(np.array([], dtype=np.int64)).find(np.array([1])).tolist() == [-1]
