"""The flat form of many sparse vectors (livingrag.sparse), shared by the experience repository
and the matcher."""

from __future__ import annotations

import numpy as np
import pytest

from livingrag.experience.similarity import sparse_cosines, sparse_cosines_flat
from livingrag.sparse import concat_sparse


def test_concat_sparse_lays_vectors_end_to_end() -> None:
    ids, w, lengths = concat_sparse(
        [np.array([3, 1], dtype=np.int64), np.array([], dtype=np.int64), np.array([7], dtype=np.int64)],
        [np.array([0.5, 0.25]), np.array([]), np.array([2.0])],
    )
    assert ids.tolist() == [3, 1, 7] and ids.dtype == np.int64
    assert w.tolist() == [0.5, 0.25, 2.0]
    assert lengths.tolist() == [2, 0, 1] and lengths.dtype == np.int64


def test_concat_sparse_of_no_vectors_is_three_empty_arrays() -> None:
    ids, w, lengths = concat_sparse([], [])
    assert ids.shape == w.shape == lengths.shape == (0,)
    assert ids.dtype == np.int64 and lengths.dtype == np.int64


def test_the_flat_form_scores_like_the_per_vector_form() -> None:
    base = {1: 1.0, 3: 2.0}
    ids = [np.array([3, 1], dtype=np.int64), np.array([9], dtype=np.int64)]
    weights = [np.array([1.0, 0.5]), np.array([4.0])]
    assert sparse_cosines_flat(base, *concat_sparse(ids, weights)).tolist() == pytest.approx(
        sparse_cosines(base, ids, weights).tolist()
    )


def test_concat_sparse_names_the_mismatched_input() -> None:
    with pytest.raises(ValueError, match="2 id arrays and 1 weight arrays"):
        concat_sparse([np.array([1]), np.array([2])], [np.array([1.0])])
    with pytest.raises(ValueError, match="sparse vector 1 has 2 ids and 1 weights"):
        concat_sparse([np.array([1]), np.array([2, 3])], [np.array([1.0]), np.array([1.0])])
