"""The server's view of RPT releases (Bilge 2013, Procedure 1), shared by the RPT attacks.

What the server observes (Bilge §2.2.1, note §1.1): for every user u a sparse vector whose filled
cells are her g genuine z-scores plus noise, z′ = z + r, and F = ⌊e·β/100⌋ fakes, z′ = r, at empty
cells chosen uniformly at random; r is N(0, σ²) or U[−√3σ, √3σ] (a fair coin) with σ ~ U(0, σ_max]
and β ~ U{1..β_max} drawn privately per user. The adversary knows the protocol and the public
σ_max, β_max. `disguised_matrix` stacks the observed releases into the matrix U′ that every RPT
attack starts from (`rpt_spectral`: spectral filtering; `rpt_bayes`: the Bayes estimate;
`fake_detection`: genuine-vs-fake scoring), and `feasible_genuine` bounds each user's genuine
count from her fill count.

Empty cells (a choice; Bilge is silent). The covariance uses the server's own convention,
empty = 0, i.e. "a z-score at the user's mean" as in Bilge Eq 2.4, with columns scaled by
1/√(fill density) so that the noise, which lives only on filled cells, has the same variance
E[σ²] = σ_max²/3 (σ ~ U(0, σ_max]) per entry in every column (`rpt_spectral.spectral_basis`).
Every fit of a user's coefficients, in contrast, treats empty cells as MISSING and uses only her
filled coordinates (`side_update`): projecting the zero-filled row would shrink every estimate
towards 0 by roughly her fill density (≈ 6 % on ML-100K). Estimates are produced on filled cells
only; the referee scores them on the genuine ones (`sim.referee_attacks`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

import numba
import numpy as np
import scipy.sparse as sp

from privrec.adversary.attacks.rpt_linalg import (
    as_index,
    chol_posteriors,
    cols_times_dense,
    mirror_triangles,
    quad_forms,
    row_dots,
    rows_times_dense,
    triangle_rows,
    upper_second_moments,
)
from privrec.adversary.observations import Observations
from privrec.shared.errors import ValidationError
from privrec.shared.mechanisms.base import SparsePayload
from privrec.shared.types import FloatArray, IndexArray, IntArray


@dataclasses.dataclass(frozen=True)
class DisguisedMatrix:
    """The server's disguised matrix U′ (Bilge §2.2.1) as CSR, with the public parameters.

    Attributes:
        user_ids: row order, the users whose profile releases were observed.
        matrix: CSR of shape (n, m); stored entries are exactly the filled cells (genuine and
            fake; explicit zeros are kept), sorted within each row.
        sigma_max: public bound σ_max.
        beta_max: public bound β_max (percent).
    """

    user_ids: list[str]
    matrix: sp.csr_matrix
    sigma_max: float
    beta_max: int

    @property
    def n_users(self) -> int:
        """Number of rows (users) of the disguised matrix."""
        return int(self.matrix.shape[0])

    @property
    def n_items(self) -> int:
        """Number of columns (items) of the disguised matrix."""
        return int(self.matrix.shape[1])

    @property
    def rows(self) -> IntArray:
        """Row (user) index of every stored entry, in CSR order."""
        return np.repeat(np.arange(self.n_users), np.diff(self.matrix.indptr)).astype(np.int64)

    @property
    def filled(self) -> IntArray:
        """f_u, the number of filled cells of each user."""
        return np.diff(self.matrix.indptr).astype(np.int64)


def disguised_matrix(observations: Observations) -> DisguisedMatrix:
    """Stack the observed RPT profile releases into a `DisguisedMatrix`.

    Raises:
        ValidationError: a missing or invalid public parameter, or a payload that is not a
            well-formed RPT release of the run's dimension (naming the user).
    """
    params = observations.public_params
    try:
        sigma_max = float(params["sigma_max"])
        beta_max = int(params["beta_max"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValidationError(
            "public_params", f"need sigma_max and beta_max, got {params!r}"
        ) from exc
    if not (math.isfinite(sigma_max) and sigma_max > 0):
        raise ValidationError("public_params.sigma_max", f"must be > 0, got {sigma_max!r}")
    if not 0 <= beta_max <= 100:
        raise ValidationError("public_params.beta_max", f"must be in [0, 100], got {beta_max!r}")
    m = observations.n_items
    user_ids, idx, val, dim_list = [], [], [], []
    for uid, payload in observations.profiles.items():
        if not isinstance(payload, SparsePayload):
            raise ValidationError(
                f"profiles[{uid!r}]", f"expected a SparsePayload, got {type(payload).__name__}"
            )
        user_ids.append(uid)
        idx.append(np.asarray(payload.indices, dtype=np.int64))
        val.append(np.asarray(payload.values, dtype=np.float64))
        dim_list.append(payload.dim)
    if not user_ids:
        raise ValidationError("profiles", "no profile releases observed")
    indptr = np.concatenate([[0], np.cumsum([i.size for i in idx])]).astype(np.int64)
    shapes_ok = all(d == m for d in dim_list) and all(
        i.ndim == 1 and i.shape == v.shape for i, v in zip(idx, val, strict=True)
    )
    all_idx = np.concatenate(idx) if shapes_ok else np.zeros(0, np.int64)
    all_val = np.concatenate(val) if shapes_ok else np.zeros(0)
    if not (shapes_ok and _entries_valid(all_idx, all_val, indptr, m)):
        # name the first bad release (`_check_release` raises on it)
        for uid, dim, i, v in zip(user_ids, dim_list, idx, val, strict=True):
            _check_release(f"profiles[{uid!r}]", dim, i, v, m)
    mat = sp.csr_matrix((all_val, all_idx, indptr), shape=(len(user_ids), m))
    return DisguisedMatrix(user_ids, mat, sigma_max, beta_max)


def _entries_valid(idx: IntArray, val: FloatArray, indptr: IntArray, m: int) -> bool:
    """Whether the stacked releases (rows `indptr` of `idx`, `val`) all have indices strictly
    increasing in [0, m) and finite values: `_check_release` on all of them at once."""
    if idx.size and (idx.min() < 0 or idx.max() >= m):
        return False
    # strictly increasing within each release: a step ≤ 0 only where the next one starts
    starts = indptr[1:-1]
    up = np.diff(idx) > 0
    up[starts[(starts > 0) & (starts < idx.size)] - 1] = True
    return bool(np.all(up) and np.all(np.isfinite(val)))


def _check_release(field: str, dim: int, i: IntArray, v: FloatArray, m: int) -> None:
    """Raise ValidationError, naming `field`, unless (i, v) is a well-formed RPT release of
    dimension m: 1-D and equally long, indices strictly increasing in [0, m), finite values."""
    if dim != m or i.shape != v.shape or i.ndim != 1:
        raise ValidationError(field, f"shape mismatch (dim {dim}, n_items {m})")
    if i.size and (i[0] < 0 or i[-1] >= m or np.any(np.diff(i) <= 0)):
        raise ValidationError(f"{field}.indices", "must be strictly increasing in [0, m)")
    if not np.all(np.isfinite(v)):
        raise ValidationError(f"{field}.values", "must be finite")


def feasible_genuine(dm: DisguisedMatrix) -> tuple[FloatArray, FloatArray]:
    """Range of g_u consistent with f_u = g + ⌊(m − g)·β/100⌋ and β ∈ {1, …, β_max}.

    From (m − g)b − 1 < ⌊(m − g)b⌋ ≤ (m − g)b with b = β/100:
    (f − mb)/(1 − b) ≤ g < (f + 1 − mb)/(1 − b). The bound at β = β_max is the lower one and at
    β = 1 the upper one; at least one rating is genuine. (Bilge §3.1.1 reasons the same way
    about guessing the genuine count.)

    Returns:
        (lower, upper) float arrays of shape (n,).
    """
    f = dm.filled.astype(np.float64)
    m = dm.n_items
    if dm.beta_max == 0:
        return f, f
    b_hi, b_lo = dm.beta_max / 100.0, 0.01
    lo = np.clip((f - m * b_hi) / (1.0 - b_hi) if b_hi < 1 else 1.0, 1.0, f)
    hi = np.clip((f + 1.0 - m * b_lo) / (1.0 - b_lo), lo, f)
    return lo, hi


# ======================================================================== filled-cell fits
Kernels = Literal["fast", "reference"]
"""How the RPT attacks compute their sums: compiled kernels (`rpt_kernels`, `rpt_linalg`; the
default) or the numpy reference path they are checked and timed against (``bench/attacks.py``)."""
KERNELS: tuple[Kernels, ...] = ("fast", "reference")


def check_kernels(method: object) -> None:
    """Raise ValueError unless `method` is "fast" or "reference"."""
    if method not in KERNELS:
        raise ValueError(f"`method` must be one of {KERNELS}, got {method!r}")


def side_update(
    wmat: sp.csr_matrix | sp.csc_matrix,
    wy: sp.csr_matrix | sp.csc_matrix,
    other: FloatArray,
    other_cov: FloatArray | None,
    prior_var: FloatArray,
    *,
    method: Kernels = "fast",
) -> tuple[FloatArray, FloatArray]:
    """Gaussian posterior of one side's factors given the other side's (rows of `wmat`).

    For row p: precision P_p = diag(1/prior_var) + Σ_q w_pq E[b_q b_qᵀ], mean
    P_p⁻¹ Σ_q w_pq y_pq E[b_q], with E[b bᵀ] = b̂b̂ᵀ + Cov(b) (variational Bayes matrix
    factorisation; `other_cov` None means the other side is fixed). `method` "fast" sums only
    the upper triangles of the precisions in a compiled kernel and inverts them by Cholesky,
    "reference" sums all k² entries with scipy and inverts by LU; they agree to rounding.
    `wmat` may be CSC, e.g. the transpose of a CSR matrix (`.T`, no copy): the fast kernel
    then scatters its columns instead of gathering rows.
    """
    return posterior_from_sums(
        precision_part(wmat, other, other_cov, method=method),
        sparse_dot(wy, other) if method == "fast" else np.asarray(wy @ other),
        prior_var,
        method=method,
    )


def sparse_dot(a: sp.csr_matrix | sp.csc_matrix, dense: FloatArray) -> FloatArray:
    """``a @ dense`` in the compiled kernels, bit for bit scipy's sums, on numba's threads: a
    CSR matrix row by row (`rpt_linalg.rows_times_dense`), a CSC one (e.g. the transpose of
    a CSR matrix, `.T`, no copy) by scattering its columns (`rpt_linalg.cols_times_dense`)."""
    dense = np.ascontiguousarray(dense, dtype=np.float64)
    data = np.ascontiguousarray(a.data, dtype=np.float64)
    if a.format == "csc":
        return np.asarray(
            cols_times_dense(
                as_index(a.indptr),
                as_index(a.indices),
                data,
                dense,
                a.shape[0],
                numba.get_num_threads(),
            )
        )
    a = a.tocsr()
    return np.asarray(rows_times_dense(as_index(a.indptr), as_index(a.indices), data, dense))


def precision_part(
    wmat: sp.csr_matrix | sp.csc_matrix,
    other: FloatArray,
    other_cov: FloatArray | None,
    *,
    method: Kernels = "fast",
) -> FloatArray:
    """Σ_q w_pq E[b_q b_qᵀ] for every row p of `wmat`, shape (p, k, k) (see `side_update`)."""
    check_kernels(method)
    p, q = wmat.shape
    k = other.shape[1]
    if method == "fast":
        # The same sparse product on the upper triangles only (k(k+1)/2 columns, not k²):
        # each entry is summed exactly as in the reference, the lower one is mirrored.
        cov = np.zeros((0, k, k)) if other_cov is None else other_cov
        second = upper_second_moments(np.ascontiguousarray(other), np.ascontiguousarray(cov))
        return np.asarray(mirror_triangles(sparse_dot(wmat, second), k))
    second = other[:, :, None] * other[:, None, :]
    if other_cov is not None:
        second = second + other_cov
    return np.asarray(wmat @ second.reshape(q, k * k)).reshape(p, k, k)


def posterior_from_sums(
    sums: FloatArray, rhs: FloatArray, prior_var: FloatArray, *, method: Kernels = "reference"
) -> tuple[FloatArray, FloatArray]:
    """(P⁻¹ rhs, P⁻¹) per row with P = `sums` + diag(1/prior_var); `sums` is not modified.

    "reference": np.linalg.inv (LU) per row; "fast": compiled Cholesky
    (`rpt_linalg.chol_posteriors`), equal to rounding (P is symmetric positive definite).
    """
    check_kernels(method)
    if method == "fast":
        mean, cov = chol_posteriors(
            np.ascontiguousarray(sums), np.ascontiguousarray(rhs), 1.0 / prior_var
        )
        return np.asarray(mean), np.asarray(cov)
    k = sums.shape[1]
    prec = sums.copy()
    prec[:, np.arange(k), np.arange(k)] += 1.0 / prior_var
    cov = np.asarray(np.linalg.inv(prec), dtype=np.float64)
    return np.einsum("pij,pj->pi", cov, rhs), cov


def quad_form(
    vecs: FloatArray,
    vec_idx: IndexArray,
    covs: FloatArray,
    cov_idx: IndexArray,
    *,
    method: Kernels = "fast",
) -> FloatArray:
    """x_cᵀ S_c x_c, x_c = vecs[vec_idx[c]], S_c = covs[cov_idx[c]]: compiled (`method`
    "fast") or in memory-bounded numpy chunks ("reference")."""
    check_kernels(method)
    if method == "fast":
        return np.asarray(
            quad_forms(
                np.ascontiguousarray(vecs),
                as_index(vec_idx),
                np.ascontiguousarray(covs),
                as_index(cov_idx),
            )
        )
    k = vecs.shape[1]
    out = np.empty(vec_idx.size)
    step = max(1, 4_000_000 // (k * k))
    for s in range(0, vec_idx.size, step):
        x = vecs[vec_idx[s : s + step]]
        out[s : s + step] = np.sum(
            (covs[cov_idx[s : s + step]] @ x[:, :, None])[:, :, 0] * x, axis=1
        )
    return out


def cell_variances(
    users: FloatArray,
    user_cov: FloatArray,
    items: FloatArray,
    item_cov: FloatArray | None,
    rows: IndexArray,
    cols: IndexArray,
    *,
    method: Kernels = "fast",
) -> FloatArray:
    """b_jᵀ Cov(a_u) b_j + a_uᵀ Cov(b_j) a_u at every filled cell (u, j) = (rows[c], cols[c])
    (the second term only with `item_cov`): the posterior variance of a_uᵀ b_j.

    "reference": two `quad_form`s. "fast": xᵀSx = ⟨S, x xᵀ⟩ = Σ_{i ≤ l} S_il·(2 − δ_il) x_i x_l,
    so with per-user rows [tri(Cov(a_u)), tri′(a_u a_uᵀ)] and per-item rows
    [tri′(b_j b_jᵀ), tri(Cov(b_j))] (tri: upper triangle; tri′: off-diagonal doubled) both
    terms are one dot product of k(k+1) numbers per cell (`rpt_linalg.row_dots`), with no
    k × k product per cell. Equal to rounding.
    """
    check_kernels(method)
    if method == "reference":
        var = quad_form(items, cols, user_cov, rows, method=method)
        if item_cov is not None:
            var += quad_form(users, rows, item_cov, cols, method=method)
        return var
    k = users.shape[1]
    no_vec, no_cov = np.zeros((0, k)), np.zeros((0, k, k))  # "leave this part out"
    user_rows = triangle_rows(
        np.ascontiguousarray(user_cov),
        no_vec if item_cov is None else np.ascontiguousarray(users),
        True,
    )
    item_rows = triangle_rows(
        no_cov if item_cov is None else np.ascontiguousarray(item_cov),
        np.ascontiguousarray(items),
        False,
    )
    return np.asarray(row_dots(user_rows, as_index(rows), item_rows, as_index(cols)))


def cell_dots(
    a: FloatArray,
    a_idx: IndexArray,
    b: FloatArray,
    b_idx: IndexArray,
    *,
    method: Kernels = "fast",
) -> FloatArray:
    """a[a_idx[c]] · b[b_idx[c]] for every cell c (e.g. the low-rank prediction a_uᵀb_j)."""
    check_kernels(method)
    if method == "fast":
        return np.asarray(
            row_dots(
                np.ascontiguousarray(a), as_index(a_idx), np.ascontiguousarray(b), as_index(b_idx)
            )
        )
    return np.asarray(np.einsum("ci,ci->c", a[a_idx], b[b_idx]), dtype=np.float64)


__all__ = [
    "KERNELS",
    "DisguisedMatrix",
    "Kernels",
    "cell_dots",
    "cell_variances",
    "check_kernels",
    "disguised_matrix",
    "feasible_genuine",
    "posterior_from_sums",
    "precision_part",
    "quad_form",
    "side_update",
    "sparse_dot",
]
