"""Co-rated similarity and its recommendation-aware sensitivity (Zhu 2014, §3.2–3.3).

Neighbourhood CF measures the similarity of two items (or two users) on their *co-rated* set
only: for items t_i, t_j the users U_ij who rated both (Zhu L1000: "similarity is only measured
on the co-rated set"). Everything here works from six sufficient statistics of such a pair
(a, b) over its co-rated set U:

    n = |U|,  Σ a,  Σ b,  Σ a²,  Σ b²,  Σ a·b

from which

    PCC (Zhu Eq 3.2.1)  s = (Σab − ΣaΣb/n) / √((Σa² − (Σa)²/n)(Σb² − (Σb)²/n))
    COS (Zhu Eq 3.2.2)  s = Σab / √(Σa² · Σb²)

and, removing one co-rated record x (a user for item pairs, an item for user pairs), the
similarity s′ without x is the same formula on the statistics minus x's contribution, which is
what makes the *recommendation-aware sensitivity* (Zhu Eq 3.3.2)

    RS(i, j) = max_{x ∈ U_ij} |s(i, j) − s_{U_ij∖{x}}(i, j)|

cheap: one pass over the (x, i, j) triples with x in U_ij (`item_pair_sensitivity`, compiled).
Lemma 1 (Zhu Eq 3.3.3) is a closed-form bound of the same quantity for COS; we compute the
definition itself (the extraction's "most faithful executable form") and the tests check that
it never exceeds the corrected Lemma 1 bound.

Choices where the thesis is silent (docs/decisions/curator_models.md):

* **Means of PCC** are over the co-rated set (r̄_i over U_ij), so a pair's similarity, and its
  sensitivity, depend on U_ij alone, as the sensitivity analysis assumes.
* **Undefined similarity** (PCC with fewer than 2 co-raters or no variation, COS with a zero
  norm, no co-rater at all) is 0.
* **RS = 1 when |U_ij| ≤ 1** (the thesis: "RS(i, j) = 1 when |U_ij| = 1"; no co-rater is the
  same case: one added user can move s from 0 to ±1).
* **Smooth bound** (Lemma 2, Eq 3.3.7) B(RS) = e^{−β}·RS is applied by the caller with its β
  (β = 0 by default: the thesis gives no value, and β > 0 *shrinks* the sensitivity).

References:
    Zhu, T. "Differential Privacy and Its Application", PhD thesis, Deakin University, 2014,
    Ch. 3, Eqs 3.2.1–3.3.7.
"""

from __future__ import annotations

import dataclasses

import numba
import numpy as np
import scipy.sparse as sp

from privrec.server.models.knn import column_positions
from privrec.shared.types import BoolArray, FloatArray, IntArray

SIMILARITIES = ("pcc", "cos")
"""The two similarity measures of Zhu §3.2 (and Wang & Tang's non-private baselines)."""

GLOBAL_SENSITIVITY = {"cos": 1.0, "pcc": 2.0}
"""Global sensitivity of each score, the range of the similarity (the thesis's GS&NM baseline
gives no value; COS of non-negative ratings lies in [0, 1], PCC in [−1, 1])."""


@dataclasses.dataclass(frozen=True)
class CoratedStats:
    """Sufficient statistics of pairs (a, b) over their co-rated sets, all of one shape.

    Attributes:
        n: |U|, the number of co-rated records.
        sum_a, sum_b: Σ a and Σ b over U.
        sq_a, sq_b: Σ a² and Σ b² over U.
        cross: Σ a·b over U.
    """

    n: FloatArray
    sum_a: FloatArray
    sum_b: FloatArray
    sq_a: FloatArray
    sq_b: FloatArray
    cross: FloatArray


# ---------------------------------------------------------------------- the formula, compiled
@numba.njit(cache=True)
def _similarity(
    n: float, sa: float, sb: float, saa: float, sbb: float, sab: float, pcc: bool
) -> float:  # pragma: no cover - compiled
    """Zhu Eq 3.2.1 (pcc) or Eq 3.2.2 (cos) from the co-rated statistics; 0 where undefined."""
    if pcc:
        if n < 2.0:
            return 0.0
        va = saa - sa * sa / n
        vb = sbb - sb * sb / n
        # exact zeros come out as rounding noise of either sign: treat tiny variances as none
        if va <= 1e-9 * max(saa, 1.0) or vb <= 1e-9 * max(sbb, 1.0):
            return 0.0
        s = (sab - sa * sb / n) / np.sqrt(va * vb)
    else:
        if n < 1.0 or saa <= 0.0 or sbb <= 0.0:
            return 0.0
        s = sab / np.sqrt(saa * sbb)
    return float(min(1.0, max(-1.0, s)))


@numba.njit(cache=True)
def _similarity_array(
    n: FloatArray,
    sa: FloatArray,
    sb: FloatArray,
    saa: FloatArray,
    sbb: FloatArray,
    sab: FloatArray,
    pcc: bool,
) -> FloatArray:  # pragma: no cover - compiled
    out = np.empty(n.size)
    for e in range(n.size):
        out[e] = _similarity(n[e], sa[e], sb[e], saa[e], sbb[e], sab[e], pcc)
    return out


@numba.njit(cache=True)
def _pair_sensitivity(
    indptr: IntArray,
    indices: IntArray,
    data: FloatArray,
    n: FloatArray,
    s1: FloatArray,
    s2: FloatArray,
    cross: FloatArray,
    sim: FloatArray,
    pcc: bool,
) -> FloatArray:  # pragma: no cover - compiled
    """max over co-raters x of |s(i,j) − s without x| for every pair i < j (upper triangle),
    one pass over every user's pairs of rated items (Σ_x g_x² steps)."""
    m = n.shape[0]
    rs = np.zeros((m, m))
    for x in range(indptr.size - 1):
        lo, hi = indptr[x], indptr[x + 1]
        for a in range(lo, hi):
            i = indices[a]
            ri = data[a]
            for b in range(a + 1, hi):
                j = indices[b]  # CSR rows are sorted: i < j
                rj = data[b]
                nn = n[i, j]
                if nn <= 1.0:
                    continue  # RS = 1 there (set by the caller)
                s_minus = _similarity(
                    nn - 1.0,
                    s1[i, j] - ri,
                    s1[j, i] - rj,
                    s2[i, j] - ri * ri,
                    s2[j, i] - rj * rj,
                    cross[i, j] - ri * rj,
                    pcc,
                )
                d = abs(sim[i, j] - s_minus)
                rs[i, j] = max(rs[i, j], d)
    return rs


# ---------------------------------------------------------------------- public API
def check_similarity(similarity: str) -> str:
    """`similarity` if it names a measure of `SIMILARITIES`.

    Raises:
        ValueError: naming the parameter.
    """
    if similarity not in SIMILARITIES:
        raise ValueError(f"`similarity` must be one of {SIMILARITIES}, got {similarity!r}")
    return similarity


def corated_similarity(stats: CoratedStats, similarity: str) -> FloatArray:
    """PCC (Zhu Eq 3.2.1) or COS (Eq 3.2.2) of every pair of `stats`, same shape; 0 where the
    similarity is undefined (module docstring)."""
    pcc = check_similarity(similarity) == "pcc"
    shape = np.shape(stats.n)
    n, sa, sb, saa, sbb, sab = (
        np.ascontiguousarray(np.asarray(a, dtype=np.float64).ravel())
        for a in (stats.n, stats.sum_a, stats.sum_b, stats.sq_a, stats.sq_b, stats.cross)
    )
    out: FloatArray = _similarity_array(n, sa, sb, saa, sbb, sab, pcc).reshape(shape)
    return out


def item_pair_stats(train: sp.csr_matrix) -> CoratedStats:
    """Co-rated statistics of every item pair (i, j) of a users × items matrix, as dense m × m
    arrays: entry [i, j] has a = item i's ratings and b = item j's over U_ij.

    Args:
        train: CSR matrix (n_users, n_items); stored entries are ratings.
    """
    r = sp.csr_matrix(train, dtype=np.float64)
    b = r.copy()
    b.data = np.ones_like(b.data)
    r2 = r.copy()
    r2.data = r.data**2
    n = (b.T @ b).toarray()
    s1 = (r.T @ b).toarray()  # s1[i, j] = Σ_{x ∈ U_ij} r_xi
    s2 = (r2.T @ b).toarray()  # s2[i, j] = Σ_{x ∈ U_ij} r_xi²
    cross = (r.T @ r).toarray()
    return CoratedStats(n, s1, s1.T, s2, s2.T, cross)


def item_pair_similarity(stats: CoratedStats, similarity: str) -> FloatArray:
    """The m × m item similarity matrix from `item_pair_stats` (diagonal 0: an item is never
    its own neighbour)."""
    s = corated_similarity(stats, similarity)
    np.fill_diagonal(s, 0.0)
    return s


def item_pair_sensitivity(
    train: sp.csr_matrix, stats: CoratedStats, sim: FloatArray, similarity: str
) -> FloatArray:
    """RS(i, j) of every item pair (Zhu Eq 3.3.2): the largest change of s(i, j) when one
    user's ratings are deleted, by brute force over the co-raters (compiled); 1 where
    |U_ij| ≤ 1; symmetric, diagonal 1.

    Args:
        train: the CSR matrix `stats` and `sim` were computed from.
        stats: `item_pair_stats(train)`.
        sim: `item_pair_similarity(stats, similarity)`.
        similarity: "pcc" or "cos".
    """
    pcc = check_similarity(similarity) == "pcc"
    r = sp.csr_matrix(train, dtype=np.float64)
    r.sort_indices()
    rs = _pair_sensitivity(
        r.indptr.astype(np.int64),
        r.indices.astype(np.int64),
        r.data,
        stats.n,
        np.ascontiguousarray(stats.sum_a),
        np.ascontiguousarray(stats.sq_a),
        stats.cross,
        sim,
        pcc,
    )
    rs = np.maximum(rs, rs.T)
    rs[stats.n <= 1.0] = 1.0
    np.fill_diagonal(rs, 1.0)
    return rs


@dataclasses.dataclass(frozen=True)
class QuerySimilarity:
    """Similarity of one querying user to every training row (user-based CF).

    Attributes:
        sim: float array (n_rows,), s(a, v) over the items both rated (Zhu Eq 3.2.1/3.2.2 with
            users and items swapped).
        sensitivity: float array (n_rows,), RS(a, v): the largest change of s(a, v) when one
            co-rated item is removed (Zhu Eq 3.3.2, user-based reading); 1 where ≤ 1 co-rated
            item.
        n_common: float array (n_rows,), the number of co-rated items.
    """

    sim: FloatArray
    sensitivity: FloatArray
    n_common: FloatArray


def query_user_similarity(
    train_csc: sp.csc_matrix,
    query_indices: IntArray,
    query_values: FloatArray,
    similarity: str,
    *,
    allowed: BoolArray | None = None,
) -> QuerySimilarity:
    """s(a, v) and RS(a, v) of the querying user a against every training row v, vectorised
    over the training entries in her rated columns.

    Args:
        train_csc: CSC matrix (n_rows, n_items) of training ratings, sorted indices.
        query_indices, query_values: her rated items and ratings (distinct items).
        similarity: "pcc" or "cos".
        allowed: bool array (n_rows,), rows to compute (others get s = 0, RS = 1, n = 0).
    """
    pcc = check_similarity(similarity) == "pcc"
    n_rows = train_csc.shape[0]
    pos, slot = column_positions(
        train_csc.indptr.astype(np.int64), np.asarray(query_indices, dtype=np.int64)
    )
    rows = train_csc.indices[pos].astype(np.int64)
    rv = train_csc.data[pos]
    ra = np.asarray(query_values, dtype=np.float64)[slot]
    if allowed is not None:
        keep = allowed[rows]
        rows, rv, ra = rows[keep], rv[keep], ra[keep]

    def total(weights: FloatArray | None = None) -> FloatArray:
        return np.asarray(np.bincount(rows, weights=weights, minlength=n_rows), dtype=np.float64)

    n, sa, sb = total(), total(ra), total(rv)
    saa, sbb, sab = total(ra * ra), total(rv * rv), total(ra * rv)
    sim = _similarity_array(n, sa, sb, saa, sbb, sab, pcc)
    # leave one co-rated item out, per entry
    s_minus = _similarity_array(
        n[rows] - 1.0,
        sa[rows] - ra,
        sb[rows] - rv,
        saa[rows] - ra * ra,
        sbb[rows] - rv * rv,
        sab[rows] - ra * rv,
        pcc,
    )
    rs = np.zeros(n_rows)
    np.maximum.at(rs, rows, np.abs(sim[rows] - s_minus))
    rs[n <= 1.0] = 1.0
    return QuerySimilarity(sim, rs, n)


__all__ = [
    "GLOBAL_SENSITIVITY",
    "SIMILARITIES",
    "CoratedStats",
    "QuerySimilarity",
    "check_similarity",
    "corated_similarity",
    "item_pair_sensitivity",
    "item_pair_similarity",
    "item_pair_stats",
    "query_user_similarity",
]
