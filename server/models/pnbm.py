"""Wang & Tang's differentially private probabilistic neighbourhood models (IFIP SEC 2017).

The probabilistic item–item NBM (Wang & Tang Eq (1)–(3)) learns the similarity matrix S as the
parameter of a Gaussian model of the ratings, with the NBM predictor (Eq (2))

    r̂_ui = r̄_i + Σ_{j∈I_u∖i} s_ij (r_uj − r̄_j) / Σ_{j∈I_u∖i} |s_ij|
         = r̄_i + S_i R_u⁻ / (|S_i| I_u⁻),

and a Gaussian prior on S (λ = α_S/α_R). Two DP learners:

* `DPSGDPNBM` ("dpsgd_pnbm", Algorithm 1): K iterations of gradient descent on the sum of the
  per-rating gradients g_ui = e_ui ∂r̂_ui/∂S_i (Eq (5)) over a uniform mini-batch (rate γ),
  Laplace noise of scale γ·K·ΔF_t/ε added to every entry of the summed gradient, then
  S ← S − η(βG + λS). The sensitivity tricks (all part of the method, §3): the denominator is
  floored at C (|S_i|I_u⁻ ≥ C), S is initialised ×β and the update ×β, the error is clamped
  to e_max(t) = 0.5 + (φ − 1)/(t + 1), only users with more than 20 ratings train, so that
  ΔF_t = 2·e_max(t)·φ/C (Algorithm 1 line 4, with the body text's φ for the printed τ).
  Rating-level DP.
* `DPPSPNBM` ("dpps_pnbm", Algorithm 2): one sample of the posterior scaled by ε/(4B), drawn by
  SGLD (`server.models.langevin`): S ← S − (ε/4B)(η_t/2)(𝓛ḡ + λS) + N(0, ϱη_t) with
  η_t = 2δ_t/c (the step in drift units, below), users capped
  at τ ratings and r̂ clipped to the scale so that a user's log-likelihood is bounded by
  B = φ²τ. User-level DP, reported by the paper as ε = x·τ.

Choices where the paper is silent or wrong (docs/decisions/curator_models.md):

* **The gradient** is the exact derivative ∂r̂/∂s_ij = (r_uj − r̄_j − r̂′·sign(s_ij))/D with
  r̂′ = r̂ − r̄_i and D = max(C, Σ|s|) (Eq (5) omits the sign part "for convenience"; when D is
  floored at C its derivative is 0). To *enforce* the bound the sensitivity assumes
  (|r_uj − r̂_ui| ≤ φ, which the paper obtains by "removing paranoid records"), DPSGD clips each
  coordinate's factor to [−φ, φ]; then |g_ui,j| ≤ e_max·φ/C holds by construction.
* **Initial S**: 0.2·(U(0,1) − 0.5) per entry (×β for DPSGD), the authors' code; diagonal 0.
* **Mini-batches**: uniform without replacement, rate `batch_fraction` (γ; the authors' code is
  full-batch, γ = 1, the default). DPPS applies the prior term λS in full at every step, which is
  exactly unbiased (the printed H of Eq (10)–(11) is not a co-occurrence probability; the
  authors' code sets H ≡ 1).
* **Step sizes** η_t = η₁·t^(−ξ) after `hold` steps (the text's rule; Algorithm 2 line 6 prints
  a super-exponential recursion), floored at 1e-12, as the authors' code — for DPPS stated in
  drift units (`langevin.TemperedChain`, shared with DPPS-MF): the drift step δ_t = c·η_t/2 is
  the parameter, so η_t = 2δ_t/c. With η₁ fixed, the drift grew with ε and the noise √(ϱη)
  did not shrink, so the chain never approached the MAP as ε grew (on ML-100K's 400 most
  rated items, 80/20: RMSE 0.910 at x = 10, 0.914 at 64, 0.921 at 1000, 0.902 at 10⁵); in
  drift units it runs the same drift at every ε with noise √(2δ/κ) → 0 (0.908, 0.914, 0.919,
  0.918). δ₁ = 0.005 is the previous chain's drift at c = 1 (x = 64, the unscaled posterior),
  where the chain is unchanged.
* **N_k**: predictions keep, per row of S, the entries at least its N_k-th largest (authors'
  code); training uses the whole row.
* **No symmetrisation** of S (the paper's model has none; the authors' code symmetrises).
* **Item means** are DP (`dp_training`): the paper uses exact ones at no cost.

Privacy as stated (`output_privacy`):

* DPSGD: per fold state, K iterations of Laplace noise with ε_t = ε/(Kγ) each, amplified by
  subsampling to ln(1 + γ(e^{ε_t} − 1)) (exact; the paper's Theorem 1 uses the linear γ·ε_t),
  plus the means. Flagged "claim-not-certified": ΔF bounds one coordinate of one rating's
  gradient, while one rating also enters the gradients of every other rating of its user as a
  neighbour (the extraction's B6-13), so the L1 sensitivity of G is larger; the ε is the paper's
  claim.
* DPPS: the chain samples π ∝ p^{c/ϱ} with c = ε/(4B) (`langevin.effective_scale`). Its drift is
  the gradient of ½Σe² while B bounds Σe², so one user's term of log π is at most c·B/(2ϱ), and
  a posterior sample is 4× that: **ε/(2ϱ)-DP**, which is what the statement gives. With the
  paper's temperatures (ϱ = 0.001…0.09) that is 5 to 500 times the ε it claims. It also holds
  only if the chain has converged (Theorem 2: (ε, (1 + e^ε)δ) at distance δ from the target,
  "assumed δ → 0"); flagged.

References:
    Wang, J., Tang, Q. "Differentially Private Neighborhood-based Recommender Systems",
    IFIP SEC 2017, Eqs (1)–(11), Algorithms 1–2.
    Wang, J., Tang, Q. "A Probabilistic View of Neighborhood-based Recommendation Methods",
    arXiv:1701.01250 (the probabilistic NBM).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numba
import numpy as np
import scipy.sparse as sp

from privrec.server.models.base import UInt32Array
from privrec.server.models.dp_neighbourhood import NoisyMeans, amplified_epsilon, pure_dp_event
from privrec.server.models.dp_training import (
    DPTrainedRecommender,
    PosteriorSampledRecommender,
    check_int,
    check_number,
    keep_active_users,
)
from privrec.shared.accounting import dp
from privrec.shared.mechanisms.base import PrivacyStatement
from privrec.shared.types import BoolArray, FloatArray, IntArray

# ---------------------------------------------------------------------- the compiled pass


@numba.njit(cache=True)
def _pnbm_pass(
    indptr: IntArray,
    indices: IntArray,
    centred: FloatArray,
    s: FloatArray,
    in_batch: BoolArray,
    floor: float,
    e_max: float,
    coef_max: float,
    clip_lo: float,
    clip_hi: float,
    item_means: FloatArray,
    raw: FloatArray,
    dpps: bool,
    grad: FloatArray,
) -> float:  # pragma: no cover - compiled
    """One pass over the batch's ratings: adds Σ g_ui to `grad` (m × m), returns Σ e².

    For each rating (u, i) in the batch: p = Σ_{j≠i} s_ij c_uj / D, D = max(floor, Σ|s_ij|),
    r̂ = r̄_i + p, e = r̂ − r_ui. DPSGD (dpps False): e clamped to ±e_max, each coordinate's
    factor (c_uj − p·sign(s_ij)) clipped to ±coef_max. DPPS: r̂ clipped to [clip_lo, clip_hi];
    a clipped prediction has zero gradient (the gradient of the clipped loss).
    """
    loss = 0.0
    for u in range(indptr.size - 1):
        lo, hi = indptr[u], indptr[u + 1]
        for a in range(lo, hi):
            if not in_batch[a]:
                continue
            i = indices[a]
            num = 0.0
            den = 0.0
            for b in range(lo, hi):
                if b != a:
                    w = s[i, indices[b]]
                    num += w * centred[b]
                    den += abs(w)
            active = den > floor
            d = den if active else floor
            p = num / d
            rhat = item_means[i] + p
            if dpps:
                if rhat < clip_lo or rhat > clip_hi:
                    rhat = min(max(rhat, clip_lo), clip_hi)
                    e = rhat - raw[a]
                    loss += e * e
                    continue
                e = rhat - raw[a]
                loss += e * e
            else:
                e = rhat - raw[a]
                loss += e * e
                e = min(max(e, -e_max), e_max)
            for b in range(lo, hi):
                if b == a:
                    continue
                j = indices[b]
                w = s[i, j]
                coef = centred[b]
                if active:
                    if w > 0.0:
                        coef -= p
                    elif w < 0.0:
                        coef += p
                if not dpps:
                    coef = min(max(coef, -coef_max), coef_max)
                grad[i, j] += e * coef / d
    return loss


def pnbm_gradient(
    centred: sp.csr_matrix,
    raw: sp.csr_matrix,
    item_means: FloatArray,
    s: FloatArray,
    in_batch: BoolArray,
    *,
    floor: float,
    e_max: float = np.inf,
    coef_max: float = np.inf,
    clip: tuple[float, float] | None = None,
) -> tuple[FloatArray, float]:
    """Σ_{(u,i) in batch} e_ui ∂r̂_ui/∂S (Wang & Tang Eq (5), exact sign) and Σ e².

    Args:
        centred: CSR (n, m) of r − r̄_i; `raw` the ratings, same structure.
        item_means: float (m,), r̄.
        s: float (m, m), the similarity matrix.
        in_batch: bool (nnz,), the ratings of the mini-batch (storage order).
        floor: the denominator's lower bound (C for DPSGD).
        e_max: DPSGD's error clamp; coef_max: its per-coordinate clip (φ).
        clip: DPPS's (r_min, r_max) clipping of r̂ (then e_max, coef_max are unused).
    """
    grad = np.zeros_like(s)
    dpps = clip is not None
    lo, hi = clip if clip is not None else (-np.inf, np.inf)
    loss = _pnbm_pass(
        centred.indptr.astype(np.int64),
        centred.indices.astype(np.int64),
        centred.data,
        s,
        in_batch,
        float(floor),
        float(e_max),
        float(coef_max),
        float(lo),
        float(hi),
        item_means,
        raw.data,
        dpps,
        grad,
    )
    return grad, loss


def nbm_neighbourhood(s: FloatArray, n_neighbours: int) -> FloatArray:
    """S with every row kept only where it is at least its N_k-th largest entry (the authors'
    code's N_k rule; the diagonal is never a neighbour)."""
    m = s.shape[0]
    out = s.copy()
    np.fill_diagonal(out, -np.inf)
    if n_neighbours < m - 1:
        kth = -np.partition(-out, n_neighbours - 1, axis=1)[:, n_neighbours - 1]
        out[out < kth[:, None]] = 0.0
    np.fill_diagonal(out, 0.0)
    return out


def nbm_predict(
    s_pred: FloatArray,
    item_means: FloatArray,
    query_indices: IntArray,
    query_centred: FloatArray,
    items: IntArray,
    floor: float,
) -> tuple[FloatArray, UInt32Array]:
    """Wang & Tang Eq (2) for a querying user: r̄_i + Σ_j s_ij (r_aj − r̄_j) / max(floor,
    Σ_j |s_ij|) over her rated items j ≠ i; r̄_i (count 0) when no neighbour has weight."""
    w = s_pred[np.ix_(items, query_indices)]
    w[items[:, None] == query_indices[None, :]] = 0.0
    den = np.abs(w).sum(axis=1)
    num = w @ query_centred
    counts = np.count_nonzero(w, axis=1).astype(np.uint32)
    ok = den > 0.0
    out = item_means[items].copy()
    out[ok] += num[ok] / np.maximum(den[ok], floor)
    counts[~ok] = 0
    return out, counts


def _batch_mask(nnz: int, fraction: float, rng: np.random.Generator) -> BoolArray:
    """A uniform mini-batch of round(γ·nnz) ratings without replacement (all when γ = 1)."""
    mask = np.ones(nnz, dtype=bool)
    if fraction < 1.0 and nnz:
        size = max(1, round(fraction * nnz))
        mask[:] = False
        mask[rng.choice(nnz, size=size, replace=False)] = True
    return mask


@dataclasses.dataclass(frozen=True)
class PNBMParams:
    """A fold's learned similarity (N_k-restricted for prediction) and its training curve."""

    s_pred: FloatArray
    losses: FloatArray


# ---------------------------------------------------------------------- DPSGD
class DPSGDPNBM(DPTrainedRecommender):
    """DPSGD-PNBM: Wang & Tang Algorithm 1 (module docstring). Rating-level DP.

    Args:
        epsilon: total ε per fold state (the paper's ε plus the means' share).
        n_iter: K, iterations (paper: 1..20; code: 10).
        learning_rate: η (paper: {0.1, 0.4}; code 0.4).
        reg: λ (paper: {0.05, 0.005}; code 0.005).
        beta: the rescale β (paper: {10, 20}; code 10).
        lower_bound: C, the floor of |S_i|I_u⁻ (paper: {10, 15}; code 10).
        n_neighbours: N_k for prediction (paper: 500).
        batch_fraction: γ = L/𝓛, the mini-batch rate (code: 1).
        min_ratings: users with fewer ratings do not train (paper: "more than 20" → 21).
        mean_fraction: share of ε for the item means.
        rating_scale: (r_min, r_max); φ = r_max − r_min.
        random_state: seed (the curator's secret in a deployment).
    """

    name: ClassVar[str] = "dpsgd_pnbm"
    privacy_unit: ClassVar[str] = "rating"

    def __init__(
        self,
        epsilon: float = 1.0,
        *,
        n_iter: int = 10,
        learning_rate: float = 0.4,
        reg: float = 0.005,
        beta: float = 10.0,
        lower_bound: float = 10.0,
        n_neighbours: int = 500,
        batch_fraction: float = 1.0,
        min_ratings: int = 21,
        mean_fraction: float = 0.2,
        rating_scale: tuple[float, float] = (1.0, 5.0),
        random_state: int = 0,
    ) -> None:
        self._set_privacy(epsilon, mean_fraction, rating_scale, random_state)
        self.n_iter = check_int("n_iter", n_iter)
        self.learning_rate = check_number("learning_rate", learning_rate)
        self.reg = check_number("reg", reg, inclusive=True)
        self.beta = check_number("beta", beta)
        self.lower_bound = check_number("lower_bound", lower_bound)
        self.n_neighbours = check_int("n_neighbours", n_neighbours)
        self.batch_fraction = check_number("batch_fraction", batch_fraction, high=1.0)
        self.min_ratings = check_int("min_ratings", min_ratings, low=0)

    def e_max(self, t: int) -> float:
        """The error clamp at iteration t: 0.5 + (φ − 1)/(t + 1) (Wang & Tang §3)."""
        return 0.5 + (self.phi - 1.0) / (t + 1.0)

    def sensitivity(self, t: int) -> float:
        """ΔF_t = 2·e_max(t)·φ/C (Algorithm 1 line 4, φ for the printed τ)."""
        return 2.0 * self.e_max(t) * self.phi / self.lower_bound

    def noise_scale(self, t: int) -> float:
        """The Laplace scale at iteration t: γ·K·ΔF_t/ε (Algorithm 1 line 6, Theorem 1)."""
        return self.batch_fraction * self.n_iter * self.sensitivity(t) / self.model_epsilon

    def _preprocess(self, train: sp.csr_matrix, rng: np.random.Generator) -> sp.csr_matrix:
        return keep_active_users(train, self.min_ratings)

    def _train_fold(
        self,
        centred: sp.csr_matrix,
        raw: sp.csr_matrix,
        means: NoisyMeans,
        rng: np.random.Generator,
    ) -> PNBMParams:
        m = centred.shape[1]
        s = 0.2 * (rng.random((m, m)) - 0.5) * self.beta  # Algorithm 1 line 1
        np.fill_diagonal(s, 0.0)
        losses = []
        for t in range(1, self.n_iter + 1):
            batch = _batch_mask(centred.nnz, self.batch_fraction, rng)
            grad, loss = pnbm_gradient(
                centred,
                raw,
                means.item_means,
                s,
                batch,
                floor=self.lower_bound,
                e_max=self.e_max(t),
                coef_max=self.phi,
            )
            grad += rng.laplace(0.0, self.noise_scale(t), size=grad.shape)  # line 6
            s -= self.learning_rate * (self.beta * grad + self.reg * s)  # line 7
            np.fill_diagonal(s, 0.0)
            losses.append(loss / max(int(batch.sum()), 1))
        return PNBMParams(nbm_neighbourhood(s, self.n_neighbours), np.array(losses))

    def _predict_params(
        self,
        params: Any,
        item_means: FloatArray,
        query_indices: IntArray,
        query_centred: FloatArray,
        items: IntArray,
    ) -> tuple[FloatArray, UInt32Array]:
        return nbm_predict(
            params.s_pred, item_means, query_indices, query_centred, items, self.lower_bound
        )

    # ------------------------------------------------------------------ privacy
    def iteration_epsilon(self) -> float:
        """ε of one iteration after subsampling: ln(1 + γ(e^{ε/(Kγ)} − 1))."""
        eps_t = self.model_epsilon / (self.n_iter * self.batch_fraction)
        return amplified_epsilon(eps_t, self.batch_fraction)

    def _fit_events(self) -> list[dp.DpEvent]:
        if self.batch_fraction >= 1.0:
            # the Laplace mechanism itself: scale K·ΔF_t/ε_S = (K/ε_S)·ΔF_t
            step: dp.DpEvent = dp.LaplaceDpEvent(self.n_iter / self.model_epsilon)
        else:
            step = pure_dp_event(self.iteration_epsilon())
        return [dp.SelfComposedDpEvent(step, self.n_iter)]

    def _statement(self) -> PrivacyStatement:
        model_eps = self.n_iter * self.iteration_epsilon()
        notes = (
            f"Wang & Tang DPSGD-PNBM: K = {self.n_iter} iterations, Laplace noise of scale "
            f"γKΔF_t/ε on the summed gradient, ΔF_t = 2·e_max(t)·φ/C; ε of the model "
            f"{model_eps:.4g} per fold state (paper's linear amplification: "
            f"{self.model_epsilon:g})."
        )
        notes += self._mean_note()
        notes += (
            " As claimed by the paper: ΔF bounds one coordinate of one rating's gradient, but a "
            "rating also enters its user's other ratings' gradients as a neighbour, so the L1 "
            "sensitivity of the gradient is larger; not a certified ε."
        )
        return PrivacyStatement(
            kind="pure",
            epsilon=model_eps + self.mean_epsilon,
            delta=0.0,
            neighbouring="one rating's value changed",
            notes=notes,
            flags=("per-coordinate-sensitivity", "claim-not-certified"),
        )


# ---------------------------------------------------------------------- DPPS
class DPPSPNBM(PosteriorSampledRecommender):
    """DPPS-PNBM: Wang & Tang Algorithm 2, posterior sampling by SGLD (module docstring).
    User-level DP.

    Args:
        epsilon: the paper's ε for one user's profile (reported as x·τ; x = 1 → 200), plus
            the means' share.
        n_iter: K, SGLD steps (authors' code: 300; 100 here, where the training loss has
            levelled off on ML-100K).
        step: δ₁, the drift step (Algorithm 2's η₁ = 2δ₁/c; module docstring). The paper's
            grid {8e-8, 4e-7, 8e-6} is calibrated to the authors' code, whose drift multiplies
            the *summed* gradient by 𝓛 once more than Eq (11); with Eq (11) as printed those
            values leave S where it started (measured on ML-100K: the training loss does not
            move in 100 steps), so the default is 0.005, the drift of η₁ = 0.01 at c = 1
            (x = 64; about 4e-7·𝓛/3 for ML-100K's 𝓛 ≈ 80,000), checked only to make the
            non-private limit train, never against a published number (there is none).
        decay: ξ (paper and code: 0.3).
        hold: steps at δ₁ before decaying (code: 40; 20 here, with K = 100).
        temperature: ϱ (paper: {0.001, 0.006, 0.09}; code 0.004). ϱ < 1 weakens the
            guarantee to ε/(2ϱ) (module docstring).
        reg: λ (paper: {0.02, 0.002}; code 0.02).
        tau: τ, the per-user cap (paper: 200).
        n_neighbours: N_k for prediction (paper: 500).
        batch_fraction: mini-batch rate (code: 1).
        mean_fraction, rating_scale, random_state: as `DPSGDPNBM`.
    """

    name: ClassVar[str] = "dpps_pnbm"
    privacy_unit: ClassVar[str] = "user"
    _floor: ClassVar[float] = 1e-12

    def __init__(
        self,
        epsilon: float = 200.0,
        *,
        n_iter: int = 100,
        step: float = 0.005,
        decay: float = 0.3,
        hold: int = 20,
        temperature: float = 0.004,
        reg: float = 0.02,
        tau: int = 200,
        n_neighbours: int = 500,
        batch_fraction: float = 1.0,
        mean_fraction: float = 0.2,
        rating_scale: tuple[float, float] = (1.0, 5.0),
        random_state: int = 0,
    ) -> None:
        self._set_privacy(epsilon, mean_fraction, rating_scale, random_state)
        self.n_iter = check_int("n_iter", n_iter)
        self.step = check_number("step", step)
        self.decay = check_number("decay", decay, inclusive=True)
        self.hold = check_int("hold", hold, low=0)
        self.temperature = check_number("temperature", temperature)
        self.reg = check_number("reg", reg, inclusive=True)
        self.tau = check_int("tau", tau)
        self.n_neighbours = check_int("n_neighbours", n_neighbours)
        self.batch_fraction = check_number("batch_fraction", batch_fraction, high=1.0)

    def _train_fold(
        self,
        centred: sp.csr_matrix,
        raw: sp.csr_matrix,
        means: NoisyMeans,
        rng: np.random.Generator,
    ) -> PNBMParams:
        m = centred.shape[1]
        s = 0.2 * (rng.random((m, m)) - 0.5)  # the authors' code
        np.fill_diagonal(s, 0.0)
        total = centred.nnz
        chain = self.chain
        losses = []
        for t in range(1, self.n_iter + 1):
            batch = _batch_mask(total, self.batch_fraction, rng)
            grad, loss = pnbm_gradient(
                centred, raw, means.item_means, s, batch, floor=self._floor, clip=self.rating_scale
            )
            size = max(int(batch.sum()), 1)
            grad_u = (total / size) * grad + self.reg * s  # 𝓛·ḡ + λS (Eq (9), H ≡ 1)
            chain.move(s, grad_u, t, rng)
            np.fill_diagonal(s, 0.0)
            losses.append(loss / size)
        return PNBMParams(nbm_neighbourhood(s, self.n_neighbours), np.array(losses))

    def _predict_params(
        self,
        params: Any,
        item_means: FloatArray,
        query_indices: IntArray,
        query_centred: FloatArray,
        items: IntArray,
    ) -> tuple[FloatArray, UInt32Array]:
        return nbm_predict(
            params.s_pred, item_means, query_indices, query_centred, items, self._floor
        )

    # ------------------------------------------------------------------ privacy
    def _sample_notes(self, effective: float) -> str:
        return (
            f"Wang & Tang DPPS-PNBM: one SGLD sample of the posterior scaled by ε/(4B), "
            f"B = φ²τ = {self.bound:g}; the paper claims ε = {self.model_epsilon:g} for the "
            f"model (x = {self.model_epsilon / self.tau:g} per rating on average). With "
            f"temperature ϱ = {self.temperature:g} the chain samples the posterior scaled by "
            f"ε/(4Bϱ), and its drift is the gradient of ½Σe², so one sample is "
            f"ε/(2ϱ) = {effective:.4g}-DP per user — the stated ε. Theorem 2: (ε, (1 + e^ε)δ) at "
            "distance δ of the chain from its target; the paper assumes δ → 0."
        )


__all__ = [
    "DPPSPNBM",
    "DPSGDPNBM",
    "PNBMParams",
    "nbm_neighbourhood",
    "nbm_predict",
    "pnbm_gradient",
]
