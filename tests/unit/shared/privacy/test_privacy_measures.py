"""Tests of Bilge's privacy measures of RPT (shared.privacy.measures) against the thesis."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from privrec.shared.privacy import measures as m


def test_exact_list_probability_bilge_example() -> None:
    """g = 50, MLP, β = 25%: b = 1632, F = 408, g′ = 458, C(458, 50) ≈ 10^67.35."""
    assert int(m.fake_count(1632, 25)) == 408
    log10_c = -(m.log_exact_list_probability(458, 50, 25) + math.log(25)) / math.log(10)
    assert log10_c == pytest.approx(67.35, abs=0.005)
    assert m.exact_list_probability(458, 50, 25) == pytest.approx(
        math.exp(m.log_exact_list_probability(458, 50, 25))
    )


def test_exact_list_probability_small_case() -> None:
    """1/(β_max·C(g′, g)) for a case countable by hand: 1/(4·C(5, 2)) = 1/40."""
    assert m.exact_list_probability(5, 2, 4) == pytest.approx(1 / 40)


def test_estimate_genuine_count_inverts_fill() -> None:
    """g = m − b′/(1 − β/100) recovers g when F = b·β/100 exactly."""
    n_items, g, beta = 1682, 82, 25  # b = 1600, F = 400, b′ = 1200
    assert m.estimate_genuine_count(1200, n_items, beta) == pytest.approx(g)


def test_apparent_size_entropy() -> None:
    """H(S) = log2 β_max when every β gives a distinct F; fewer bits when they merge."""
    assert m.apparent_size_entropy(50, 1682, 25) == pytest.approx(math.log2(25))
    # b = 150 empty cells: ⌊150β/100⌋ for β = 1..4 is 1, 3, 4, 6: all distinct.
    assert m.apparent_size_entropy(50, 200, 4) == pytest.approx(2.0)
    # b = 50: ⌊50β/100⌋ for β = 1..4 is 0, 1, 1, 2 → law (1/4, 1/2, 1/4): 1.5 bits.
    assert m.apparent_size_entropy(50, 100, 4) == pytest.approx(1.5)
    assert sum(m.apparent_size_pmf(50, 100, 4).values()) == pytest.approx(1.0)


def test_genuine_fake_entropy_falls_with_many_fakes() -> None:
    """Uncertainty genuine-vs-fake drops once fakes dominate (Bilge's Fig. 3.1 remark)."""
    vals = [m.genuine_fake_entropy(50, 17700, b) for b in (1, 5, 25, 100)]
    assert vals[0] > vals[1] > vals[2] > vals[3]


@pytest.mark.parametrize(
    ("sigma", "expected"), [(0.5, 1.85), (1, 2.92), (2, 3.70), (3, 3.92), (4, 4.01)]
)
def test_conditional_privacy_gaussian_table(sigma: float, expected: float) -> None:
    """Π(P|U) = √(2πe)σ_Pσ/√(σ_P²+σ²) with σ_P = 1 (Bilge extraction §2.2 derived values)."""
    assert m.conditional_privacy(1.0, sigma) == pytest.approx(expected, abs=0.005)


def test_conditional_privacy_numeric_matches_closed_form() -> None:
    """The quadrature machinery reproduces the Gaussian closed form (h(U), h(R) numerically)."""
    u = np.linspace(-30, 30, 40001)
    f = stats.norm.pdf(u, scale=math.hypot(1.0, 2.0))
    h_u = -integrate.simpson(f * np.log2(f), x=u)
    closed = 2 ** (m.gaussian_entropy_bits(1.0) + m.gaussian_entropy_bits(2.0) - h_u)
    assert closed == pytest.approx(m.conditional_privacy(1.0, 2.0), rel=1e-6)


def test_conditional_privacy_normal_beats_uniform() -> None:
    """Bilge §3.1.2: normal noise gives slightly more privacy than uniform; both grow with σ."""
    for sigma in (0.5, 1, 2, 3, 4):
        g = m.conditional_privacy(1.0, sigma, "gaussian")
        u = m.conditional_privacy(1.0, sigma, "uniform")
        mix = m.conditional_privacy(1.0, sigma, "mixture")
        assert u < g and 0.8 * g < u
        assert min(u, g) <= mix <= max(u, g) + 1e-6
    us = [m.conditional_privacy(1.0, s, "uniform") for s in (0.5, 1, 2, 3, 4)]
    assert us == sorted(us)


def test_conditional_privacy_uniform_large_noise_limit() -> None:
    """With σ ≫ σ_P, H(P|U) → h(P) from below: Π(P|U) → √(2πe)σ_P ≈ 4.13.

    Only U near the edges ±√3σ tells anything about P; that region has weight ~σ_P/(√3σ), so
    at σ = 200 the value is 0.26% below the limit.
    """
    limit = math.sqrt(2 * math.pi * math.e)
    got = m.conditional_privacy(1.0, 200.0, "uniform")
    assert got < limit
    assert got == pytest.approx(limit, rel=5e-3)


@pytest.mark.parametrize("noise", ["uniform", "mixture"])
@pytest.mark.parametrize("sigma", [0.01, 0.5, 2.0, 200.0])
def test_conditional_privacy_grid_converged(noise: str, sigma: float) -> None:
    """The default quadrature grid agrees with a 10× finer one to 1e-6 relative."""
    coarse = m.conditional_privacy(1.0, sigma, noise)  # type: ignore[arg-type]
    fine = m.conditional_privacy(1.0, sigma, noise, grid=200001)  # type: ignore[arg-type]
    assert coarse == pytest.approx(fine, rel=1e-6)


def test_privacy_loss_fraction_consistent() -> None:
    """Π(P|U) = Π(P)(1 − Pr(P|U)) (Bilge §3.1.2)."""
    pi_p = 2 ** m.gaussian_entropy_bits(1.0)
    for noise in ("gaussian", "uniform"):
        lost = m.privacy_loss_fraction(1.0, 2.0, noise)
        assert pi_p * (1 - lost) == pytest.approx(m.conditional_privacy(1.0, 2.0, noise))


def test_measures_validate_inputs() -> None:
    """Bad arguments are ValueErrors naming the parameter."""
    with pytest.raises(ValueError, match="beta_max"):
        m.apparent_size_entropy(50, 1682, 0)
    with pytest.raises(ValueError, match="sigma"):
        m.conditional_privacy(1.0, 0.0)
    with pytest.raises(ValueError, match="noise"):
        m.conditional_privacy(1.0, 1.0, "cauchy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="g"):
        m.log_exact_list_probability(10, 11, 5)
