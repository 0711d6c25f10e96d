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

References:
    Welling, M., Teh, Y. W. "Bayesian Learning via Stochastic Gradient Langevin Dynamics",
    ICML 2011.
    Wang, Y.-X., Fienberg, S., Smola, A. "Privacy for Free: Posterior Sampling and Stochastic
    Gradient Monte Carlo", ICML 2015.
    Wang, J., Tang, Q., IFIP SEC 2017, §4.
"""

from __future__ import annotations

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
    theta += rng.normal(0.0, np.sqrt(temperature * eta), size=theta.shape)
    return theta


def effective_scale(drift_scale: float, temperature: float) -> float:
    """c/ϱ: the power of the posterior the chain samples (module docstring)."""
    return drift_scale / temperature


__all__ = ["effective_scale", "langevin_step", "step_size"]
