"""`cosine_knn`'s argpartition path equals the reference's full stable sort, ties included."""

from __future__ import annotations

import numpy as np
import pytest

from privrec.server.models.sketch_knn import cosine_knn


@pytest.mark.parametrize("kind", ["gauss", "binary"])  # binary profiles: many exact ties
@pytest.mark.parametrize("k", [1, 4, 10, 59])  # 59 = n - 1: every other row
def test_partition_equals_reference(kind: str, k: int) -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(60, 12)) if kind == "gauss" else (rng.random((60, 6)) < 0.4) * 1.0
    ref = cosine_knn(x, k, method="reference")
    for block in (None, 7, 60):
        assert np.array_equal(cosine_knn(x, k, block=block), ref)


def test_ties_keep_the_smaller_rows() -> None:
    """Rows 1..5 are the same vector: row 0's 2 neighbours among equally similar rows are the
    smallest ones, 1 and 2 (a partition alone may keep any two)."""
    x = np.array([[1.0, 0.0]] + [[1.0, 1.0]] * 5)
    assert cosine_knn(x, 2)[0].tolist() == [1, 2]


def test_method_is_checked() -> None:
    with pytest.raises(ValueError, match="`method`"):
        cosine_knn(np.eye(3), 1, method="sorted")
