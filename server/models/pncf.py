"""Zhu's Private Neighbor Collaborative Filtering (PNCF) and its non-private baseline.

Both models are neighbourhood CF on co-rated similarities (`server.models.corated`), item- or
user-based, answering Predict and Recommend on the server:

* `CoRatedKNN` ("corated_knn", non-private): the k candidates of largest similarity are the
  neighbours, their similarities the weights. Zhu's "Non-private" baseline, and with
  `prediction = "item-mean"` and k = 900 Wang & Tang's non-private PCC / COS baselines.
* `PNCF` ("pncf"): per prediction, Private Neighbor Selection (k exponential-mechanism draws
  without replacement, budget ε/2) and Perturbation (Laplace noise on the selected
  similarities, budget ε/2), then the same prediction with the noisy similarities as weights
  (Zhu Algorithm 1). `variant` gives the thesis's four-way comparison: "pncf" (recommendation-
  aware sensitivity RS + truncated similarity), "rs_nm" (RS, naive exponential mechanism),
  "gs_nm" (global sensitivity, naive mechanism: the thesis's "DP").

Prediction (Zhu §3.2):

* item-based, Eq 3.2.3:  r̂_ai = Σ_{j∈N} s̃(i,j)·r_aj / Σ_{j∈N} |s̃(i,j)|, N the selected
  neighbours among the items the querying user rated;
* user-based, L878:      r̂_aα = r̄_a + Σ_{v∈N} s̃(a,v)(r_vα − r̄_v) / Σ_{v∈N} |s̃(a,v)|, N among
  the training users who rated α;
* `prediction = "item-mean"` (item-based; Wang & Tang Eq (2)): r̄_i + Σ s̃ (r_aj − r̄_j) / Σ|s̃|.

Choices where the thesis is silent (docs/decisions/curator_models.md):

* **Candidates** (`candidates`): "rated" (default) draws the neighbours of t_i among the items
  the querying user rated (her own data: no privacy cost), which is where Eq 3.2.3 sums; "all"
  draws among all other m − 1 items as §3.3.2's prose says, then predicts from those she rated.
  With k ≪ m, "all" leaves most predictions without a rated neighbour (measured in
  docs/decisions/curator_models.md), so "rated" is the default.
* **No usable neighbour** (or Σ|s̃| = 0): the querying user's mean (item-based, user-based), or
  r̄_i for "item-mean"; the returned neighbour count is 0.
* **Perturbation scale** (`perturbation`): "algorithm-1" (default) adds Lap(2k·RS(i,j)/ε) to
  each of the k selected similarities (Algorithm 1 step 3: ε/(2k) each, ε/2 in all by
  sequential composition); "eq-3.4.1" adds Lap(2·RS(i,j)/ε) as §3.4.1 prints, which spends ε/2
  per similarity, so the model then states (k + 1)·ε/2 per prediction, not ε.
* **Sensitivity in the selection** (`selection_sensitivity`): "pair" divides each candidate's
  score by its own RS(i,j) as Algorithm 2 prints; "max" by the largest RS of t_i's candidates
  (the utility theorems' RS; conservative). The C₀ block always uses the largest.
* **Truncation** w = min(s_k, (4k·RS/ε)·ln(k(|v| − k)/ρ)) per target (Thm 3.4.1; RS the largest
  over its candidates, |v| their number, ρ = `rho`, 0.1 by default, not given by the thesis).
  C₀ keeps its total weight |C₀|·exp(ε(s_k − w)/(4k·RS)) and a draw of C₀ picks a member
  uniformly: both are exactly "every C₀ member has score s_k − w" (Algorithm 2), which is how it
  is sampled.
* **A sensitivity of 0** (a pair whose similarity no single deletion moves) is floored at
  `min_sensitivity` (1e-3): the exponent would otherwise be infinite.
* **GS** (GS&NM): the range of the similarity, 1 for COS, 2 for PCC (`GLOBAL_SENSITIVITY`).
* **The NM baselines also perturb** the selected similarities (same budget split as PNCF).

Privacy (what `PNCF.output_privacy` states): each prediction of an item is ε-DP (as the thesis
claims) for the users who rated it — nobody else's data enters it — so the report charges one
prediction to exactly those training users (`answer_scope = "raters"`). Caveats, flagged: RS
is a *local* sensitivity and s_k, w are computed from the data at no cost (Nissim, Raskhodnikova
& Smith 2007 show local-sensitivity noise is not ε-DP by itself), so the RS variants' ε is the
thesis's claim, not a proof; user-based predictions use the neighbours' own ratings r_vα − r̄_v
unperturbed. Item-based GS&NM is a genuine ε-DP mechanism per prediction.

References:
    Zhu, T. "Differential Privacy and Its Application", PhD thesis, Deakin University, 2014,
    Ch. 3 (Algorithms 1–2, Eqs 3.2.1–3.4.4).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from privrec.server.models.base import OutputPrivacy, UInt32Array
from privrec.server.models.corated import (
    GLOBAL_SENSITIVITY,
    check_similarity,
    item_pair_sensitivity,
    item_pair_similarity,
    item_pair_stats,
    query_user_similarity,
)
from privrec.server.models.dp_neighbourhood import (
    answer_rng,
    kth_largest,
    pure_dp_event,
    query_digest,
    select_without_replacement,
    top_k_in_segments,
    truncated_scores,
    truncation_width,
)
from privrec.server.models.foldwise import FoldKey, FoldwiseRecommender, fold_seed_key
from privrec.server.models.knn import column_positions
from privrec.shared.accounting import dp
from privrec.shared.capabilities import ModelCapabilities, ModelInput, ScoreKind, Serving
from privrec.shared.mechanisms.base import PrivacyStatement
from privrec.shared.types import BoolArray, FloatArray, IntArray

MODES = ("item", "user")
CANDIDATES = ("rated", "all")
PREDICTIONS = ("zhu", "item-mean")
VARIANTS = ("pncf", "rs_nm", "gs_nm")
PERTURBATIONS = ("algorithm-1", "eq-3.4.1")
SELECTION_SENSITIVITIES = ("pair", "max")


def _choice(name: str, value: object, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(f"`{name}` must be one of {allowed}, got {value!r}")
    return str(value)


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"`{name}` must be an int >= 1, got {value!r}")
    return int(value)


def _positive(name: str, value: object, *, allow_zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        raise ValueError(f"`{name}` must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        raise ValueError(f"`{name}` must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    return v


@dataclasses.dataclass(frozen=True)
class _ItemState:
    sim: FloatArray  # (m, m) s(i, j)
    sensitivity: FloatArray | None  # (m, m) RS(i, j), for the DP variants
    item_means: FloatArray | None  # (m,), for prediction = "item-mean"


@dataclasses.dataclass(frozen=True)
class _UserState:
    csc: sp.csc_matrix  # the fold's training rows, by column
    row_means: FloatArray  # r̄_v over all her ratings


@dataclasses.dataclass(frozen=True)
class Candidates:
    """The neighbour candidates of a batch of targets, flattened (targets in order).

    Attributes:
        seg: int array (n,), the target (0..T−1) of each candidate; non-decreasing.
        ident: int array (n,), the candidate item (item-based) or training row (user-based).
        score: float array (n,), s(i, j) or s(a, v).
        sensitivity: float array (n,) RS, or None for the non-private model.
        dev: float array (n,), the value a neighbour contributes (r_aj, r_aj − r̄_j or
            r_vα − r̄_v).
        usable: bool array (n,), whether it may contribute to the prediction (candidates =
            "all": the querying user rated it).
        offset: float array (T,), what the weighted average is added to.
        fallback: float array (T,), the prediction without a usable neighbour.
    """

    seg: IntArray
    ident: IntArray
    score: FloatArray
    sensitivity: FloatArray | None
    dev: FloatArray
    usable: BoolArray
    offset: FloatArray
    fallback: FloatArray


def neighbourhood_prediction(
    cands: Candidates, selected: BoolArray, weights: FloatArray
) -> tuple[FloatArray, UInt32Array]:
    """offset + Σ w·dev / Σ|w| over the selected usable candidates of each target (Zhu Eq 3.2.3
    and L878, Wang & Tang Eq (2)), or the fallback; and the count of contributing neighbours."""
    t = cands.offset.size
    w = np.where(selected & cands.usable, weights, 0.0)
    num = np.bincount(cands.seg, weights=w * cands.dev, minlength=t)
    den = np.bincount(cands.seg, weights=np.abs(w), minlength=t)
    counts = np.bincount(cands.seg, weights=(w != 0.0).astype(np.float64), minlength=t)
    ok = den > 0.0
    out = cands.fallback.copy()
    out[ok] = cands.offset[ok] + num[ok] / den[ok]
    return out, counts.astype(np.uint32)


def _item_means(train: sp.csr_matrix) -> FloatArray:
    """r̄_i over a fold's training ratings (non-private; an unrated item gets the global mean)."""
    m = train.shape[1]
    counts = np.bincount(train.indices, minlength=m)
    sums = np.bincount(train.indices, weights=train.data, minlength=m)
    glob = float(train.data.mean()) if train.nnz else 0.0
    out: FloatArray = np.divide(sums, counts, out=np.full(m, glob), where=counts > 0)
    return out


class CoRatedKNN(FoldwiseRecommender):
    """Non-private neighbourhood CF on co-rated similarities (module docstring).

    Args:
        k: the number of neighbours (Zhu: 5..50; Wang & Tang's baselines: 900 on ML-100K).
        mode: "item" (item-based) or "user" (user-based).
        similarity: "pcc" (Zhu Eq 3.2.1) or "cos" (Eq 3.2.2), on co-rated sets.
        candidates: "rated" or "all" (item-based; module docstring).
        prediction: "zhu" (Eq 3.2.3 / L878) or "item-mean" (item-based, Wang & Tang Eq (2)).
    """

    name: ClassVar[str] = "corated_knn"
    capabilities: ClassVar[ModelCapabilities] = ModelCapabilities(
        ModelInput.RELEASES, Serving.QUERIES, ScoreKind.RATING
    )
    _needs_sensitivity: ClassVar[bool] = False

    def __init__(
        self,
        k: int = 35,
        *,
        mode: str = "item",
        similarity: str = "pcc",
        candidates: str = "rated",
        prediction: str = "zhu",
    ) -> None:
        self._set_neighbourhood(k, mode, similarity, candidates)
        self.prediction = _choice("prediction", prediction, PREDICTIONS)
        if self.prediction == "item-mean" and self.mode != "item":
            raise ValueError("`prediction` 'item-mean' needs `mode` 'item'")

    def _set_neighbourhood(self, k: int, mode: str, similarity: str, candidates: str) -> None:
        """Validate and store the parameters every neighbourhood model shares."""
        self.k = _positive_int("k", k)
        self.mode = _choice("mode", mode, MODES)
        self.similarity = check_similarity(similarity)
        self.candidates = _choice("candidates", candidates, CANDIDATES)
        if self.candidates == "all" and self.mode != "item":
            raise ValueError("`candidates` 'all' applies to `mode` 'item' only")

    def _prediction_rule(self) -> str:
        return self.prediction

    def fit_signature(self) -> tuple[object, ...]:
        """The fold states depend on the mode, the similarity, the predictor and whether the
        sensitivities are computed — not on k (nor on PNCF's ε, variant, …)."""
        return (
            self.mode,
            self.similarity,
            self._prediction_rule(),
            self._needs_sensitivity,
        )

    # ------------------------------------------------------------------ fold states
    def _fit_fold(self, train: sp.csr_matrix, key: FoldKey) -> Any:
        if self.mode == "user":
            csc = train.tocsc()
            csc.sort_indices()
            counts = np.diff(train.indptr)
            sums = np.asarray(train.sum(axis=1)).ravel()
            means = np.divide(sums, counts, out=np.zeros(counts.size), where=counts > 0)
            return _UserState(csc, means)
        stats = item_pair_stats(train)
        sim = item_pair_similarity(stats, self.similarity)
        rs = (
            item_pair_sensitivity(train, stats, sim, self.similarity)
            if self._needs_sensitivity
            else None
        )
        item_means = _item_means(train) if self._prediction_rule() == "item-mean" else None
        return _ItemState(sim, rs, item_means)

    # ------------------------------------------------------------------ candidates
    def _candidates(
        self, state: Any, query_indices: IntArray, query_values: FloatArray, items: IntArray
    ) -> Candidates:
        t = items.size
        own_mean = float(query_values.mean())
        if isinstance(state, _UserState):
            qs = query_user_similarity(state.csc, query_indices, query_values, self.similarity)
            pos, seg = column_positions(state.csc.indptr.astype(np.int64), items)
            rows = state.csc.indices[pos].astype(np.int64)
            full = np.full(t, own_mean)
            return Candidates(
                seg,
                rows,
                qs.sim[rows],
                qs.sensitivity[rows] if self._needs_sensitivity else None,
                state.csc.data[pos] - state.row_means[rows],
                np.ones(rows.size, dtype=bool),
                full,
                full.copy(),
            )
        m = state.sim.shape[0]
        if self.candidates == "rated":
            g = query_indices.size
            ident = np.tile(query_indices, t)
            seg = np.repeat(np.arange(t, dtype=np.int64), g)
            values = np.tile(query_values, t)
            usable = np.ones(ident.size, dtype=bool)
        else:
            ident = np.tile(np.arange(m, dtype=np.int64), t)
            seg = np.repeat(np.arange(t, dtype=np.int64), m)
            dense = np.zeros(m)
            dense[query_indices] = query_values
            rated = np.zeros(m, dtype=bool)
            rated[query_indices] = True
            values, usable = dense[ident], rated[ident]
        keep = ident != items[seg]  # never the target itself (Zhu §3.3.2)
        ident, seg, values, usable = ident[keep], seg[keep], values[keep], usable[keep]
        targets = items[seg]
        if state.item_means is not None:
            dev = values - state.item_means[ident]
            offset = state.item_means[items].copy()
            fallback = offset.copy()
        else:
            dev, offset, fallback = values, np.zeros(t), np.full(t, own_mean)
        return Candidates(
            seg,
            ident,
            state.sim[targets, ident],
            state.sensitivity[targets, ident] if state.sensitivity is not None else None,
            dev,
            usable,
            offset,
            fallback,
        )

    # ------------------------------------------------------------------ neighbours
    def _neighbours(
        self,
        cands: Candidates,
        key: FoldKey,
        query_indices: IntArray,
        query_values: FloatArray,
        items: IntArray,
    ) -> tuple[BoolArray, FloatArray]:
        """(selected, weights): the top-k by similarity, weighted by it."""
        return top_k_in_segments(cands.seg, cands.score, cands.ident, self.k), cands.score

    def _predict_fold(
        self, state: Any, key: FoldKey, indices: IntArray, values: FloatArray, items: IntArray
    ) -> tuple[FloatArray, UInt32Array]:
        cands = self._candidates(state, indices, values, items)
        selected, weights = self._neighbours(cands, key, indices, values, items)
        return neighbourhood_prediction(cands, selected, weights)


class PNCF(CoRatedKNN):
    """Private Neighbor Collaborative Filtering (Zhu Algorithm 1; module docstring).

    Args:
        k: the number of neighbours (Zhu: 5..50).
        epsilon: ε of one prediction (Zhu: 1; a sweep 0.1..1), split ε/2 selection, ε/2
            perturbation.
        variant: "pncf", "rs_nm" or "gs_nm".
        mode, similarity, candidates: as `CoRatedKNN` (prediction is always Zhu's).
        perturbation: "algorithm-1" (Lap(2k·RS/ε), default) or "eq-3.4.1" (Lap(2·RS/ε)).
        selection_sensitivity: "pair" (Algorithm 2 as printed) or "max".
        rho: ρ of Theorem 3.4.1 (0 < ρ < 1), which sets the truncation w.
        smooth_beta: β of Lemma 2, RS ← e^{−β}·RS (≥ 0; 0 keeps RS).
        min_sensitivity: floor on RS (> 0).
        global_sensitivity: GS for "gs_nm", or None for the similarity's range.
        random_state: seed of the answers' noise (the curator's secret in a deployment).
    """

    name: ClassVar[str] = "pncf"
    _needs_sensitivity: ClassVar[bool] = True

    def __init__(
        self,
        k: int = 35,
        *,
        epsilon: float = 1.0,
        variant: str = "pncf",
        mode: str = "item",
        similarity: str = "pcc",
        candidates: str = "rated",
        perturbation: str = "algorithm-1",
        selection_sensitivity: str = "pair",
        rho: float = 0.1,
        smooth_beta: float = 0.0,
        min_sensitivity: float = 1e-3,
        global_sensitivity: float | None = None,
        random_state: int = 0,
    ) -> None:
        self._set_neighbourhood(k, mode, similarity, candidates)
        self.epsilon = _positive("epsilon", epsilon)
        self.variant = _choice("variant", variant, VARIANTS)
        self.perturbation = _choice("perturbation", perturbation, PERTURBATIONS)
        self.selection_sensitivity = _choice(
            "selection_sensitivity", selection_sensitivity, SELECTION_SENSITIVITIES
        )
        self.rho = _positive("rho", rho)
        if not self.rho < 1.0:
            raise ValueError(f"`rho` must lie in (0, 1), got {rho!r}")
        self.smooth_beta = _positive("smooth_beta", smooth_beta, allow_zero=True)
        self.min_sensitivity = _positive("min_sensitivity", min_sensitivity)
        self.global_sensitivity = (
            None
            if global_sensitivity is None
            else _positive("global_sensitivity", global_sensitivity)
        )
        if isinstance(random_state, bool) or not isinstance(random_state, int | np.integer):
            raise ValueError(f"`random_state` must be an int >= 0, got {random_state!r}")
        if random_state < 0:
            raise ValueError(f"`random_state` must be an int >= 0, got {random_state!r}")
        self.random_state = int(random_state)

    def _prediction_rule(self) -> str:
        return "zhu"  # Eq 3.2.3 / L878 always: the thesis's predictor

    # ------------------------------------------------------------------ the mechanism
    def pair_sensitivity(self, cands: Candidates) -> FloatArray:
        """The sensitivity of each candidate's score: GS ("gs_nm"), else max(e^{−β}·RS,
        `min_sensitivity`) (Zhu Lemma 2, Eq 3.3.7)."""
        if self.variant == "gs_nm":
            gs = self.global_sensitivity or GLOBAL_SENSITIVITY[self.similarity]
            return np.full(cands.seg.size, gs)
        assert cands.sensitivity is not None
        return np.maximum(math.exp(-self.smooth_beta) * cands.sensitivity, self.min_sensitivity)

    def selection_log_weights(self, cands: Candidates) -> FloatArray:
        """ε·ŝ/(4k·RS) of every candidate (Zhu Algorithm 2 step 5): the exponential mechanism
        with ε/(2k) per draw; ŝ truncated for "pncf" (Eq 3.3.8), C₀ with the largest RS."""
        t = cands.offset.size
        sens = self.pair_sensitivity(cands)
        rs_max = np.zeros(t)
        np.maximum.at(rs_max, cands.seg, sens)
        sel_sens = sens if self.selection_sensitivity == "pair" else rs_max[cands.seg]
        score = cands.score
        if self.variant == "pncf":
            s_k = kth_largest(cands.seg, score, cands.ident, self.k, t)
            n_cand = np.bincount(cands.seg, minlength=t)
            width = truncation_width(s_k, rs_max, n_cand, self.k, self.epsilon, self.rho)
            trunc = truncated_scores(cands.seg, score, s_k, width)
            score = trunc.scores
            sel_sens = np.where(trunc.in_c0, rs_max[cands.seg], sel_sens)
        return self.epsilon * score / (4.0 * self.k * sel_sens)

    def perturbation_scale(self, cands: Candidates) -> FloatArray:
        """The Laplace scale on each selected similarity: 2k·RS/ε (Algorithm 1) or 2·RS/ε
        (Eq 3.4.1)."""
        factor = 2.0 * self.k if self.perturbation == "algorithm-1" else 2.0
        return factor * self.pair_sensitivity(cands) / self.epsilon

    def _neighbours(
        self,
        cands: Candidates,
        key: FoldKey,
        query_indices: IntArray,
        query_values: FloatArray,
        items: IntArray,
    ) -> tuple[BoolArray, FloatArray]:
        gumbel, laplace = self._draws(cands, key, query_indices, query_values, items)
        selected = select_without_replacement(
            cands.seg, self.selection_log_weights(cands), gumbel, cands.ident, self.k
        )
        noisy = cands.score + laplace * self.perturbation_scale(cands)
        return selected, noisy

    def _draws(
        self,
        cands: Candidates,
        key: FoldKey,
        query_indices: IntArray,
        query_values: FloatArray,
        items: IntArray,
    ) -> tuple[FloatArray, FloatArray]:
        """Standard Gumbel and standard Laplace draws per candidate, from one stream per
        (fold, query, target item) (`dp_neighbourhood.answer_rng`)."""
        digest = query_digest(query_indices, query_values)
        sizes = np.bincount(cands.seg, minlength=items.size)
        gumbel = np.empty(cands.seg.size)
        laplace = np.empty(cands.seg.size)
        start = 0
        for t, size in enumerate(sizes.tolist()):
            rng = answer_rng(
                self.random_state, self.name, *fold_seed_key(key), digest, int(items[t])
            )
            gumbel[start : start + size] = rng.gumbel(size=size)
            laplace[start : start + size] = rng.laplace(size=size)
            start += size
        return gumbel, laplace

    # ------------------------------------------------------------------ privacy
    def prediction_epsilon(self) -> float:
        """ε of one prediction: ε with Algorithm 1's perturbation, (k + 1)·ε/2 with Eq 3.4.1's."""
        if self.perturbation == "algorithm-1":
            return self.epsilon
        return (self.k + 1) * self.epsilon / 2.0

    def output_privacy(self) -> OutputPrivacy:
        """PNCF's privacy (Zhu Ch. 3): k selections at ε/(2k) each, with the perturbation at ε/2."""
        eps, k = self.epsilon, self.k
        selection = dp.SelfComposedDpEvent(pure_dp_event(eps / (2 * k)), k)
        if self.perturbation == "algorithm-1":
            perturb: dp.DpEvent = pure_dp_event(eps / 2)
        else:
            perturb = dp.SelfComposedDpEvent(pure_dp_event(eps / 2), k)
        flags = []
        if self.variant != "gs_nm":
            flags.append("local-sensitivity")
        if self.variant == "pncf":
            flags.append("data-dependent-truncation")
        if self.mode == "user":
            flags.append("neighbour-ratings-unperturbed")
        if flags:
            flags.append("claim-not-certified")
        unit = (
            "one user's ratings deleted"
            if self.mode == "item"
            else "one item's ratings deleted (covers any one rating)"
        )
        perturbation = (
            "ε/2 (Algorithm 1, Lap(2k·RS/ε))"
            if self.perturbation == "algorithm-1"
            else "k·ε/2 (Eq 3.4.1, Lap(2·RS/ε))"
        )
        notes = (
            f"Zhu PNCF ({self.variant}, {self.mode}-based, {self.similarity}): each prediction "
            f"of an item is {self.prediction_epsilon():g}-DP for the users who rated it "
            f"(selection ε/2 in k = {k} exponential draws of ε/(2k), perturbation "
            f"{perturbation}); the report charges each answered prediction to the training "
            "users who rated the predicted item."
        )
        if "local-sensitivity" in flags:
            notes += (
                " As claimed by the thesis: RS is a local sensitivity (not smoothed as Nissim et "
                "al. require) and s_k, w are taken from the data at no cost, so this is not a "
                "certified ε."
            )
        if self.mode == "user":
            notes += " User-based: the neighbours' ratings enter the prediction unperturbed."
        return OutputPrivacy(
            PrivacyStatement(
                kind="pure",
                epsilon=self.prediction_epsilon(),
                delta=0.0,
                neighbouring=unit,
                notes=notes,
                flags=tuple(flags),
            ),
            answer_event=dp.ComposedDpEvent([selection, perturb]),
            answer_scope="raters",
        )


__all__ = ["PNCF", "Candidates", "CoRatedKNN", "neighbourhood_prediction"]
