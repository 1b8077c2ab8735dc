"""livingrag.sorted_merge: new items merged into an ordered sequence, on hand-built inputs."""

from __future__ import annotations

import numpy as np
import pytest

from livingrag.sorted_merge import insert_items, insert_rows, insertion_points, merged_positions


def test_insertion_points_count_the_old_items_below_each_new_one() -> None:
    old = ["b", "d", "f"]
    assert insertion_points(old, ["a", "c", "e", "g"]).tolist() == [0, 1, 2, 3]
    assert insertion_points(old, ["c", "ca"]).tolist() == [1, 1]
    assert insertion_points([], ["x"]).tolist() == [0]
    assert insertion_points(old, []).tolist() == []
    assert insertion_points(np.array([2, 5, 9]), np.array([1, 6, 7, 10])).tolist() == [0, 2, 2, 3]


def test_strings_sort_by_code_point_as_utf8_bytes_do() -> None:
    """The order PostgreSQL's COLLATE "C" gives UTF-8 text: "Z" < "a" < "é" < "中"."""
    old = ["Z", "é"]
    assert insertion_points(old, ["a", "中"]).tolist() == [1, 2]
    assert sorted(["中", "é", "a", "Z"], key=lambda s: s.encode()) == ["Z", "a", "é", "中"]


def test_new_items_out_of_order_or_already_there_are_refused() -> None:
    with pytest.raises(ValueError, match=r"not strictly ascending at 1: 'a'"):
        insertion_points(["m"], ["b", "a"])
    with pytest.raises(ValueError, match=r"new item 'm' is already among the old items"):
        insertion_points(["a", "m"], ["m"])
    with pytest.raises(ValueError, match="not strictly ascending at 2"):
        insertion_points(np.array([1, 4]), np.array([2, 3, 3]))
    with pytest.raises(ValueError, match="new item 4 is already"):
        insertion_points(np.array([1, 4]), np.array([4]))


def test_merged_positions_and_inserted_items_agree_with_numpy_insert() -> None:
    old, new = ["b", "d", "f"], ["a", "c", "e", "g"]
    q = insertion_points(old, new)
    merged = insert_items(old, q, new)
    assert merged == ["a", "b", "c", "d", "e", "f", "g"]
    old_at, new_at = merged_positions(len(old), q)
    assert old_at.tolist() == [1, 3, 5] and new_at.tolist() == [0, 2, 4, 6]
    vecs = np.insert(np.array([[1.0], [3.0], [5.0]]), q, np.array([[0.0], [2.0], [4.0], [6.0]]), axis=0)
    assert vecs.ravel().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    # several new items at one point keep their order
    q2 = insertion_points(["a", "z"], ["m", "n", "o"])
    assert q2.tolist() == [1, 1, 1]
    assert insert_items(["a", "z"], q2, ["m", "n", "o"]) == ["a", "m", "n", "o", "z"]
    assert merged_positions(2, q2)[0].tolist() == [0, 4]


def test_insert_items_refuses_points_it_cannot_honour() -> None:
    with pytest.raises(ValueError, match="2 insertion points for 1 new items"):
        insert_items(["a"], np.array([0, 1]), ["b"])
    with pytest.raises(ValueError, match="out of order or past the 1 old items"):
        insert_items(["a"], np.array([2]), ["b"])
    with pytest.raises(ValueError, match="out of order"):
        insert_items(["a", "b"], np.array([1, 0]), ["x", "y"])


def test_insert_rows_is_numpy_insert() -> None:
    old = np.arange(12, dtype=np.float32).reshape(6, 2)
    new = -np.arange(1, 9, dtype=np.float32).reshape(4, 2)
    for q in ([0, 0, 3, 6], [2, 2, 2, 2], [6, 6, 6, 6], [0, 1, 2, 3]):
        np.testing.assert_array_equal(insert_rows(old, np.array(q), new), np.insert(old, q, new, axis=0))
    got = insert_rows(np.array([1, 3]), np.array([1]), np.array([2]))
    assert got.tolist() == [1, 2, 3] and got.dtype == np.int64
    assert insert_rows(old, np.array([], dtype=np.int64), new[:0]) is old  # nothing to insert: not copied
    with pytest.raises(ValueError, match=r"ascend within 0\.\.6"):
        insert_rows(old, np.array([3, 1, 4, 5]), new)
    with pytest.raises(ValueError, match=r"ascend within 0\.\.6"):
        insert_rows(old, np.array([1, 2, 3, 7]), new)
    with pytest.raises(ValueError, match="2 insertion points for 4 new rows"):
        insert_rows(old, np.array([1, 2]), new)
