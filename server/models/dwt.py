"""Haar-DWT collaborative filtering on disguised z-scores: PPDWT with SA/MA item ordering
(Bilge Ch. 5; Russell & Yoon 2008).

Offline (per neighbour pool, `OfflineRecommender`), on U′:

1. Fill each user's empty cells with her mean disguised z-score over her filled cells
   (Bilge Eq 5.2), giving a dense matrix.
2. Optionally order the items so that the most similar ones are transformed together
   (§5.3.3, Eq 5.4): SA orders once before the first level, MA before every level.
3. Apply `levels` Haar approximation steps, keeping only the approximation coefficients
   (Bilge Eq 5.1/5.3, c = (u_j + u_{j+1})/√2): U″ of shape n × m_t.

Online, the active user's fresh release is filled with her own mean and transformed the same way
(§5.3.2); w′_au = a″·U″_u / m_t (Bilge Eq 2.4 on the transformed data), and
P′_aq = Σ_{u∈N_q} z′_uq w′_au / Σ_{u∈N_q} w′_au (Eq 2.6) from the *untransformed* z′_uq (q is no
longer a column of U″; Russell & Yoon predict from the original ratings), de-normalised by the
client (Eq 2.5). Fitted on true z-scores (σ_max = 0) the same model is the non-private DWT scheme.

Choices where the thesis is silent (docs/decisions/bilge_schemes.md, "Ch. 5"):

* **Odd column counts** (ML-100K: 1,682 → 841 → 421 → 211): the last column is paired with
  itself (symmetric extension, c = √2·u_last), so a constant row stays constant·√2^level like
  every other coefficient.
* **Pairing** is greedy: all item pairs sorted by similarity (descending; ties by index), a pair
  taken when both its items are still free; pairs are laid out in the order taken, an odd item
  last. The next level pairs adjacent coefficients, so under SA the pairs' order shapes level 2.
* **Similarities for ordering**: level 1 on U′ with the noise correction of Eq 4.5–4.7
  (`item_similarity.disguised_item_cosine`, as §5.3.3 asks); MA's later levels use the plain
  cosine of the current coefficient columns (each averages 2^ℓ filled cells, so their noise is
  already reduced; the thesis gives no estimator for them).
* A user with no filled cell is filled with 0. Neighbour rule, positive weights and fallback are
  those of `server.models.knn`. Ch. 5's k = 25 (PPDWT's best on MLP) is the default.

References:
    Bilge, A. PhD thesis, Anadolu University, 2013, Ch. 5 (Eq 5.1–5.4).
    Russell, S., Yoon, V. "Applications of wavelet data reduction in a recommender system",
    Expert Systems with Applications 34(4), 2008.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import numba
import numpy as np
import scipy.sparse as sp

from privrec.server.models.base import UInt32Array
from privrec.server.models.item_similarity import dense_column_cosine, disguised_item_cosine
from privrec.server.models.knn import neighbour_average
from privrec.server.models.offline import OfflineRecommender
from privrec.server.models.params import check_choice, check_k, check_number
from privrec.shared.capabilities import ModelCapabilities, ModelInput, ScoreKind, Serving
from privrec.shared.types import BoolArray, FloatArray, IntArray

SQRT2 = math.sqrt(2.0)


def haar_approximation(x: FloatArray) -> FloatArray:
    """One Haar level on the columns of `x` (Bilge Eq 5.1/5.3): (x_{2j} + x_{2j+1})/√2, the
    detail coefficients discarded; an odd last column is paired with itself.

    Args:
        x: float array (n, m) (or (m,)), m >= 1.

    Returns:
        float array (n, ⌈m/2⌉) (or (⌈m/2⌉,)).
    """
    x = np.asarray(x, dtype=np.float64)
    m = x.shape[-1]
    if m % 2:
        x = np.concatenate([x, x[..., -1:]], axis=-1)
    return np.asarray((x[..., 0::2] + x[..., 1::2]) / SQRT2)


@numba.njit(cache=True)
def _greedy_pairs(
    order: np.ndarray, rows: np.ndarray, cols: np.ndarray, m: int
) -> np.ndarray:  # pragma: no cover - numba
    taken = np.zeros(m, dtype=np.bool_)
    out = np.empty(m, dtype=np.int64)
    n_out = 0
    for p in order:
        i, j = rows[p], cols[p]
        if not taken[i] and not taken[j]:
            taken[i] = True
            taken[j] = True
            out[n_out] = i
            out[n_out + 1] = j
            n_out += 2
            if n_out >= m - 1:
                break
    for i in range(m):
        if not taken[i]:
            out[n_out] = i
            n_out += 1
    return out


def greedy_pair_order(similarity: FloatArray) -> IntArray:
    """A column order that puts the most similar items side by side (Bilge §5.3.3, SA/MA).

    Greedy matching: pairs (i < j) by similarity descending (ties: smaller i, then smaller j), a
    pair taken when both are free, laid out in the order taken; a leftover item goes last.

    Args:
        similarity: float array (m, m), symmetric.

    Returns:
        int64 permutation of range(m).
    """
    m = similarity.shape[0]
    if m < 2:
        return np.arange(m, dtype=np.int64)
    rows, cols = np.triu_indices(m, k=1)
    order = np.argsort(-similarity[rows, cols], kind="stable")
    return np.asarray(_greedy_pairs(order, rows.astype(np.int64), cols.astype(np.int64), m))


def mean_filled(indices: IntArray, values: FloatArray, n_items: int) -> FloatArray:
    """A user's dense vector with her empty cells filled with the mean of her filled cells
    (Bilge Eq 5.2); all zeros when she filled nothing."""
    out = np.full(n_items, float(values.mean()) if values.size else 0.0)
    out[indices] = values
    return out


@dataclasses.dataclass(frozen=True)
class Transform:
    """A fitted DWT reduction: the column order applied before each level (None: natural)."""

    orders: tuple[IntArray | None, ...]

    def apply(self, x: FloatArray) -> FloatArray:
        """Order and reduce `x` (n, m) or (m,) level by level."""
        for order in self.orders:
            if order is not None:
                x = x[..., order]
            x = haar_approximation(x)
        return x


class PPDWT(OfflineRecommender):
    """Haar-DWT kNN on disguised z-scores (Bilge §5.3), with SA/MA item ordering (§5.3.3).

    Args:
        k: neighbours (Ch. 5: PPDWT's best on MLP is 25).
        levels: Haar levels t (Ch. 5: 3, after Russell & Yoon).
        ordering: "none" (PPDWT), "sa" (order once) or "ma" (order before every level).
        sigma_max: the mechanism's public σ_max, for the noise correction of the level-1 item
            similarities (0 for the non-private DWT on true z-scores).
        noise_correction: "expected" (subtract σ_max²/3 per cell) or "thesis" (σ_max², Eq 4.7).
    """

    name: ClassVar[str] = "ppdwt"
    capabilities: ClassVar[ModelCapabilities] = ModelCapabilities(
        ModelInput.RELEASES, Serving.QUERIES, ScoreKind.ZSCORE
    )
    mechanism_params: ClassVar[tuple[str, ...]] = ("sigma_max",)

    def __init__(
        self,
        k: int = 25,
        *,
        levels: int = 3,
        ordering: str = "none",
        sigma_max: float = 2.0,
        noise_correction: str = "expected",
    ) -> None:
        self.k = check_k(k)
        self.levels = check_k(levels, "levels")
        self.ordering = check_choice("ordering", ordering, ("none", "sa", "ma"))
        self.sigma_max = check_number("sigma_max", sigma_max, low=0.0)
        self.noise_correction = check_choice(
            "noise_correction", noise_correction, ("expected", "thesis")
        )

    def _fit(self, train: sp.csr_matrix) -> None:
        if train.shape[1] < 2**self.levels:
            raise ValueError(
                f"`levels`={self.levels} needs at least {2**self.levels} items, got "
                f"{train.shape[1]}"
            )
        self._z = train
        self._dev_csc = train.tocsc()
        self._dev_csc.sort_indices()
        counts = np.diff(train.indptr)
        sums = np.asarray(train.sum(axis=1)).ravel()
        means = np.divide(sums, counts, out=np.zeros(counts.size), where=counts > 0)
        filled = np.repeat(means[:, None], train.shape[1], axis=1)
        rows = np.repeat(np.arange(train.shape[0]), counts)
        filled[rows, train.indices] = train.data
        self._filled = filled

    def _build_offline(self, allowed: BoolArray) -> tuple[Transform, FloatArray]:
        orders: list[IntArray | None] = []
        pool = self._filled[allowed]
        for level in range(self.levels):
            order: IntArray | None = None
            if level == 0 and self.ordering != "none":
                v = self.sigma_max**2 / (3.0 if self.noise_correction == "expected" else 1.0)
                order = greedy_pair_order(disguised_item_cosine(self._z[allowed], v))
            elif level > 0 and self.ordering == "ma":
                order = greedy_pair_order(dense_column_cosine(pool))
            orders.append(order)
            pool = Transform((order,)).apply(pool)
        transform = Transform(tuple(orders))
        return transform, transform.apply(self._filled)

    def _answer(
        self,
        offline: Any,
        query_indices: IntArray,
        query_values: FloatArray,
        items: IntArray,
        allowed: BoolArray,
    ) -> tuple[FloatArray, UInt32Array]:
        transform, reduced = offline
        a = transform.apply(mean_filled(query_indices, query_values, self.n_items_))
        weights = reduced @ a / reduced.shape[1]  # Bilge Eq 2.4 on U″
        return neighbour_average(self._dev_csc, weights, items, self.k, allowed)


__all__ = ["PPDWT", "Transform", "greedy_pair_order", "haar_approximation", "mean_filled"]
