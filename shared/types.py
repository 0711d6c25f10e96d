"""Array aliases shared by every node."""

from __future__ import annotations

from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
IndexArray = npt.NDArray[np.integer[Any]]
"""Indices of any integer width (scipy.sparse keeps int32 indices when they fit)."""
BoolArray = npt.NDArray[np.bool_]
UInt8Array = npt.NDArray[np.uint8]
Arrays: TypeAlias = dict[str, npt.NDArray[Any]]
"""Named arrays (an .npz archive's content)."""

SparseMatrix: TypeAlias = "sp.spmatrix | sp.sparray"
"""Any scipy sparse matrix a caller may pass; `as_csr` turns it into canonical CSR."""


def as_csr(matrix: Any) -> sp.csr_matrix:
    """A float64 CSR copy of a scipy sparse matrix (any format, matrix or array API).

    Raises:
        ValueError: `matrix` is not a 2-D scipy sparse matrix.
    """
    if not sp.issparse(matrix):
        raise ValueError(f"expected a 2-D scipy sparse matrix, got {type(matrix).__name__}")
    m: Any = matrix  # scipy-stubs types spmatrix and sparray apart; both have these methods
    if len(m.shape) != 2:
        raise ValueError(f"expected a 2-D scipy sparse matrix, got shape {m.shape}")
    csr: sp.csr_matrix = sp.csr_matrix(m.tocsr().astype(np.float64))
    return csr


__all__ = [
    "Arrays",
    "BoolArray",
    "FloatArray",
    "IndexArray",
    "IntArray",
    "SparseMatrix",
    "UInt8Array",
    "as_csr",
]
