"""The DP matrix-factorisation baselines of Wang & Tang §5: DPSGD-MF and DPPS-MF.

Wang & Tang compare their neighbourhood models with "DPSGD-MF" (Berlioz et al. 2015, "calibrates
Laplacian noise into the SGD training process") and "DPPS-MF" (Liu, Wang & Smola 2015,
"exploits the posterior sampling technique"), without restating either; only hyper-parameter
grids are given. Ours, on the shared factorisation core (`server.models.factorization`) and
with the same DP item means, fold-wise training and fold-in serving as the neighbourhood models
(`server.models.dp_training`):

* `DPSGDMF` ("dpsgd_mf"): privrec's one SGD trainer (`factorization.fit_mf`: the biased
  factorisation x̂_ui = b_u + b_i + p_u·q_i of the centred ratings x = r − r̄_i, per-rating SGD)
  where every rating's error is released by the Laplace mechanism before use — e′_ui =
  clamp(e_ui + Lap(K·φ/ε), ±e_max) — Berlioz et al.'s / Friedman et al.'s stochastic gradient
  perturbation. A rating's value enters each epoch only through its noisy error (its value
  moves e_ui by at most φ), once per epoch, so K epochs are ε-DP per rating by composition;
  everything else is post-processing (adaptive composition). Unlike DPSGD-PNBM's, this is a
  certified rating-level ε. With the noise gone (ε → ∞) it is the non-private `biased_mf`
  on the same cells, up to the clamp and the centring (tested within 1 %).
* `DPPSMF` ("dpps_mf"): one sample of the posterior of the same biased factorisation scaled
  by c = ε/(4B) (Wang & Tang §4.3 after Liu et al.: users capped at τ ratings, the fit clipped
  to the rating scale so that a user's Σe² ≤ B = φ²τ), drawn by SGLD whose drift is the shared
  trainer's per-rating pass (`factorization.fit_mf` with a `langevin.TemperedChain`): epoch t
  moves every parameter by −δ_t∇U (the pass, then the prior's flow) and adds N(0, 2δ_t/κ),
  κ = c/ϱ. That is Algorithm 2 with η_t = 2δ_t/c: the step is stated in drift units, so the
  same δ trains at every ε, the injected noise shrinks as ε grows, and as ε → ∞ the chain
  ends at the MAP of U, the non-private counterpart (within 1 % of `biased_mf`, tested). With
  a fixed η (the previous chain: 100 full-batch steps at η₁ = 0.01) the drift grew with ε and
  RMSE rose from 1.016 at ε = 2000 to 1.051 at ε = 2·10⁶.

**DPPS-MF's posterior** (where the paper is silent: it cites Liu et al. and gives grids). The
prior must not depend on the data for a posterior sample to be DP, so it is Gaussian of fixed
precision λ per factor vector and λ_b per bias — not the count-weighted penalty of the SGD
trainer (λ·n_u‖p_u‖² changes with a user's ratings and is unbounded in θ, so no B would
hold). The likelihood is Gaussian of unit precision (Wang & Tang's α_R, implicit in their
B = φ²τ). λ = 12, λ_b = 5 were chosen on a validation split at the MAP (ε → ∞): the paper's
grid {0.02, 0.05, 0.1, 0.2} is a per-rating penalty (the same values as DPSGD-MF's), ≈ 12 as a
precision for ML-100K's ~60 ratings per vector; as a precision it does not regularise (RMSE
1.01 at λ = 1). 60 epochs, δ₁ = 0.01 (biased_mf's rate) held 40 epochs (the authors' code's
`reduce_begin`), then δ₁t^(−0.3): the prior directions relax as e^{−δλt}, e^{−4.8} by epoch
40 whatever ε, and RMSE is level from 60 to 100 epochs at every ε measured.

**What DPPS-MF's ε means.** A user's term of κU is at most κB/2, so an *exact* sample of
π ∝ e^{−κU} is 4·κB/2 = ε/(2ϱ)-DP per user (Wang, Fienberg & Smola 2015; the factor ½ of the
Gaussian likelihood halves the paper's ε, the temperature ϱ divides it). The chain only
approximates π: finite steps (a variance bias of order δλ, a few per cent), per-rating
stochastic gradients whose own noise dominates the injected noise when ε is large, no
accept/reject step. Wang & Tang's Theorem 2 turns a distance δ from π into (ε′, (1 + e^{ε′})δ)
— at ε′ = ε/(2ϱ) ≈ 25,000 (ε = 200, ϱ = 0.004) any δ > 0 voids it — and the paper assumes
δ → 0; so do we (flag `assumes-mcmc-convergence`), without a measured δ.

Choices (docs/decisions/curator_models.md; docs/decisions/factorization.md):
DPSGD-MF is per-rating SGD, as Berlioz et al.'s (its default learning rate is the usual 0.01:
the grid's 6e-4, 8e-4 do not train; where the Laplace noise swamps the clamp, ε ≤ 50 on
ML-100K, they win because they leave the released parameters near their start, and
`wang-tang` runs 6e-4 with K = 10), on the shared trainer with learned user and item biases on
top of the released item means. For both models a querying user's bias and factor are folded in from
her own ratings against the released item side (`FactorModel.fold_in`), so only b_i, Q and the
means are released. Factors initialised N(0, 0.1²); DPSGD-MF's e_max = φ/2.

References:
    Berlioz, A., Friedman, A., Kaafar, M. A., Boreli, R., Berkovsky, S. "Applying Differential
    Privacy to Matrix Factorization", RecSys 2015.
    Friedman, A., Berkovsky, S., Kaafar, M. A. "A differential privacy framework for matrix
    factorization recommender systems", UMUAI 26(5), 2016, §4.3.
    Liu, Z., Wang, Y.-X., Smola, A. "Fast Differentially Private Matrix Factorization",
    RecSys 2015.
    Wang, Y.-X., Fienberg, S., Smola, A. "Privacy for Free: Posterior Sampling and Stochastic
    Gradient Monte Carlo", ICML 2015.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from privrec.server.models.base import UInt32Array
from privrec.server.models.dp_neighbourhood import NoisyMeans
from privrec.server.models.dp_training import (
    DPTrainedRecommender,
    PosteriorSampledRecommender,
    check_int,
    check_number,
)
from privrec.server.models.factorization import FactorModel, MFConfig, fit_mf
from privrec.shared.accounting import dp
from privrec.shared.mechanisms.base import PrivacyStatement
from privrec.shared.types import FloatArray, IntArray

INIT_SCALE = 0.1
"""Standard deviation of the initial factors."""


def _folded_in(
    model: FactorModel,
    item_means: FloatArray,
    query_indices: IntArray,
    query_centred: FloatArray,
    items: IntArray,
) -> tuple[FloatArray, UInt32Array]:
    """r̄_i + b_u + b_i + p_u·q_i with (b_u, p_u) folded in from her centred ratings against
    the released (b_i, Q) (`FactorModel.fold_in`); counts = her ratings used."""
    scores = item_means[items] + model.predict_new_user(query_indices, query_centred, items)
    return scores, np.full(items.size, query_indices.size, dtype=np.uint32)


class DPSGDMF(DPTrainedRecommender):
    """DPSGD-MF: the shared SGD trainer with Laplace-perturbed errors (module docstring).
    Rating-level DP.

    Args:
        epsilon: total ε per fold state (model plus the means' share).
        n_factors: d (Wang & Tang's grid: {10, 15, 20}).
        n_iter: K, the epochs (grid: 10..50; fewer for smaller ε).
        learning_rate: η. The grid's {6e-4, 8e-4} do not train per-rating SGD from
            N(0, 0.1²) factors in K ≤ 50 epochs (measured on ML-100K: the training MSE moves
            from 1.006 to 1.002 in 20 epochs), so the default is the usual 0.01.
        reg: λ, the factors' per-rating penalty (grid: {0.2, 0.02}).
        reg_bias: λ_b, the biases' per-rating penalty.
        mean_fraction, rating_scale, random_state: as the other DP models.
    """

    name: ClassVar[str] = "dpsgd_mf"
    counterpart: ClassVar[str | None] = "biased_mf"
    privacy_unit: ClassVar[str] = "rating"

    def __init__(
        self,
        epsilon: float = 1.0,
        *,
        n_factors: int = 10,
        n_iter: int = 20,
        learning_rate: float = 0.01,
        reg: float = 0.02,
        reg_bias: float = 0.02,
        mean_fraction: float = 0.2,
        rating_scale: tuple[float, float] = (1.0, 5.0),
        random_state: int = 0,
    ) -> None:
        self._set_privacy(epsilon, mean_fraction, rating_scale, random_state)
        self.n_factors = check_int("n_factors", n_factors)
        self.n_iter = check_int("n_iter", n_iter)
        self.learning_rate = check_number("learning_rate", learning_rate)
        self.reg = check_number("reg", reg, inclusive=True)
        self.reg_bias = check_number("reg_bias", reg_bias, inclusive=True)

    @property
    def noise_scale(self) -> float:
        """The Laplace scale on every error, every epoch: K·φ/ε."""
        return self.n_iter * self.phi / self.model_epsilon

    @property
    def config(self) -> MFConfig:
        """The shared trainer's hyper-parameters."""
        return MFConfig(
            n_factors=self.n_factors,
            n_epochs=self.n_iter,
            learning_rate=self.learning_rate,
            reg=self.reg,
            reg_bias=self.reg_bias,
            init_scale=INIT_SCALE,
        )

    def _train_fold(
        self,
        centred: sp.csr_matrix,
        raw: sp.csr_matrix,
        means: NoisyMeans,
        rng: np.random.Generator,
    ) -> FactorModel:
        def noise(epoch: int) -> FloatArray:
            return rng.laplace(0.0, self.noise_scale, centred.nnz)

        return fit_mf(centred, self.config, rng, mu=0.0, noise=noise, e_max=self.phi / 2.0)

    def _predict_params(
        self,
        params: Any,
        item_means: FloatArray,
        query_indices: IntArray,
        query_centred: FloatArray,
        items: IntArray,
    ) -> tuple[FloatArray, UInt32Array]:
        return _folded_in(params, item_means, query_indices, query_centred, items)

    def _fit_events(self) -> list[dp.DpEvent]:
        # per iteration, each rating's error through Laplace of scale (K/ε_S)·φ
        return [
            dp.SelfComposedDpEvent(dp.LaplaceDpEvent(self.n_iter / self.model_epsilon), self.n_iter)
        ]

    def _statement(self) -> PrivacyStatement:
        notes = (
            f"DPSGD-MF (Berlioz et al. 2015): K = {self.n_iter} SGD epochs, each cell's "
            f"error released with Lap(Kφ/ε) = Lap({self.noise_scale:.4g}) then clamped; "
            f"ε = {self.model_epsilon:g} per rating for the factors."
        )
        return PrivacyStatement(
            kind="pure",
            epsilon=self.epsilon,
            delta=0.0,
            neighbouring="one rating's value changed",
            notes=notes + self._mean_note(),
            flags=(),
        )


class DPPSMF(PosteriorSampledRecommender):
    """DPPS-MF: one SGLD sample of the tempered posterior of the biased factorisation, drawn by
    the shared trainer's SGD pass plus Langevin noise (module docstring). User-level DP.

    Args:
        epsilon: the paper's user-level ε (x·τ), plus the means' share.
        n_factors: d (grid: {10, 15, 20}).
        n_iter: K, the chain's epochs (one per-rating sweep each).
        step: δ₁, the drift step (the SGD learning rate; ε-independent: Algorithm 2's η₁ is
            2δ₁/c, `langevin.TemperedChain`).
        decay: ξ (0.3).
        hold: epochs at δ₁ before decaying.
        temperature: ϱ (grid: {1e-4, 6e-4, 4e-3, 3e-2}); the guarantee is ε/(2ϱ).
        reg: λ, the prior precision of every factor vector (data-independent; the paper's
            grid {0.02 … 0.2} is a per-rating penalty, docs/decisions/factorization.md).
        reg_bias: λ_b, the prior precision of every bias.
        tau: the per-user cap τ (200).
        mean_fraction, rating_scale, random_state: as the other DP models.
    """

    name: ClassVar[str] = "dpps_mf"
    counterpart: ClassVar[str | None] = "biased_mf"
    privacy_unit: ClassVar[str] = "user"

    def __init__(
        self,
        epsilon: float = 200.0,
        *,
        n_factors: int = 10,
        n_iter: int = 60,
        step: float = 0.01,
        decay: float = 0.3,
        hold: int = 40,
        temperature: float = 4e-3,
        reg: float = 12.0,
        reg_bias: float = 5.0,
        tau: int = 200,
        mean_fraction: float = 0.2,
        rating_scale: tuple[float, float] = (1.0, 5.0),
        random_state: int = 0,
    ) -> None:
        self._set_privacy(epsilon, mean_fraction, rating_scale, random_state)
        self.n_factors = check_int("n_factors", n_factors)
        self.n_iter = check_int("n_iter", n_iter)
        self.step = check_number("step", step)
        self.decay = check_number("decay", decay, inclusive=True)
        self.hold = check_int("hold", hold, low=0)
        self.temperature = check_number("temperature", temperature)
        self.reg = check_number("reg", reg, inclusive=True)
        self.reg_bias = check_number("reg_bias", reg_bias, inclusive=True)
        self.tau = check_int("tau", tau)

    @property
    def config(self) -> MFConfig:
        """The shared trainer's hyper-parameters: the posterior's prior (penalty "prior")."""
        return MFConfig(
            n_factors=self.n_factors,
            n_epochs=self.n_iter,
            learning_rate=self.step,
            reg=self.reg,
            reg_bias=self.reg_bias,
            init_scale=INIT_SCALE,
            penalty="prior",
        )

    def _train_fold(
        self,
        centred: sp.csr_matrix,
        raw: sp.csr_matrix,
        means: NoisyMeans,
        rng: np.random.Generator,
    ) -> FactorModel:
        # r̂ clipped to the scale: the centred fit to [r_min − r̄_i, r_max − r̄_i], so that a
        # user's Σ e² ≤ φ²τ = B
        item_means = means.item_means[centred.indices]
        bounds = (self.rating_scale[0] - item_means, self.rating_scale[1] - item_means)
        return fit_mf(centred, self.config, rng, mu=0.0, bounds=bounds, chain=self.chain)

    def _predict_params(
        self,
        params: Any,
        item_means: FloatArray,
        query_indices: IntArray,
        query_centred: FloatArray,
        items: IntArray,
    ) -> tuple[FloatArray, UInt32Array]:
        return _folded_in(params, item_means, query_indices, query_centred, items)

    def _sample_notes(self, effective: float) -> str:
        return (
            f"DPPS-MF (Liu, Wang & Smola 2015, as Wang & Tang apply it): one SGLD sample of "
            f"the posterior of the biased factorisation scaled by ε/(4B), B = {self.bound:g}; "
            f"claimed ε = {self.model_epsilon:g}; with temperature ϱ = {self.temperature:g} one "
            f"sample is ε/(2ϱ) = {effective:.4g}-DP per user (see server.models.pnbm) if it is "
            f"exact: the chain ({self.n_iter} epochs, per-rating gradients, no accept/reject "
            "step) only approximates it, at an unmeasured distance δ (Theorem 2: (ε, (1 + "
            "e^ε)δ)), which the paper assumes to vanish."
        )


__all__ = ["DPPSMF", "DPSGDMF"]
