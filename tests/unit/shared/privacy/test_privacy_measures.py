"""Tests of the papers' privacy measures (shared.privacy.measures) against their tables."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from privrec.shared.privacy import measures as m

EPS_BLIP = [59, 28, 17, 8, 6, 5, 3, 2, 0]
# Balu extraction §3.4 [D] tables: K = 20, L = 5000, c = c_avg, nats. Kept as the printed
# strings, so the tolerance is half a unit of the last printed digit (3 significant digits
# wherever the extraction prints 3 or more; "0.096" and "0.043" are printed with 2).
ML100K = {  # c = 106
    "single": "15.89 6.566 2.815 0.672 0.381 0.266 0.096 0.043 0",
    "joint": "21.52 8.409 3.541 0.837 0.475 0.331 0.120 0.053 0",
}
DIGG = {  # c = 317
    "single": "4.10 1.370 0.547 0.126 0.071 0.049 0.018 0.008 0",
    "joint": "6.557 2.531 1.062 0.250 0.142 0.099 0.036 0.016 0",
}


def half_unit(printed: str) -> float:
    """Half a unit in the last printed digit of `printed` (1e-9 for "0")."""
    if "." not in printed:
        return 1e-9
    return 0.5 * 10.0 ** -len(printed.split(".")[1]) + 1e-12


def assert_printed(value: float, printed: str, what: object) -> None:
    assert abs(value - float(printed)) <= half_unit(printed), (what, value, printed)


@pytest.mark.parametrize(("c", "table"), [(106, ML100K), (317, DIGG)], ids=["ml100k", "digg"])
def test_blip_mutual_information_tables(c: int, table: dict[str, str]) -> None:
    """(3.16) and (3.19)/c reproduce the extraction's I_single / I_joint tables."""
    singles, joints = table["single"].split(), table["joint"].split()
    for eps, single, joint in zip(EPS_BLIP, singles, joints, strict=True):
        assert_printed(m.blip_mi_single(eps, 20, 5000, c), single, ("single", eps))
        assert_printed(m.blip_mi_joint(eps, 20, 5000, c) / c, joint, ("joint", eps))


def test_bit_probability_matches_extraction() -> None:
    """p = 1 − (1 − 1/L)^K = 0.0039924 for K = 20, L = 5000 (Balu (3.5))."""
    assert m.bit_set_probability(5000, 20) == pytest.approx(0.0039924, abs=5e-8)


def test_flip_probability_table() -> None:
    """p_ε by (3.4) with K = 20 matches the extraction's derived row (4 decimals)."""
    derived = [0.0497, 0.1978, 0.2994, 0.4013, 0.4256, 0.4378, 0.4626, 0.4750, 0.5]
    got = [m.blip_flip_probability(e, 20) for e in EPS_BLIP]
    np.testing.assert_allclose(got, derived, atol=5e-5)


def test_blip_approximation_caveat_digg() -> None:
    """(3.18) gives 8.30 > I_joint/c = 6.56 for Digg at ε = 59 (extraction caveat)."""
    approx = m.blip_mi_single_approx(59, 20, 5000, 317)
    assert approx == pytest.approx(8.30, abs=0.005)
    assert approx > m.blip_mi_joint(59, 20, 5000, 317) / 317


@pytest.mark.parametrize("eps", [0.5, 2.0, 8.0, 20.0, 59.0])
def test_blip_joint_bounds_chain(eps: float) -> None:
    """(3.21): h_b(π̃_c) − h_b(p_ε) ≤ log 2 − h_b(p_ε) ≤ (ε/K)σ(ε/K) ≤ ε/K."""
    per_bit = m.blip_mi_joint(eps, 20, 5000, 106) / 5000
    b1, b2, b3 = m.blip_joint_bit_bounds(eps, 20)
    assert per_bit <= b1 + 1e-15 <= b2 + 2e-15 <= b3 + 3e-15


def test_blip_single_never_exceeds_joint_per_item() -> None:
    """Moulin's theorem: I(B̃; X) ≤ I(B̃; P)/c (joint decoding never worse), ML-100K grid."""
    for eps in EPS_BLIP[:-1]:
        assert m.blip_mi_single(eps, 20, 5000, 106) <= m.blip_mi_joint(eps, 20, 5000, 106) / 106


def test_typical_design_ratio() -> None:
    """(3.24): I_single = log 2 · I_joint/c under the typical Bloom design (1/log 2 ≈ 1.44×)."""
    j = m.blip_mi_joint_typical(20.0, 0.01)
    assert m.blip_mi_single_typical(20.0, 0.01) / j == pytest.approx(math.log(2))
    n_bits, k = m.bloom_design(106, 0.01)
    assert n_bits == math.ceil(-106 * math.log(0.01) / math.log(2) ** 2)
    assert k == math.ceil(math.log(2) * n_bits / 106)


JLT_SIGMA = [1, 2, 3, 6, 8, 12, 24, 61]
JLT_SINGLE = ["0.452", "0.122", "0.0549", "0.0139", "0.0078", "0.0035", "0.0009", "0.0001"]
JLT_JOINT = ["0.475", "0.123", "0.0552", "0.0139", "0.0078", "0.0035", "0.0009", "0.0001"]


def test_jlt_mutual_information_tables() -> None:
    """(3.25), (3.26) at c = 106, L = 1000 reproduce the extraction's JLT table.

    Tolerance: half a unit of the last printed digit, except I_single at σ = 6, where (3.25)
    gives 0.013848 and the extraction prints 0.0139 (it rounds 0.01385 up; an extraction
    erratum, 0.4% off). We check it to 2 s.f. and pin our value.
    """
    for s, single, joint in zip(JLT_SIGMA, JLT_SINGLE, JLT_JOINT, strict=True):
        got_s = m.jlt_mi_single(s, 1000, 106)
        if s == 6:
            assert got_s == pytest.approx(0.013848, abs=5e-7)
        assert_printed(got_s, "0.014" if s == 6 else single, ("single", s))
        assert_printed(m.jlt_mi_joint(s, 1000, 106), joint, ("joint", s))


def test_jlt_bounds() -> None:
    """(3.26) ≤ ε/32 needs σ² ≥ 16/ε (3.10); at ε = 6, σ = 1 it fails (0.475 > 0.1875)."""
    assert m.jlt_mi_joint(1, 1000, 106) > m.jlt_mi_joint_bound(6)
    for eps in (1.0, 0.5, 0.1):
        sigma = 4.0 / math.sqrt(eps)  # σ² = 16/ε exactly
        assert m.jlt_mi_joint(sigma, 1000, 106) <= m.jlt_mi_joint_bound(eps)
        assert m.jlt_mi_single(sigma, 1000, 106) <= m.jlt_mi_single_bound(eps, 1000, 106)


def test_jlt_zero_noise_is_infinite() -> None:
    """σ = 0 (the thesis's ε = 600 column) has no finite joint information."""
    assert m.jlt_mi_joint(0.0, 1000, 106) == math.inf


# ------------------------------------------------------------------------------------ Bilge
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
