"""`stack_sparse` (ModelInput.RELEASES): the releases' cells as one CSR matrix, read block by
block, the same matrix (the same floats in the same places) as stacking every payload at once."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from privrec.server import training
from privrec.server.models.inputs import check_train
from privrec.server.training import stack_sparse
from privrec.shared.mechanisms import make_mechanism
from privrec.shared.mechanisms.base import DensePayload, Profile, SparsePayload

M = 40


def _releases(n: int) -> list[SparsePayload]:
    mech = make_mechanism("rpt", {})
    rng = np.random.default_rng(1)
    out = []
    for _ in range(n):
        items = np.sort(rng.choice(M, 8, replace=False))
        rel = mech.release(Profile(items, rng.integers(1, 6, 8).astype(float), M), rng)
        assert isinstance(rel, SparsePayload)
        out.append(rel)
    return out


def _all_at_once(rows: list[SparsePayload]) -> sp.csr_matrix:
    indptr = np.concatenate([[0], np.cumsum([r.indices.size for r in rows])])
    indices = np.concatenate([r.indices for r in rows])
    return sp.csr_matrix(
        (np.concatenate([r.values for r in rows]), indices, indptr), (len(rows), M)
    )


@pytest.mark.parametrize("block", [1, 4, 25, 4096])
def test_blocks_give_the_matrix_of_every_payload_at_once(
    monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    monkeypatch.setattr(training, "ESTIMATE_BLOCK", block)
    rows = _releases(25)
    out, expected = stack_sparse(rows, M), _all_at_once(rows)
    assert out.shape == (25, M) and out.nnz == expected.nnz
    for a, b in ((out.indptr, expected.indptr), (out.indices, expected.indices)):
        assert np.array_equal(a, b)
    assert np.array_equal(out.data, expected.data)  # the rows' own (release) item order
    fitted, reference = check_train(out), check_train(expected)
    assert np.array_equal(fitted.indices, reference.indices)
    assert np.array_equal(fitted.data, reference.data)


def test_no_release_gives_an_empty_matrix_and_a_dense_payload_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(training, "ESTIMATE_BLOCK", 2)
    assert stack_sparse([], M).shape == (0, M)
    rows: list[object] = [*_releases(3), DensePayload(np.zeros(M))]
    with pytest.raises(TypeError, match="sparse payloads"):
        stack_sparse(rows, M)  # type: ignore[arg-type]
