"""Item–item similarities, on true ratings or on disguised z-scores: the shared offline piece of
Bilge's target-item similarity (Ch. 4, Procedure 3) and DWT item ordering (Ch. 5, Eq 5.4).

* `item_pearson` — Bilge Eq 2.1 applied to item columns (Choi & Suh's item PCC, used for MLM),
  over the users who rated both items; item means over all of an item's raters (the convention
  of the user-based PCC in `server.models.knn`).
* `item_cosine` — Bilge Eq 4.2 (cosine over the co-rating users, Choi & Suh's choice for NF).
* `disguised_item_cosine` — the private estimate on U′ (Bilge §4.3.2, Eq 4.5–4.7; reused by
  §5.3.3): numerator Σ_u z′_ui z′_uq over all users (empty cells are 0, so only co-filled cells
  count); each magnitude from Σ_{u∈S_i} z′_ui² minus the noise the server expects there,
  |S_i|·v (Eq 4.7), then the square root.

Choices where the thesis is silent or wrong (docs/decisions/bilge_schemes.md, "Ch. 4"):

* **The noise subtracted in Eq 4.7.** The thesis subtracts |S|·σ_max². Every user draws her σ
  uniformly from (0, σ_max] (Procedure 1), so a disguised cell's expected noise power is
  E[σ²] = σ_max²/3, and a fake cell holds noise only. With σ_max = 2 the thesis's |S|·4 exceeds
  the whole Σ(z + r)² ≈ |S|·(0.8 + 4/3) of an item, so every magnitude would be negative. We pass
  the per-cell noise variance `v` explicitly; the models default to v = σ_max²/3 and offer the
  thesis's v = σ_max².
* **An item whose corrected Σ is ≤ 0** has no magnitude estimate: its similarity to every other
  item is 0 (it carries no weight and never passes a τ > 0).
* Similarities are clipped to [−1, 1] (noise can push an estimate past 1); the diagonal is 1 for
  every item with a magnitude.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from privrec.shared.types import FloatArray


def _dense(x: Any) -> FloatArray:
    """A product of sparse matrices (sparse or already dense) as a dense float64 array."""
    to_dense = getattr(x, "toarray", None)
    return np.asarray(to_dense() if callable(to_dense) else x, dtype=np.float64)


def _finish(num: FloatArray, den: FloatArray, valid: np.ndarray) -> FloatArray:
    out = np.zeros_like(num)
    np.divide(num, den, out=out, where=den > 0)
    np.clip(out, -1.0, 1.0, out=out)
    out[~valid, :] = 0.0
    out[:, ~valid] = 0.0
    idx = np.flatnonzero(valid)
    out[idx, idx] = 1.0
    return out


def _indicator(x: sp.csr_matrix) -> sp.csr_matrix:
    r = x.copy()
    r.data = np.ones_like(r.data)
    return r


def item_pearson(ratings: sp.csr_matrix) -> FloatArray:
    """Item PCC (Bilge Eq 2.1 on item columns) over the users who rated both items.

    Args:
        ratings: CSR (n_users, n_items) of true ratings; stored entries are rated cells.

    Returns:
        float64 array (n_items, n_items) in [−1, 1]; 0 for pairs with no co-rater variation.
    """
    csc = ratings.tocsc()
    counts = np.diff(csc.indptr)
    sums = np.asarray(csc.sum(axis=0)).ravel()
    means = np.divide(sums, counts, out=np.zeros(counts.size), where=counts > 0)
    centred_csc = csc.copy()
    centred_csc.data = csc.data - np.repeat(means, counts)
    centred = centred_csc.tocsr()
    rated = _indicator(centred)
    sq = centred.multiply(centred).tocsr()
    num = _dense(centred.T @ centred)
    ss = _dense(sq.T @ rated)  # ss[i, j] = Σ_{u rated i and j} c_ui²
    den = np.sqrt(ss * ss.T)
    return _finish(num, den, counts > 0)


def item_cosine(ratings: sp.csr_matrix) -> FloatArray:
    """Item cosine (Bilge Eq 4.2) over the users who rated both items.

    Args:
        ratings: CSR (n_users, n_items); stored entries are rated cells.

    Returns:
        float64 array (n_items, n_items) in [−1, 1] ([0, 1] for non-negative ratings).
    """
    counts = np.diff(ratings.tocsc().indptr)
    rated = _indicator(ratings)
    sq = ratings.multiply(ratings).tocsr()
    num = _dense(ratings.T @ ratings)
    ss = _dense(sq.T @ rated)
    den = np.sqrt(ss * ss.T)
    return _finish(num, den, counts > 0)


def disguised_item_cosine(disguised: sp.csr_matrix, noise_variance: float) -> FloatArray:
    """Item similarity estimated on disguised z-scores (Bilge Eq 4.4–4.7, §4.3.2).

        sim(i, q) = Σ_u z′_ui z′_uq / (‖i‖ ‖q‖),   ‖i‖ = √(Σ_{u∈S_i} z′_ui² − |S_i|·v)

    with S_i the rows with a filled cell at item i (genuine or fake: the server cannot tell) and
    v the per-cell noise variance the server subtracts (Eq 4.7; see the module docstring).

    Args:
        disguised: CSR (n_users, n_items) of disguised z-scores; stored entries are filled cells.
        noise_variance: v >= 0.

    Returns:
        float64 array (n_items, n_items) in [−1, 1].
    """
    if not noise_variance >= 0.0:
        raise ValueError(f"`noise_variance` must be >= 0, got {noise_variance!r}")
    csc = disguised.tocsc()
    counts = np.diff(csc.indptr)
    power = np.asarray(csc.multiply(csc).sum(axis=0)).ravel()
    corrected = power - counts * noise_variance  # Bilge Eq 4.7
    valid = (counts > 0) & (corrected > 0)
    mag = np.sqrt(np.where(valid, corrected, 0.0))
    num = _dense(disguised.T @ disguised)
    return _finish(num, np.outer(mag, mag), valid)


def dense_column_cosine(x: FloatArray) -> FloatArray:
    """Plain cosine between the columns of a dense matrix (Bilge Eq 5.4); a zero column has
    similarity 0 to every other column."""
    norms = np.sqrt(np.einsum("ij,ij->j", x, x))
    return _finish(x.T @ x, np.outer(norms, norms), norms > 0)


def shift_to_unit(similarity: FloatArray) -> FloatArray:
    """(s + 1)/2: a similarity in [−1, 1] moved to [0, 1] (Bilge §4.5.1, the item PCC "is
    transformed to [0, 1.0]" to share cosine's range)."""
    return (similarity + 1.0) / 2.0


__all__ = [
    "dense_column_cosine",
    "disguised_item_cosine",
    "item_cosine",
    "item_pearson",
    "shift_to_unit",
]
