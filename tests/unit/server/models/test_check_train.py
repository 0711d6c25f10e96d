"""`inputs.check_train`, the gate every model's `fit` goes through: duplicates and non-finite
values are refused by name, explicit zeros stay filled cells, the copy is canonical."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from privrec.server.models.inputs import check_train


def _coo(rows: list[int], cols: list[int], vals: list[float]) -> sp.coo_matrix:
    return sp.coo_matrix((np.array(vals), (np.array(rows), np.array(cols))), shape=(3, 4))


@pytest.mark.parametrize("vals", [[1.0, 2.0, 5.0], [1.0, -1.0, 5.0]], ids=["summing", "cancelling"])
def test_a_duplicate_cell_is_refused_even_when_its_values_cancel(vals: list[float]) -> None:
    with pytest.raises(ValueError, match="duplicate entries for the same"):
        check_train(_coo([2, 2, 0], [1, 1, 3], vals))


def test_explicit_zeros_are_filled_cells_and_rows_come_out_sorted() -> None:
    out = check_train(_coo([1, 0, 1, 0], [3, 2, 0, 0], [0.0, 4.0, -2.0, 0.0]))
    assert isinstance(out, sp.csr_matrix) and out.dtype == np.float64
    assert out.nnz == 4 and out.has_canonical_format
    assert out.indices.tolist() == [0, 2, 0, 3] and out.data.tolist() == [0.0, 4.0, -2.0, 0.0]


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_values_are_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="finite"):
        check_train(_coo([0, 1], [0, 1], [1.0, bad]))


def test_the_input_is_not_modified() -> None:
    train = sp.csr_matrix(np.array([[0.0, 2.0], [3.0, 0.0]]))
    out = check_train(train)
    out.data[:] = 9.0
    assert train.data.tolist() == [2.0, 3.0]
