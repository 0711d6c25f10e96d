"""Compiled kernels of the RPT attacks' low-rank fit: the filled-cell sums of `rpt_matrix`
(issue 13, target 3).

Each computes what a numpy or scipy expression of the reference path computes, in the same
summation order, so the two paths agree to rounding
(``tests/unit/adversary/test_attacks_rpt_kernels.py`` checks it):

* `rows_times_dense`, `cols_times_dense`: A·D and Aᵀ·D for a CSR matrix A, as scipy's sparse
  × dense products sum them; with the upper triangles of E[b bᵀ] (`upper_second_moments`,
  `mirror_triangles`) they give Σ w (b bᵀ + C) (`rpt_matrix.precision_part`);
  `chol_posteriors`: the k × k posteriors by Cholesky, 32 users at a time
  (`rpt_matrix.posterior_from_sums`).
* `quad_forms`: x_cᵀ S_c x_c per cell without gathering a k × k matrix per cell
  (`rpt_matrix.quad_form`).
* `row_dots`: a_{u_c}ᵀ b_{j_c} per filled cell (also `rpt_matrix.cell_variances`).
* `upper_second_moments`, `triangle_rows`: the triangles of E[b bᵀ] and the rows of
  `rpt_matrix.cell_variances`'s dot products, bit for bit the numpy expressions they replace.

Every kernel that loops over users, items or cells runs them on numba's threads (``prange``).
Each output row or cell is written by one thread and every sum keeps its serial order, so the
results are the same bit for bit on any number of threads (tested with one and three).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from privrec.shared.types import BoolArray, FloatArray, IndexArray


@numba.njit(cache=True, inline="always")
def chunk_rows(c: int, n_chunks: int, n: int) -> tuple[int, int]:  # pragma: no cover - numba
    """Rows [lo, hi) of chunk c when n rows are cut into n_chunks contiguous chunks."""
    return c * n // n_chunks, (c + 1) * n // n_chunks


CHUNKS = 256
"""Parallel loops hand out rows in this many contiguous chunks (each with its own scratch),
so that no two threads write the same output row and the sums keep their serial order."""


@numba.njit(cache=True, parallel=True)
def rows_times_dense(
    indptr: IndexArray, indices: IndexArray, w: FloatArray, dense: FloatArray
) -> FloatArray:  # pragma: no cover - numba
    """A·D for the CSR matrix A = (w, indices, indptr) and a dense D: row p sums w_pq D_q over
    the row's stored entries in their CSR order, one contiguous AXPY per entry, as scipy's
    csr × dense product does (bit for bit; rows shared out among threads)."""
    p = indptr.size - 1
    t = dense.shape[1]
    out = np.zeros((p, t))
    for r in numba.prange(p):
        for idx in range(indptr[r], indptr[r + 1]):
            wq = w[idx]
            q = indices[idx]
            for s in range(t):
                out[r, s] += wq * dense[q, s]
    return out


@numba.njit(cache=True, parallel=True)
def cols_times_dense(
    indptr: IndexArray, indices: IndexArray, w: FloatArray, dense: FloatArray, p: int, parts: int
) -> FloatArray:  # pragma: no cover - numba
    """Aᵀ·D for the CSR matrix A = (w, indices, indptr) (n × p) and a dense D (n × t): row r
    sums w_qr D_q over the stored entries (q, r), q ascending, the order the CSR of Aᵀ (and
    scipy's csc × dense product) gives, bit for bit. Each D_q is read once and scattered into
    the rows it touches. In parallel, each of `parts` parts (one per thread) owns a range of
    the p rows and scatters only the entries that fall in it (every part walks the indices;
    the adds, t per entry, are shared out), so each row's sum keeps its order."""
    t = dense.shape[1]
    out = np.zeros((p, t))
    for part in numba.prange(parts):
        lo, hi = chunk_rows(part, parts, p)
        for q in range(indptr.size - 1):
            for idx in range(indptr[q], indptr[q + 1]):
                r = indices[idx]
                if lo <= r < hi:
                    wq = w[idx]
                    for s in range(t):
                        out[r, s] += wq * dense[q, s]
    return out


@numba.njit(cache=True, parallel=True)
def upper_second_moments(b: FloatArray, cov: FloatArray) -> FloatArray:  # pragma: no cover - numba
    """Row q: the upper triangle (row-major, k(k+1)/2 entries) of b_q b_qᵀ + cov[q], the
    second moment E[b bᵀ] that `rpt_matrix.precision_part` sums; `cov` of length 0 means no
    covariance. Each entry is b_qi·b_qj (+ cov[q, i, j]) in that order, as numpy's
    ``b[:, iu] * b[:, ju] + cov[:, iu, ju]`` computes it, written C-contiguous."""
    q, k = b.shape
    out = np.empty((q, k * (k + 1) // 2))
    with_cov = cov.shape[0] > 0
    for r in numba.prange(q):
        s = 0
        for i in range(k):
            for j in range(i, k):
                v = b[r, i] * b[r, j]
                if with_cov:
                    v += cov[r, i, j]
                out[r, s] = v
                s += 1
    return out


@numba.njit(cache=True, parallel=True)
def triangle_rows(
    cov: FloatArray, vec: FloatArray, cov_first: bool
) -> FloatArray:  # pragma: no cover - numba
    """Per row r, tri(cov[r]) and tri′(vec[r] vec[r]ᵀ) side by side (`cov_first` sets the
    order; a part given with length 0 is left out): tri is the upper triangle, row-major,
    tri′ the same with the off-diagonal doubled, (v_i·v_j)·2, as numpy computes it. With these
    rows, xᵀSx + yᵀTy is one dot product (`rpt_matrix.cell_variances`)."""
    k = cov.shape[1] if cov.shape[0] > 0 else vec.shape[1]
    t = k * (k + 1) // 2
    has_cov, has_vec = cov.shape[0] > 0, vec.shape[0] > 0
    p = cov.shape[0] if has_cov else vec.shape[0]
    out = np.empty((p, t * (int(has_cov) + int(has_vec))))
    cov_at = 0 if cov_first or not has_vec else t
    vec_at = 0 if not cov_first or not has_cov else t
    for r in numba.prange(p):
        s = 0
        for i in range(k):
            for j in range(i, k):
                if has_cov:
                    out[r, cov_at + s] = cov[r, i, j]
                if has_vec:
                    out[r, vec_at + s] = vec[r, i] * vec[r, j] * (1.0 if i == j else 2.0)
                s += 1
    return out


@numba.njit(cache=True, parallel=True)
def mirror_triangles(tri: FloatArray, k: int) -> FloatArray:  # pragma: no cover - numba
    """The full symmetric k × k matrices whose upper triangles (row-major) are the rows of
    `tri`."""
    p = tri.shape[0]
    out = np.empty((p, k, k))
    for r in numba.prange(p):
        s = 0
        for i in range(k):
            for j in range(i, k):
                out[r, i, j] = tri[r, s]
                out[r, j, i] = tri[r, s]
                s += 1
    return out


#: Users per block in `chol_posteriors`: the block's k × k arrays are stored user-innermost
#: (k × k × 32), so that every step of the factorisation is one vectorised loop over 32 users.
CHOL_BLOCK = 32


@numba.njit(cache=True, parallel=True)
def chol_posteriors(
    sums: FloatArray, rhs: FloatArray, prior_prec: FloatArray
) -> tuple[FloatArray, FloatArray]:  # pragma: no cover - numba
    """(P⁻¹ rhs, P⁻¹) per row, P = sums[r] + diag(prior_prec) (`rpt_matrix.posterior_from_sums`).

    P is symmetric positive definite (a sum of w·E[b bᵀ] ⪰ 0 plus a positive diagonal), so
    P = L Lᵀ (Cholesky), P⁻¹ = L⁻ᵀ L⁻¹: about k³/2 multiply-adds instead of LU's 4k³/3 and no
    per-matrix LAPACK call. Rows go in blocks of `CHOL_BLOCK` (`_chol_block`), blocks shared
    out among threads; each row's operations are those of a row-by-row Cholesky in the same
    order, so the results do not depend on the block (bit for bit the row-at-a-time kernel this
    replaced: at 400 rows and k = 11, 0.49 → 0.25 ms; docs/decisions/compute.md). A row whose
    Cholesky meets a non-positive pivot (not positive definite in floating point) falls back to
    np.linalg.inv, as the reference.
    """
    p, k = rhs.shape
    cov = np.empty((p, k, k))
    mean = np.empty((p, k))
    size = CHOL_BLOCK
    for b in numba.prange((p + size - 1) // size):
        first = b * size
        rows = min(size, p - first)
        s = np.empty((k, k, size))
        r = np.empty((k, size))
        for u in range(rows):
            for i in range(k):
                r[i, u] = rhs[first + u, i]
                for j in range(k):
                    s[i, j, u] = sums[first + u, i, j]
        block_mean, block_cov, ok = _chol_block(s, r, prior_prec, rows)
        for u in range(rows):
            row = first + u
            if ok[u]:
                for i in range(k):
                    mean[row, i] = block_mean[i, u]
                    for j in range(k):
                        cov[row, i, j] = block_cov[i, j, u]
                continue
            full = sums[row].copy()
            for i in range(k):
                full[i, i] += prior_prec[i]
            cov[row] = np.linalg.inv(full)
            for i in range(k):
                acc = 0.0
                for j in range(k):
                    acc += cov[row, i, j] * rhs[row, j]
                mean[row, i] = acc
    return mean, cov


@numba.njit(cache=True)
def _chol_block(
    s: FloatArray, r: FloatArray, prior_prec: FloatArray, rows: int
) -> tuple[FloatArray, FloatArray, BoolArray]:  # pragma: no cover - numba
    """`chol_posteriors` for the first `rows` users of a block stored user-innermost
    (s: k × k × block, r: k × block): (mean, cov, ok), ok False where a pivot is not
    positive (that user's mean and cov are then meaningless)."""
    k = prior_prec.size
    size = s.shape[2]
    lo = np.empty((k, k, size))
    inv = np.empty((k, k, size))
    cov = np.empty((k, k, size))
    mean = np.empty((k, size))
    acc = np.empty(size)
    ok = np.ones(size, np.bool_)
    # P = L Lᵀ
    for i in range(k):
        for j in range(i + 1):
            for u in range(rows):
                acc[u] = s[i, j, u] + (prior_prec[i] if i == j else 0.0)
            for m in range(j):
                for u in range(rows):
                    acc[u] -= lo[i, m, u] * lo[j, m, u]
            if i == j:
                for u in range(rows):
                    if not acc[u] > 0.0:
                        ok[u] = False
                        acc[u] = 1.0
                    lo[i, i, u] = math.sqrt(acc[u])
            else:
                for u in range(rows):
                    lo[i, j, u] = acc[u] / lo[j, j, u]
    # L⁻¹ (lower triangular), by forward substitution column by column
    for j in range(k):
        for u in range(rows):
            inv[j, j, u] = 1.0 / lo[j, j, u]
        for i in range(j + 1, k):
            for u in range(rows):
                acc[u] = 0.0
            for m in range(j, i):
                for u in range(rows):
                    acc[u] -= lo[i, m, u] * inv[m, j, u]
            for u in range(rows):
                inv[i, j, u] = acc[u] / lo[i, i, u]
    # P⁻¹ = L⁻ᵀ L⁻¹: (i, j) = Σ_{m ≥ max(i, j)} inv[m, i] inv[m, j]
    for i in range(k):
        for j in range(i + 1):
            for u in range(rows):
                acc[u] = 0.0
            for m in range(i, k):
                for u in range(rows):
                    acc[u] += inv[m, i, u] * inv[m, j, u]
            for u in range(rows):
                cov[i, j, u] = acc[u]
                cov[j, i, u] = acc[u]
    # P⁻¹ rhs
    for i in range(k):
        for u in range(rows):
            acc[u] = 0.0
        for j in range(k):
            for u in range(rows):
                acc[u] += cov[i, j, u] * r[j, u]
        for u in range(rows):
            mean[i, u] = acc[u]
    return mean, cov, ok


@numba.njit(cache=True, fastmath={"reassoc", "contract"}, parallel=True)
def quad_forms(
    vecs: FloatArray, vec_idx: IndexArray, covs: FloatArray, cov_idx: IndexArray
) -> FloatArray:  # pragma: no cover - numba
    """x_cᵀ S_c x_c with x_c = vecs[vec_idx[c]], S_c = covs[cov_idx[c]] (symmetric).

    Σ_i x_i (S_i · x): each row product is a dot product that LLVM vectorises when allowed to
    reassociate it (fast-math "reassoc" in this kernel only), so the sum's order differs from
    the reference's (S x)·x by rounding.
    """
    n = vec_idx.size
    k = vecs.shape[1]
    out = np.empty(n)
    for c in numba.prange(n):
        x = vecs[vec_idx[c]]
        s = covs[cov_idx[c]]
        total = 0.0
        for i in range(k):
            row = 0.0
            for j in range(k):
                row += s[i, j] * x[j]
            total += row * x[i]
        out[c] = total
    return out


@numba.njit(cache=True, fastmath={"reassoc", "contract"}, parallel=True)
def row_dots(
    a: FloatArray, a_idx: IndexArray, b: FloatArray, b_idx: IndexArray
) -> FloatArray:  # pragma: no cover - numba
    """a[a_idx[c]] · b[b_idx[c]] for every c (each dot product vectorised: fast-math
    "reassoc" in this kernel only, so its order differs from numpy's by rounding)."""
    n = a_idx.size
    k = a.shape[1]
    out = np.empty(n)
    for c in numba.prange(n):
        i = a_idx[c]
        j = b_idx[c]
        total = 0.0
        for s in range(k):
            total += a[i, s] * b[j, s]
        out[c] = total
    return out


def as_index(x: IndexArray) -> IndexArray:
    """int64 contiguous indices (numba compiles one specialisation)."""
    return np.ascontiguousarray(x, dtype=np.int64)


__all__ = [
    "CHUNKS",
    "as_index",
    "chol_posteriors",
    "chunk_rows",
    "cols_times_dense",
    "mirror_triangles",
    "quad_forms",
    "row_dots",
    "rows_times_dense",
    "triangle_rows",
    "upper_second_moments",
]
