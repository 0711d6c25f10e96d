"""Stochastic gradient Langevin dynamics with a scaled drift: posterior sampling for DP.

One SGLD step (Welling & Teh 2011; Wang & Tang Eq (7), (11) and Algorithm 2 line 5) on
parameters θ with potential U (the negative log-posterior, up to a constant):

    θ ← θ − c·(η_t/2)·∇U(θ) + z_t,    z_t ~ N(0, ϱ·η_t)

c is the privacy scaling of the log-posterior (Wang & Tang: c = ε/(4B), the "rescaling by
ε/(4B)" of Wang, Fienberg & Smola 2015), ϱ the temperature that multiplies the noise variance
(Wang & Tang §4.1, "to speed up the burn-in"). For small steps the chain's stationary density is

    π(θ) ∝ exp(−(c/ϱ)·U(θ))

so the *sampled* distribution is the posterior scaled by c/ϱ, not by c: with ϱ < 1 the
privacy of one sample is that of the scale c/ϱ, i.e. ε/ϱ where the paper claims ε (the
extraction's erratum B6-12). `effective_scale` returns c/ϱ and the models state the ε that
follows; a test checks the stationary variance on a Gaussian target.

Step sizes η_t = η₁·t^(−ξ) (Wang & Tang §4.1; Algorithm 2 line 6 prints the recursion
η_{t+1} = η_t/t^γ, which decays super-exponentially — the text's rule is used), held at η₁ for
the first `hold` steps and floored at `floor` (the authors' code: 40 steps, 1e-12).

**The step in drift units** (`TemperedChain`, what the DPPS models run). With η_t fixed, the
drift c·(η_t/2)·∇U grows with ε (c = ε/(4B)): a step that trains at one ε is unstable at a
larger one, and the chain never reaches the MAP that a large ε should approach. Algorithm 2
leaves η₁ to a grid search per ε (its DPPS grids span two to three orders of magnitude); we
state it as the drift step δ_t = c·η_t/2, i.e. run Algorithm 2 with

    η_t = 2·δ_t/c:   θ ← θ − δ_t·∇U + N(0, 2δ_t·ϱ/c) = θ − δ_t·∇U + N(0, 2δ_t/κ),  κ = c/ϱ.

This is SGLD preconditioned by the constant 1/c, which leaves the stationary law π ∝ e^{−κU}
unchanged (a constant preconditioner rescales time, not the target): the drift per step is
ε-independent (the same step trains at every ε, and the chain mixes in the same number of
steps), and the injected noise shrinks as ε grows, so as ε → ∞ the chain becomes gradient
descent on U and ends at its minimiser — the non-private MAP.

References:
    Welling, M., Teh, Y. W. "Bayesian Learning via Stochastic Gradient Langevin Dynamics",
    ICML 2011.
    Wang, Y.-X., Fienberg, S., Smola, A. "Privacy for Free: Posterior Sampling and Stochastic
    Gradient Monte Carlo", ICML 2015.
    Wang, J., Tang, Q., IFIP SEC 2017, §4.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable

import numpy as np

from privrec.shared.types import FloatArray


def step_size(t: int, eta1: float, xi: float, *, hold: int = 0, floor: float = 0.0) -> float:
    """η_t = η₁·t^(−ξ) for t > hold (t counts from 1), η₁ before; never below `floor`."""
    if t < 1:
        raise ValueError(f"`t` counts from 1, got {t!r}")
    eta = eta1 if t <= hold else eta1 * t ** (-xi)
    return max(eta, floor)


def langevin_step(
    theta: FloatArray,
    grad_u: FloatArray,
    eta: float,
    *,
    drift_scale: float,
    temperature: float,
    rng: np.random.Generator,
) -> FloatArray:
    """θ − c·(η/2)·∇U + N(0, ϱη), in place on `theta` (returned).

    Args:
        theta: float array, the current parameters (updated in place).
        grad_u: float array of theta's shape, ∇U(θ) (e.g. 𝓛·ḡ + λθ, Wang & Tang Eq (9)).
        eta: the step size η_t.
        drift_scale: c (ε/(4B) for Wang & Tang).
        temperature: ϱ, the noise variance multiplier.
        rng: the noise stream.
    """
    theta -= drift_scale * (eta / 2.0) * grad_u
    return diffuse(theta, math.sqrt(temperature * eta), rng)


def diffuse(theta: FloatArray, sd: float, rng: np.random.Generator) -> FloatArray:
    """θ + N(0, sd²) per entry, in place (returned): the Langevin step's injected noise."""
    theta += rng.normal(0.0, sd, size=theta.shape)
    return theta


def effective_scale(drift_scale: float, temperature: float) -> float:
    """c/ϱ: the power of the posterior the chain samples (module docstring)."""
    return drift_scale / temperature


STEP_FLOOR = 1e-12
"""The smallest drift step (the authors' code floors η at 1e-12)."""


@dataclasses.dataclass(frozen=True)
class TemperedChain:
    """Algorithm 2's SGLD with its step stated in drift units (module docstring).

    Attributes:
        step: δ₁, the drift step θ ← θ − δ·∇U of the first steps (ε-independent).
        decay: ξ of δ_t = δ₁·t^(−ξ) after `hold` steps (Wang & Tang: 0.3).
        hold: steps at δ₁ before the decay.
        drift_scale: c = ε/(4B).
        temperature: ϱ, the noise variance multiplier.
    """

    step: float
    decay: float
    hold: int
    drift_scale: float
    temperature: float

    @property
    def scale(self) -> float:
        """κ = c/ϱ: the chain samples π ∝ e^{−κU}."""
        return effective_scale(self.drift_scale, self.temperature)

    def drift_step(self, t: int) -> float:
        """δ_t = c·η_t/2 (`step_size` on δ₁, floored at `STEP_FLOOR`)."""
        return step_size(t, self.step, self.decay, hold=self.hold, floor=STEP_FLOOR)

    def paper_step(self, t: int) -> float:
        """Algorithm 2's η_t = 2·δ_t/c."""
        return 2.0 * self.drift_step(t) / self.drift_scale

    def noise_sd(self, t: int) -> float:
        """The injected noise's standard deviation √(ϱη_t) = √(2δ_t/κ)."""
        return math.sqrt(self.temperature * self.paper_step(t))

    def move(
        self, theta: FloatArray, grad_u: FloatArray, t: int, rng: np.random.Generator
    ) -> FloatArray:
        """Step t of the chain on θ (in place, returned): θ − δ_t∇U + N(0, 2δ_t/κ)."""
        return langevin_step(
            theta,
            grad_u,
            self.paper_step(t),
            drift_scale=self.drift_scale,
            temperature=self.temperature,
            rng=rng,
        )

    def diffuse(self, thetas: Iterable[FloatArray], t: int, rng: np.random.Generator) -> None:
        """Step t's noise alone, on every array of `thetas` (in place), for a chain whose drift
        δ_t∇U is taken elsewhere (DPPS-MF: by the SGD pass)."""
        sd = self.noise_sd(t)
        for theta in thetas:
            diffuse(theta, sd, rng)


__all__ = [
    "STEP_FLOOR",
    "TemperedChain",
    "diffuse",
    "effective_scale",
    "langevin_step",
    "step_size",
]
