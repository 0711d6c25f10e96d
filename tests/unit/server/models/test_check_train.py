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


def _coo_round_trip(train: sp.csr_matrix) -> sp.csr_matrix:
    """What `check_train` made of every input before CSR inputs were copied directly."""
    coo = train.tocoo()
    csr = sp.csr_matrix((coo.data.astype(np.float64), (coo.row, coo.col)), shape=train.shape)
    csr.sort_indices()
    return csr


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("seed", range(5))
def test_a_csr_input_gives_the_coo_round_trips_matrix(seed: int, index_dtype: type) -> None:
    rng = np.random.default_rng(seed)
    n_rows, n_cols = 40, 30
    rows = [
        np.sort(rng.choice(n_cols, size=rng.integers(0, 12), replace=False)) for _ in range(n_rows)
    ]
    rows = [r if rng.random() < 0.5 else r[rng.permutation(r.size)] for r in rows]  # unsorted rows
    indices = np.concatenate(rows).astype(index_dtype)
    indptr = np.concatenate([[0], np.cumsum([r.size for r in rows])]).astype(index_dtype)
    data = rng.normal(size=indices.size).round(1)  # some explicit zeros
    data[::7] = 0.0
    train = sp.csr_matrix((data, indices, indptr), shape=(n_rows, n_cols))
    out, expected = check_train(train), _coo_round_trip(train)
    assert out.indices.dtype == expected.indices.dtype and out.indptr.dtype == expected.indptr.dtype
    assert np.array_equal(out.indptr, expected.indptr)
    assert np.array_equal(out.indices, expected.indices)
    assert np.array_equal(out.data, expected.data) and out.nnz == data.size


def test_a_duplicate_cell_in_a_csr_input_is_refused() -> None:
    train = sp.csr_matrix(
        (np.array([1.0, 2.0, 3.0]), np.array([2, 0, 2]), np.array([0, 3, 3])), shape=(2, 3)
    )
    with pytest.raises(ValueError, match="duplicate entries for the same"):
        check_train(train)
