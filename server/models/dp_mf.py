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
* `DPPSMF` ("dpps_mf"): one SGLD sample (`server.models.langevin`) of the posterior of (P, Q)
  scaled by ε/(4B), with full-batch gradients, users capped at τ ratings and p_u·q_i clipped so
  that r̂ stays on the scale and a user's Σe² ≤ B = φ²τ (the construction Wang & Tang apply to
  their NBM, §4.3, after Liu et al.). Its privacy is stated as for DPPS-PNBM: ε/(2ϱ) per user.

Choices (docs/decisions/curator_models.md; docs/decisions/factorization.md):
DPSGD-MF is per-rating SGD, as Berlioz et al.'s (its learning rate is the usual 0.01: the grid's
6e-4, 8e-4 do not train), on the shared trainer with learned user and item biases on top of
the released item means; a querying user's bias and factor are folded in from her own ratings
against the released item side (`FactorModel.fold_in`), so only b_i, Q and the means are
released. DPPS-MF's step follows DPPS-PNBM's (the paper's grid is calibrated to code with an
extra 𝓛 in the drift); no biases beyond the item means; its querying user's factor is fitted
by ridge regression on Q (`factorization.fold_in`, ridge `fold_in_reg`). Factors initialised
N(0, 0.1²); e_max = φ/2.

References:
    Berlioz, A., Friedman, A., Kaafar, M. A., Boreli, R., Berkovsky, S. "Applying Differential
    Privacy to Matrix Factorization", RecSys 2015.
    Friedman, A., Berkovsky, S., Kaafar, M. A. "A differential privacy framework for matrix
    factorization recommender systems", UMUAI 26(5), 2016, §4.3.
    Liu, Z., Wang, Y.-X., Smola, A. "Fast Differentially Private Matrix Factorization",
    RecSys 2015.
"""

from __future__ import annotations

import dataclasses
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
from privrec.server.models.factorization import (
    FactorModel,
    MFConfig,
    cell_rows,
    fit_mf,
    fold_in,
    init_factors,
    loss_gradients,
    predictions,
)
from privrec.server.models.langevin import langevin_step, step_size
from privrec.shared.accounting import dp
from privrec.shared.mechanisms.base import PrivacyStatement
from privrec.shared.types import FloatArray, IntArray

INIT_SCALE = 0.1
"""Standard deviation of the initial factors."""


@dataclasses.dataclass(frozen=True)
class MFParams:
    """A fold's released item factors Q (m × d) and its training curve (mean e² per step)."""

    q: FloatArray
    losses: FloatArray


def _predict_mf(
    q: FloatArray,
    fold_in_reg: float,
    item_means: FloatArray,
    query_indices: IntArray,
    query_centred: FloatArray,
    items: IntArray,
) -> tuple[FloatArray, UInt32Array]:
    """r̄_i + p_a·q_i with p_a folded in from her ratings; counts = her ratings used."""
    p = fold_in(q, query_indices, query_centred, fold_in_reg)
    scores = item_means[items] + q[items] @ p
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
        scores = item_means[items] + params.predict_new_user(query_indices, query_centred, items)
        return scores, np.full(items.size, query_indices.size, dtype=np.uint32)

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
    """DPPS-MF: one SGLD sample of the scaled posterior of (P, Q) (module docstring).
    User-level DP.

    Args:
        epsilon: the paper's user-level ε (x·τ), plus the means' share.
        n_factors: d (grid: {10, 15, 20}).
        n_iter: SGLD steps.
        step: η₁ (see `DPPSPNBM.step`).
        decay: ξ (0.3).
        hold: steps at η₁ before decaying.
        temperature: ϱ (grid: {1e-4, 6e-4, 4e-3, 3e-2}); the guarantee is ε/(2ϱ).
        reg: λ (grid: {0.02, 0.05, 0.1, 0.2}).
        fold_in_reg: the ridge of a querying user's fold-in (her own data: no privacy cost).
        tau: the per-user cap τ (200).
        mean_fraction, rating_scale, random_state: as the other DP models.
    """

    name: ClassVar[str] = "dpps_mf"
    privacy_unit: ClassVar[str] = "user"

    def __init__(
        self,
        epsilon: float = 200.0,
        *,
        n_factors: int = 10,
        n_iter: int = 100,
        step: float = 0.01,
        decay: float = 0.3,
        hold: int = 20,
        temperature: float = 4e-3,
        reg: float = 0.2,
        fold_in_reg: float = 5.0,
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
        self.fold_in_reg = check_number("fold_in_reg", fold_in_reg)
        self.tau = check_int("tau", tau)

    def _train_fold(
        self,
        centred: sp.csr_matrix,
        raw: sp.csr_matrix,
        means: NoisyMeans,
        rng: np.random.Generator,
    ) -> MFParams:
        n, m = centred.shape
        p = init_factors(n, self.n_factors, INIT_SCALE, rng)
        q = init_factors(m, self.n_factors, INIT_SCALE, rng)
        rows = cell_rows(centred)
        # r̂ clipped to the scale: the centred prediction to [r_min − r̄_i, r_max − r̄_i]
        lo = self.rating_scale[0] - means.item_means[centred.indices]
        hi = self.rating_scale[1] - means.item_means[centred.indices]
        losses = []
        for t in range(1, self.n_iter + 1):
            pred = predictions(rows, centred.indices, p, q)
            clipped = np.clip(pred, lo, hi)
            err = centred.data - clipped
            losses.append(float(np.mean(err**2)) if err.size else 0.0)
            err[clipped != pred] = 0.0  # the clipped loss has no gradient there
            gp, gq = loss_gradients(centred, err, p, q, self.reg)
            eta = step_size(t, self.step, self.decay, hold=self.hold, floor=1e-12)
            for theta, grad in ((p, gp), (q, gq)):
                langevin_step(
                    theta,
                    grad,
                    eta,
                    drift_scale=self.drift_scale,
                    temperature=self.temperature,
                    rng=rng,
                )
        return MFParams(q, np.array(losses))

    def _predict_params(
        self,
        params: Any,
        item_means: FloatArray,
        query_indices: IntArray,
        query_centred: FloatArray,
        items: IntArray,
    ) -> tuple[FloatArray, UInt32Array]:
        return _predict_mf(
            params.q, self.fold_in_reg, item_means, query_indices, query_centred, items
        )

    def _sample_notes(self, effective: float) -> str:
        return (
            f"DPPS-MF (Liu, Wang & Smola 2015, as Wang & Tang apply it): one SGLD sample of "
            f"the posterior of (P, Q) scaled by ε/(4B), B = {self.bound:g}; claimed ε = "
            f"{self.model_epsilon:g}; with temperature ϱ = {self.temperature:g} one sample is "
            f"ε/(2ϱ) = {effective:.4g}-DP per user (see server.models.pnbm), assuming convergence."
        )


__all__ = ["DPPSMF", "DPSGDMF", "MFParams"]
