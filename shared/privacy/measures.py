"""Bilge's privacy measures of RPT (2013, ch. 3), as functions.

RPT has no DP guarantee; the thesis measures its privacy instead by the entropy H(S) of the
apparent profile size (§3.1.1, Eq 3.1), the probability of guessing the exact list of genuinely
rated items 1/(β_max·C(g′, g)) (§3.1.1), and the average conditional privacy Π(P|U) = 2^{H(P|U)}
of Agrawal & Aggarwal (2001) (§3.1.2). These are in bits (log2), as in the thesis. Balu's
information measures of BLIP and JLT (nats) are `shared.privacy.sketch_information`.

Choices where the papers are silent (also in docs/decisions/privacy.md):

* H(S): Bilge models "the user's distribution" as S = (#P + #R)/(g + b·β_max) but never says
  how H(S) is estimated. We take the literal reading: S is the apparent number of filled
  cells, g + ⌊b·β/100⌋, over its largest value g + ⌊b·β_max/100⌋, with β uniform on the
  integer percentages {1, …, β_max} (the rpt mechanism's draw), and H(S) is the exact
  Shannon entropy of that discrete law (no binning, no sampling). Two values of β that give
  the same ⌊b·β/100⌋ merge, so H(S) ≤ log2 β_max, with equality when b ≥ 100. This measures
  the server's uncertainty about β ("privacy obtained by Pr(β)"). It does *not* reproduce the
  non-monotone shape of Bilge's Fig. 3.1, whose values are not printed; the complementary
  measure `genuine_fake_entropy` (the entropy of "is this filled cell genuine?") does fall
  again at large β_max, as the thesis's text describes.
* Exact-list guess: the thesis computes b = b′·100/β, which is dimensionally wrong when b′ is
  the apparent number of empty cells; `estimate_genuine_count` uses b = b′/(1 − β/100).
* Π(P|U): closed form for Gaussian P and Gaussian noise; numerical integration (h(U) by
  quadrature on a grid) for uniform noise and for the fair-coin mixture Procedure 1 uses.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from scipy import integrate, special, stats

from privrec.shared.privacy.sketch_information import LN2, binary_entropy

NoiseKind = Literal["gaussian", "uniform", "mixture"]


def shannon_entropy_bits(pmf: np.ndarray) -> float:
    """H(X) = −Σ p(x_i) log2 p(x_i) (Bilge Eq 3.1); zero-probability values contribute 0."""
    p = np.asarray(pmf, dtype=np.float64)
    p = p[p > 0]
    return float(-(p * np.log2(p)).sum())


def fake_count(n_empty: int, beta_percent: int | np.ndarray) -> np.ndarray:
    """F = ⌊e·β/100⌋ fake cells for e empty cells and β in percent (rpt's rounding)."""
    return np.asarray((np.asarray(n_empty) * np.asarray(beta_percent)) // 100)


def apparent_size_pmf(n_genuine: int, n_items: int, beta_max: int) -> dict[float, float]:
    """Law of S = (g + F(β))/(g + F(β_max)) for β uniform on {1, …, β_max} (Bilge §3.1.1).

    Args:
        n_genuine: g, the user's number of genuine ratings.
        n_items: m, the catalogue size; b = m − g empty cells.
        beta_max: the public upper bound of β, in percent (1–100).

    Returns:
        {value of S: probability}.
    """
    _check_counts(n_genuine, n_items, beta_max)
    b = n_items - n_genuine
    betas = np.arange(1, beta_max + 1)
    sizes = n_genuine + fake_count(b, betas)
    values, counts = np.unique(sizes, return_counts=True)
    top = float(n_genuine + fake_count(b, beta_max))
    return {float(v) / top: float(c) / beta_max for v, c in zip(values, counts, strict=True)}


def apparent_size_entropy(n_genuine: int, n_items: int, beta_max: int) -> float:
    """H(S) in bits, S the normalised apparent profile size (Bilge §3.1.1, Eq 3.1).

    See the module docstring for the estimator choice.
    """
    return shannon_entropy_bits(
        np.array(list(apparent_size_pmf(n_genuine, n_items, beta_max).values()))
    )


def genuine_fake_entropy(n_genuine: int, n_items: int, beta_max: int) -> float:
    """E_β[h2(g/(g + F(β)))], bits: uncertainty whether a filled cell is genuine or fake.

    Not in the thesis; a complementary reading of §3.1.1 ("loss of uncertainty between
    genuine and forged ratings") that peaks where fakes and genuine ratings balance.
    """
    _check_counts(n_genuine, n_items, beta_max)
    b = n_items - n_genuine
    f = fake_count(b, np.arange(1, beta_max + 1)).astype(np.float64)
    return float((binary_entropy(n_genuine / (n_genuine + f)) / LN2).mean())


def estimate_genuine_count(n_apparent_empty: int, n_items: int, beta_percent: float) -> float:
    """The server's estimate of g given its guess of β (corrected Bilge §3.1.1).

    The user filled β% of her b empty cells, so b′ = b(1 − β/100) remain empty and
    g = m − b = m − b′/(1 − β/100). (The thesis prints b = b′·100/β; see the module docstring.)
    """
    if not 0 < beta_percent < 100:
        raise ValueError(f"`beta_percent` must be in (0, 100), got {beta_percent!r}")
    return n_items - n_apparent_empty / (1.0 - beta_percent / 100.0)


def log_exact_list_probability(n_apparent: int, n_genuine: int, beta_max: int) -> float:
    """ln P(exact genuine list) = −ln β_max − ln C(g′, g) (Bilge §3.1.1).

    The server guesses β w.p. 1/β_max, then one of the C(g′, g) ways of picking the g genuine
    cells among the g′ filled ones. Computed in log space (C(458, 50) ≈ 10^67).

    Args:
        n_apparent: g′, the filled cells the server sees (genuine + fake).
        n_genuine: g ≤ g′.
        beta_max: β_max ≥ 1.
    """
    if not 0 <= n_genuine <= n_apparent:
        raise ValueError(f"need 0 <= g <= g', got g={n_genuine!r}, g'={n_apparent!r}")
    if beta_max < 1:
        raise ValueError(f"`beta_max` must be >= 1, got {beta_max!r}")
    log_comb = (
        special.gammaln(n_apparent + 1)
        - special.gammaln(n_genuine + 1)
        - special.gammaln(n_apparent - n_genuine + 1)
    )
    return float(-math.log(beta_max) - log_comb)


def exact_list_probability(n_apparent: int, n_genuine: int, beta_max: int) -> float:
    """1/(β_max·C(g′, g)) (Bilge §3.1.1); underflows to 0.0 below ~1e-308, use the log form."""
    return math.exp(log_exact_list_probability(n_apparent, n_genuine, beta_max))


def _check_counts(n_genuine: int, n_items: int, beta_max: int) -> None:
    if not 0 <= n_genuine <= n_items:
        raise ValueError(f"need 0 <= n_genuine <= n_items, got {n_genuine!r}, {n_items!r}")
    if not 1 <= beta_max <= 100:
        raise ValueError(f"`beta_max` must be in 1..100, got {beta_max!r}")


# ----------------------------------------------------------------- Π(P|U), Agrawal & Aggarwal
def gaussian_entropy_bits(sigma: float) -> float:
    """h(N(0, σ²)) = ½ log2(2πeσ²)."""
    return 0.5 * math.log2(2.0 * math.pi * math.e * sigma * sigma)


def uniform_entropy_bits(sigma: float) -> float:
    """h(U[−√3σ, √3σ]) = log2(2√3σ) (variance σ², Bilge Procedure 1)."""
    return math.log2(2.0 * math.sqrt(3.0) * sigma)


def _sum_pdf(u: np.ndarray, sigma_p: float, sigma: float, noise: NoiseKind) -> np.ndarray:
    """Density of U = P + R, P ~ N(0, σ_P²), R the noise."""
    a = math.sqrt(3.0) * sigma
    gauss = stats.norm.pdf(u, scale=math.hypot(sigma_p, sigma))
    unif = (stats.norm.cdf((u + a) / sigma_p) - stats.norm.cdf((u - a) / sigma_p)) / (2.0 * a)
    return np.asarray({"gaussian": gauss, "uniform": unif, "mixture": 0.5 * (gauss + unif)}[noise])


def _differential_entropy_bits(pdf: np.ndarray, x: np.ndarray) -> float:
    f = np.where(pdf > 0, pdf, 1.0)
    return float(-integrate.simpson(pdf * np.log2(f), x=x))


def conditional_privacy(
    sigma_p: float, sigma: float, noise: NoiseKind = "gaussian", *, grid: int = 20001
) -> float:
    """Average conditional privacy Π(P|U) = 2^{H(P|U)} (Bilge §3.1.2; Agrawal & Aggarwal 2001).

    With P ~ N(0, σ_P²) independent of the noise R and U = P + R,
    H(P|U) = h(P) + h(R) − h(U) (since H(U|P) = h(R)).

    * Gaussian noise N(0, σ²): Π(P|U) = √(2πe)·σ_P·σ/√(σ_P² + σ²) (closed form).
    * "uniform" U[−√3σ, √3σ], and "mixture" (the fair coin of Procedure 1, density
      ½N + ½U): h(U) (and the mixture's h(R)) by Simpson quadrature on `grid` points; h(U)
      over ±12·√(σ_P² + σ²). Accurate to ~1e-6 relative while σ_P and σ are within a factor
      ~100 of each other (the test suite checks grid convergence).

    Args:
        sigma_p: standard deviation of the original (z-scored) data P.
        sigma: the noise standard deviation σ (variance σ² for both distributions).
        noise: "gaussian", "uniform" or "mixture".
        grid: quadrature points (odd).
    """
    if not (sigma_p > 0 and sigma > 0):
        raise ValueError(f"`sigma_p` and `sigma` must be > 0, got {sigma_p!r}, {sigma!r}")
    if noise == "gaussian":
        return math.sqrt(2.0 * math.pi * math.e) * sigma_p * sigma / math.hypot(sigma_p, sigma)
    if noise not in ("uniform", "mixture"):
        raise ValueError(f"`noise` must be gaussian, uniform or mixture, got {noise!r}")
    half = 12.0 * math.hypot(sigma_p, sigma)
    u = np.linspace(-half, half, grid)
    h_u = _differential_entropy_bits(_sum_pdf(u, sigma_p, sigma, noise), u)
    if noise == "uniform":
        h_r = uniform_entropy_bits(sigma)
    else:
        # The mixture density jumps at ±√3σ: integrate the three smooth pieces, each with its
        # own one-sided density (evaluating the jump at a piece's end point costs O(grid⁻¹)).
        a = math.sqrt(3.0) * sigma
        inner = np.linspace(-a, a, grid)
        outer = np.linspace(a, a + 40.0 * sigma, grid)
        f_in = 0.5 * stats.norm.pdf(inner, scale=sigma) + 0.25 / a
        f_out = 0.5 * stats.norm.pdf(outer, scale=sigma)
        h_r = _differential_entropy_bits(f_in, inner) + 2.0 * _differential_entropy_bits(
            f_out, outer
        )
    return float(2.0 ** (gaussian_entropy_bits(sigma_p) + h_r - h_u))


def privacy_loss_fraction(sigma_p: float, sigma: float, noise: NoiseKind = "gaussian") -> float:
    """Pr(P|U) = 1 − 2^{H(U|P) − H(U)} = 1 − Π(P|U)/Π(P) (Bilge §3.1.2)."""
    return float(
        1.0 - conditional_privacy(sigma_p, sigma, noise) / 2.0 ** gaussian_entropy_bits(sigma_p)
    )


__all__ = [
    "apparent_size_entropy",
    "apparent_size_pmf",
    "conditional_privacy",
    "estimate_genuine_count",
    "exact_list_probability",
    "fake_count",
    "gaussian_entropy_bits",
    "genuine_fake_entropy",
    "log_exact_list_probability",
    "privacy_loss_fraction",
    "shannon_entropy_bits",
    "uniform_entropy_bits",
]
