"""Target-item-based user similarity with τ item elimination (Bilge Ch. 4; Choi & Suh 2013).

Two models, one per kind of data, sharing the offline item similarities
(`server.models.item_similarity`), the online τ elimination (`offline.restricted_dot`: only the
columns of the remaining items are touched, so eliminating items saves time) and the
neighbourhood step (`knn.neighbour_average`, Bilge Eq 2.2 / 2.6):

* `TargetItemCF` — CF+ (τ = None) and CF++ (τ set), the non-private schemes on true ratings:
  Choi & Suh's PCC with IS² weights (Bilge Eq 4.1), IS = item PCC (Eq 2.1 on items) moved to
  [0, 1] (§4.5.1) or item cosine (Eq 4.2), prediction Eq 2.2.
* `TargetItemPPCF` — PPCF+ and PPCF++, on the disguised z-scores U′: w^q′_au = Σ_i IS_iq z′_ai
  z′_ui / m (Eq 4.3/4.4, IS not squared), IS estimated on U′ with the noise correction of Eq
  4.5–4.7, prediction P′_aq (Eq 4.8/4.9) de-normalised by the client (Eq 2.5).

Procedure 3 (offline, per neighbour pool: `OfflineRecommender`) computes IS; Procedure 4 (online)
keeps, for target q, the items with IS_iq > τ ("remaining items"), shrinks U, a and IS to them,
computes the user similarities there and predicts from the k most similar users who filled q.

Choices where the thesis is silent (docs/decisions/bilge_schemes.md, "Ch. 4"):

* **IS on disguised data** is the cosine of z′ columns ("covariance-based PCC" on z-scores,
  §4.3.2), in [−1, 1]. `scale="clip"` (default) sets negative similarities to 0; `"shift"` uses
  (s + 1)/2 as for the non-private item PCC. We default to clipping because the thesis's
  Table 4.2 cannot come from the shifted scale: PPCF++ at τ = 0.05 is already 3.2× faster than
  PPCF+, but on (s + 1)/2 τ = 0.05 removes only items with s < −0.9, i.e. almost none.
* **The noise subtracted in Eq 4.7** is |S|·σ_max²/3 by default (`noise_correction="expected"`,
  the expected noise power of a cell under σ ~ U(0, σ_max]); `"thesis"` subtracts |S|·σ_max² as
  written, which on σ_max = 2 leaves no item a magnitude (see `item_similarity`).
* **τ = None** is CF+/PPCF+: every item the active user filled takes part (the thesis's cost);
  τ = 0.0 keeps the items with IS > 0 and so gives the same answers as PPCF+ under `"clip"`.
* Neighbours, positive weights, ties and the no-neighbour fallback are those of
  `server.models.knn` (docs/decisions/knn.md); "/m" of Eq 4.3 is kept (it cancels).
* Ch. 4's k = 10 is the default.

References:
    Bilge, A. PhD thesis, Anadolu University, 2013, Ch. 4 (Eq 4.1–4.9, Procedures 3–4).
    Choi, K., Suh, Y. "A new similarity function for selecting neighbors for each target item in
    collaborative filtering", Knowledge-Based Systems 37, 2013.
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from privrec.server.models.base import UInt32Array
from privrec.server.models.item_similarity import (
    disguised_item_cosine,
    item_cosine,
    item_pearson,
    shift_to_unit,
)
from privrec.server.models.knn import neighbour_average
from privrec.server.models.offline import OfflineRecommender, column_entries, restricted_dot
from privrec.server.models.params import check_choice, check_k, check_number
from privrec.shared.capabilities import ModelCapabilities, ModelInput, ScoreKind, Serving
from privrec.shared.types import BoolArray, FloatArray, IntArray


class _TargetItemKNN(OfflineRecommender):
    """Shared online step: per target q, keep the active user's items with IS_iq > τ and
    compute the user weights on them (Procedure 4), then the top-k average."""

    def __init__(self, k: int = 10, *, tau: float | None = None) -> None:
        self.k = check_k(k)
        self.tau = (
            None if tau is None else check_number("tau", tau, low=0.0, high=1.0, high_open=True)
        )

    def remaining(self, similarity: FloatArray, query_indices: IntArray, q: int) -> BoolArray:
        """Which of the active user's items remain for target q (Procedure 4, line 1)."""
        column = similarity[query_indices, q]
        if self.tau is None:
            return np.ones(query_indices.size, dtype=bool)
        return np.asarray(column > self.tau)

    def _answer(
        self,
        offline: Any,
        query_indices: IntArray,
        query_values: FloatArray,
        items: IntArray,
        allowed: BoolArray,
    ) -> tuple[FloatArray, UInt32Array]:
        similarity: FloatArray = offline
        prepared = self._prepare_query(query_values)
        weights = np.empty((self.n_users_, items.size))
        for t, q in enumerate(items.tolist()):
            keep = self.remaining(similarity, query_indices, q)
            weights[:, t] = self._weights(
                query_indices[keep], prepared[keep], similarity[query_indices[keep], q]
            )
        scores, counts = neighbour_average(self._dev_csc, weights, items, self.k, allowed)
        return self._finish(scores, query_values), counts

    # subclass hooks
    _dev_csc: sp.csc_matrix

    def _prepare_query(self, query_values: FloatArray) -> FloatArray:
        return query_values

    @abc.abstractmethod
    def _weights(self, cols: IntArray, values: FloatArray, is_q: FloatArray) -> FloatArray:
        """The neighbour weights of the query's kept items `cols` for the target item."""

    def _finish(self, avg: FloatArray, query_values: FloatArray) -> FloatArray:
        return avg


class TargetItemPPCF(_TargetItemKNN):
    """PPCF+ (τ = None) and PPCF++ (τ set) on disguised z-scores (Bilge §4.3.2–4.3.3).

    Offline (per neighbour pool), Procedure 3 on U′: IS = `disguised_item_cosine(U′, v)` with
    v = σ_max²/3 (or σ_max², `noise_correction="thesis"`), then clipped or shifted to [0, 1].
    Online, for the active user's fresh release Z′_a and each target q:

        R_q      = {i filled by a : IS_iq > τ}                         (Procedure 4, line 1)
        w^q′_au  = Σ_{i∈R_q} IS_iq z′_ai z′_ui / m                     (Bilge Eq 4.3/4.4)
        P′_aq    = Σ_{u∈N_q} z′_uq w^q′_au / Σ_{u∈N_q} w^q′_au          (Bilge Eq 4.8/4.9)

    N_q = the k users of largest positive weight among those with a filled cell at q. The
    client de-normalises P′_aq (Eq 2.5).

    Args:
        k: neighbours (Ch. 4: 10).
        tau: the elimination threshold τ, or None for PPCF+ (Ch. 4 sweeps 0.05–0.5).
        sigma_max: the mechanism's public σ_max (the server fills it from RPT's parameters).
        noise_correction: "expected" (v = σ_max²/3) or "thesis" (v = σ_max², Eq 4.7 as written).
        scale: "clip" (negative IS → 0) or "shift" ((s + 1)/2).
    """

    name: ClassVar[str] = "ppcf_plus"
    capabilities: ClassVar[ModelCapabilities] = ModelCapabilities(
        ModelInput.RELEASES, Serving.QUERIES, ScoreKind.ZSCORE
    )
    mechanism_params: ClassVar[tuple[str, ...]] = ("sigma_max",)

    def __init__(
        self,
        k: int = 10,
        *,
        tau: float | None = None,
        sigma_max: float = 2.0,
        noise_correction: str = "expected",
        scale: str = "clip",
    ) -> None:
        super().__init__(k, tau=tau)
        self.sigma_max = check_number("sigma_max", sigma_max, low=0.0)
        self.noise_correction = check_choice(
            "noise_correction", noise_correction, ("expected", "thesis")
        )
        self.scale = check_choice("scale", scale, ("clip", "shift"))

    @property
    def noise_variance(self) -> float:
        """v, the per-cell noise power subtracted in Eq 4.7."""
        v = self.sigma_max**2
        return v / 3.0 if self.noise_correction == "expected" else v

    def _fit(self, train: sp.csr_matrix) -> None:
        self._z = train
        self._dev_csc = train.tocsc()
        self._dev_csc.sort_indices()

    def _build_offline(self, allowed: BoolArray) -> FloatArray:
        cosine = disguised_item_cosine(self._z[allowed], self.noise_variance)
        return np.maximum(cosine, 0.0) if self.scale == "clip" else shift_to_unit(cosine)

    def _weights(self, cols: IntArray, values: FloatArray, is_q: FloatArray) -> FloatArray:
        return restricted_dot(self._dev_csc, cols, is_q * values) / self.n_items_


class TargetItemCF(_TargetItemKNN):
    """CF+ (τ = None) and CF++ (τ set) on true ratings (Bilge §4.2, §4.3.1).

    Offline (per neighbour pool), Procedure 3: IS = (item PCC + 1)/2 (`item_similarity="pcc"`,
    Choi & Suh's choice for MLM, §4.5.1's transform) or the item cosine, clipped at 0 (`"cosine"`,
    NF). Online, for the active user's ratings and each target q, over the remaining co-rated
    items R_q = {i rated by a : IS_iq > τ}:

        PCC^q_au = Σ_{i∈R_q∩co} IS_iq² c_ai c_ui
                   / (√Σ_{i∈R_q∩co} (IS_iq c_ai)² · √Σ_{i∈R_q∩co} (IS_iq c_ui)²)   (Bilge Eq 4.1)
        p_aq     = v̄_a + Σ_{u∈N_q} c_uq PCC^q_au / Σ_{u∈N_q} PCC^q_au                (Bilge Eq 2.2)

    with c = rating − the user's mean over all her ratings (as `PearsonKNN`). Only the referee
    (and reproduction entries) run it, on true ratings.

    Args:
        k: neighbours (Ch. 4: 10).
        tau: the elimination threshold τ, or None for CF+.
        item_similarity: "pcc" or "cosine".
        clip: (lo, hi) rating scale to clip predictions to, or None.
    """

    name: ClassVar[str] = "cf_plus"
    capabilities: ClassVar[ModelCapabilities] = ModelCapabilities(
        ModelInput.RELEASES, Serving.QUERIES, ScoreKind.RATING
    )

    def __init__(
        self,
        k: int = 10,
        *,
        tau: float | None = None,
        item_similarity: str = "pcc",
        clip: tuple[float, float] | list[float] | None = None,
    ) -> None:
        super().__init__(k, tau=tau)
        self.item_similarity = check_choice("item_similarity", item_similarity, ("pcc", "cosine"))
        if clip is not None and not (len(clip) == 2 and float(clip[0]) <= float(clip[1])):
            raise ValueError(f"`clip` must be (lo, hi) with lo <= hi, got {clip!r}")
        self.clip = None if clip is None else (float(clip[0]), float(clip[1]))

    def _fit(self, train: sp.csr_matrix) -> None:
        counts = np.diff(train.indptr)
        sums = np.asarray(train.sum(axis=1)).ravel()
        self.user_means_ = np.divide(sums, counts, out=np.zeros(counts.size), where=counts > 0)
        centred = train.copy()
        centred.data = train.data - np.repeat(self.user_means_, counts)
        self._ratings = train
        self._dev_csc = centred.tocsc()
        self._dev_csc.sort_indices()

    def _build_offline(self, allowed: BoolArray) -> FloatArray:
        rows = self._ratings[allowed]
        if self.item_similarity == "pcc":
            return shift_to_unit(item_pearson(rows))
        return np.maximum(item_cosine(rows), 0.0)

    def _prepare_query(self, query_values: FloatArray) -> FloatArray:
        return np.asarray(query_values - query_values.mean())

    def _weights(self, cols: IntArray, values: FloatArray, is_q: FloatArray) -> FloatArray:
        w2 = is_q * is_q
        pos, rows, slot = column_entries(self._dev_csc, cols)
        c_u = self._dev_csc.data[pos]
        n = self.n_users_
        num = np.bincount(rows, weights=w2[slot] * values[slot] * c_u, minlength=n)
        ss_a = np.bincount(rows, weights=w2[slot] * values[slot] ** 2, minlength=n)
        ss_u = np.bincount(rows, weights=w2[slot] * c_u * c_u, minlength=n)
        den = np.sqrt(ss_a * ss_u)
        out: FloatArray = np.divide(num, den, out=np.zeros(n), where=den > 0)
        return out

    def _finish(self, avg: FloatArray, query_values: FloatArray) -> FloatArray:
        p = float(query_values.mean()) + avg
        return np.clip(p, *self.clip) if self.clip is not None else p


__all__ = ["TargetItemCF", "TargetItemPPCF"]
