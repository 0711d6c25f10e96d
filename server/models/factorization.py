"""A small matrix-factorisation core for the DP factorisation baselines of Wang & Tang.

Ratings are modelled as x_ui ≈ p_u·q_i, where x = r − r̄_i are ratings centred on (DP) item
means and P (n_users × d), Q (m × d) are the factors. Training works on the stored cells of a
CSR matrix with full-batch gradients of the squared loss

    U(P, Q) = ½ Σ_{(u,i) stored} e_ui² + ½λ(‖P‖² + ‖Q‖²),    e_ui = x_ui − p_u·q_i,

(`residuals`, `loss_gradients`), vectorised over the cells with scipy.sparse (no Python loop
over ratings), or by per-rating stochastic gradient descent with λ applied at every update
(Funk/Koren style, i.e. the penalty weighted by each factor's number of ratings; `sgd_epoch`,
compiled).

A user outside the training set — a querying user of another fold — gets her factor by ridge
regression on the released Q and her own ratings (`fold_in`), so only the item side leaves the
curator.

This module is self-contained (numpy, scipy, numba) so that other factorisation models can
share it; it is named for what it is, the squared-loss factorisation core, not for any paper.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from privrec.shared.types import FloatArray, IntArray

Index = npt.NDArray[np.integer[Any]]
"""Any integer index array (CSR indices are int32)."""


def init_factors(n_rows: int, n_factors: int, scale: float, rng: np.random.Generator) -> FloatArray:
    """Factors drawn i.i.d. N(0, scale²), shape (n_rows, n_factors)."""
    out: FloatArray = rng.normal(0.0, scale, size=(n_rows, n_factors))
    return out


def cell_rows(train: sp.csr_matrix) -> IntArray:
    """The row of every stored cell of a CSR matrix, in storage order."""
    return np.repeat(np.arange(train.shape[0], dtype=np.int64), np.diff(train.indptr))


def predictions(rows: Index, cols: Index, p: FloatArray, q: FloatArray) -> FloatArray:
    """p_u·q_i for every cell (rows[c], cols[c])."""
    out: FloatArray = np.einsum("cd,cd->c", p[rows], q[cols])
    return out


def residuals(train: sp.csr_matrix, rows: IntArray, p: FloatArray, q: FloatArray) -> FloatArray:
    """e_ui = x_ui − p_u·q_i over the stored cells of `train` (centred values)."""
    out: FloatArray = train.data - predictions(rows, train.indices, p, q)
    return out


def loss_gradients(
    train: sp.csr_matrix, errors: FloatArray, p: FloatArray, q: FloatArray, reg: float
) -> tuple[FloatArray, FloatArray]:
    """∇_P U and ∇_Q U for the cell errors `errors` (same order as `train.data`):
    −E·Q + λP and −Eᵀ·P + λQ, E the sparse matrix of errors."""
    e = sp.csr_matrix((errors, train.indices, train.indptr), shape=train.shape)
    return reg * p - e @ q, reg * q - e.T @ p


@numba.njit(cache=True)
def _sgd_epoch(
    rows: IntArray,
    cols: IntArray,
    values: FloatArray,
    order: IntArray,
    noise: FloatArray,
    p: FloatArray,
    q: FloatArray,
    learning_rate: float,
    reg: float,
    e_max: float,
) -> float:  # pragma: no cover - compiled
    loss = 0.0
    d = p.shape[1]
    for c in order:
        u, i = rows[c], cols[c]
        e = values[c]
        for f in range(d):
            e -= p[u, f] * q[i, f]
        loss += e * e
        e = min(max(e + noise[c], -e_max), e_max)
        for f in range(d):
            pu, qi = p[u, f], q[i, f]
            p[u, f] += learning_rate * (e * qi - reg * pu)
            q[i, f] += learning_rate * (e * pu - reg * qi)
    return loss


def sgd_epoch(
    train: sp.csr_matrix,
    rows: IntArray,
    p: FloatArray,
    q: FloatArray,
    *,
    learning_rate: float,
    reg: float,
    rng: np.random.Generator,
    noise: FloatArray | None = None,
    e_max: float = np.inf,
) -> float:
    """One epoch of per-rating SGD (Funk/Koren) over the stored cells in a random order, in
    place: e = x_ui − p_u·q_i, then e ← clamp(e + noise_ui, ±e_max) (the noise and clamp of
    Berlioz et al.'s perturbed SGD; none by default), p_u += η(e·q_i − λp_u),
    q_i += η(e·p_u − λq_i). Compiled. Returns Σ e² (before noise) over the epoch.

    Args:
        train: CSR of centred values; `rows` its `cell_rows`.
        p, q: the factors, updated in place.
        learning_rate, reg: η and λ.
        rng: draws the visiting order.
        noise: float array (nnz,) added to each cell's error this epoch, or None.
        e_max: the clamp of the (noisy) error.
    """
    order = rng.permutation(train.nnz).astype(np.int64)
    extra = np.zeros(train.nnz) if noise is None else noise
    return float(
        _sgd_epoch(
            rows,
            train.indices.astype(np.int64),
            train.data,
            order,
            extra,
            p,
            q,
            float(learning_rate),
            float(reg),
            float(e_max),
        )
    )


def fold_in(q: FloatArray, items: IntArray, centred: FloatArray, reg: float) -> FloatArray:
    """A new user's factor: argmin_p Σ_{i∈items} (x_i − p·q_i)² + λ‖p‖² (ridge regression on
    the published item factors)."""
    qi = q[items]
    d = q.shape[1]
    out = np.asarray(np.linalg.solve(qi.T @ qi + reg * np.eye(d), qi.T @ centred), np.float64)
    return out


__all__ = [
    "cell_rows",
    "fold_in",
    "init_factors",
    "loss_gradients",
    "predictions",
    "residuals",
    "sgd_epoch",
]
