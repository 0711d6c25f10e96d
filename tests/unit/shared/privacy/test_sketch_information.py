"""Closed-form information of BLIP and JLT releases (shared.privacy.sketch_information),
against hand values and the extraction's computed anchors (Balu extraction §3.4 [D])."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privrec.shared.mechanisms.blip import flip_probability
from privrec.shared.privacy.sketch_information import (
    binary_entropy,
    blip_bound_chain,
    blip_codeword_density,
    blip_joint_information_per_item,
    blip_single_information,
    blip_single_information_approx,
    blip_typical_joint_per_item,
    blip_typical_single_information,
    figure_3_1,
    jlt_joint_bound,
    jlt_joint_information_per_item,
    jlt_single_bound,
    jlt_single_information,
    typical_bloom_design,
)

EPS = np.array([59.0, 28.0, 17.0, 8.0, 6.0, 5.0, 3.0, 2.0])


def test_binary_entropy_in_nats() -> None:
    """h_b(½) = log 2, h_b(0) = h_b(1) = 0, symmetric (3.17)."""
    assert binary_entropy(0.5) == pytest.approx(math.log(2))
    assert binary_entropy(0.0) == 0.0 and binary_entropy(1.0) == 0.0
    assert binary_entropy(0.2) == pytest.approx(binary_entropy(0.8))


def test_blip_anchors_for_movielens() -> None:
    """c = 106, L = 5000, K = 20 (extraction §3.4 [D]): (3.16) 15.89 … 0.043 and (3.19)/c
    21.52 … 0.053 at ε = 59 … 2; nothing at ε = 0."""
    single = blip_single_information(106, 5000, 20, EPS)
    joint = blip_joint_information_per_item(106, 5000, 20, EPS)
    np.testing.assert_allclose(
        single, [15.89, 6.566, 2.815, 0.672, 0.381, 0.266, 0.096, 0.043], rtol=5e-3
    )
    np.testing.assert_allclose(
        joint, [21.52, 8.409, 3.541, 0.837, 0.475, 0.331, 0.120, 0.0533], rtol=5e-3
    )
    assert np.all(joint >= single)  # [Mou08]: the joint decoder never has less
    assert abs(float(blip_joint_information_per_item(106, 5000, 20, 0.0))) < 1e-12
    # (3.18) is only an approximation: on Digg (c = 317) at ε = 59 it gives 8.30, above the
    # joint 6.56 that (3.16) (4.10) respects (extraction §3.4 caveat)
    assert blip_single_information_approx(317, 5000, 20, 59.0) == pytest.approx(8.30, abs=0.01)
    assert blip_joint_information_per_item(317, 5000, 20, 59.0) == pytest.approx(6.557, abs=1e-3)
    assert blip_single_information(317, 5000, 20, 59.0) == pytest.approx(4.10, abs=0.01)


def test_bound_chain_3_21_is_ordered() -> None:
    """log 2 − h_b(p_ε) equals its closed form and is below (ε/K)σ(ε/K) ≤ ε/K; the joint
    per-bit information h_b(π̃_c) − h_b(p_ε) is below all of them."""
    for eps in EPS:
        first, second, third, fourth = blip_bound_chain(float(eps), 20)
        assert first == pytest.approx(second, rel=1e-9)
        assert second <= third <= fourth
        per_bit = float(blip_joint_information_per_item(106, 5000, 20, eps)) * 106 / 5000
        assert per_bit <= first + 1e-12


def test_typical_design_gives_one_over_log_2() -> None:
    """With (3.20) and (3.22) the exact ratio joint/single tends to 1/log 2 ≈ 1.4427 (3.24),
    and (3.23) approximates the exact joint information (within 1 % at P_fp = 10⁻³)."""
    big_l, k = typical_bloom_design(1000, 1e-3)
    assert (big_l, k) == (14378, 10)
    ratio = blip_joint_information_per_item(1000, big_l, k, 20.0) / blip_single_information(
        1000, big_l, k, 20.0
    )
    assert ratio == pytest.approx(1 / math.log(2), rel=0.01)
    assert blip_typical_joint_per_item(20.0, 1e-3) == pytest.approx(
        blip_joint_information_per_item(1000, big_l, k, 20.0), rel=0.01
    )


def test_jlt_anchors_and_bounds() -> None:
    """c = 106, L = 1000 at the thesis's σ (extraction §3.4 [D]): (3.25) 0.452 at σ = 1 and
    (3.26) 0.475; the ε/32 bound holds wherever (3.10) does (ε < ln(1/δ) = 2.25)."""
    sigma = np.array([1.0, 2.0, 3.0, 6.0, 8.0, 12.0, 24.0, 61.0])
    eps = np.array([6.0, 3.0, 2.0, 1.0, 0.75, 0.5, 0.25, 0.1])
    single = jlt_single_information(106, 1000, sigma)
    joint = jlt_joint_information_per_item(106, 1000, sigma)
    np.testing.assert_allclose(single[:3], [0.452, 0.122, 0.0549], rtol=5e-3)
    np.testing.assert_allclose(joint[:3], [0.475, 0.123, 0.0552], rtol=5e-3)
    ok = eps < 2.25
    assert np.all(joint[ok] <= jlt_joint_bound(eps[ok]))
    assert np.all(single[ok] <= jlt_single_bound(eps[ok], 106, 1000))
    assert joint[0] > jlt_joint_bound(6.0)  # ε = 6 violates (3.10): no bound there
    assert jlt_joint_information_per_item(106, 1000, 0.0) == np.inf


def test_figure_3_1_difference_is_positive_and_peaks_near_l_over_c_of_11() -> None:
    """At ε = 20 the joint decoder gains everywhere on the grid; the gain peaks where
    L/c ≈ 11.5 (K = 8), at ≈ 1.5 nats."""
    c = np.array([10.0, 100.0, 1000.0])
    ratios = np.array([4.0, 8.0, 11.5, 16.0, 32.0])
    for ci in c:
        _, diff = figure_3_1([ci], ratios * ci)
        assert np.all(diff > 0)
        assert int(np.argmax(diff[0])) == 2
    _, diff = figure_3_1([1000.0], [11500.0])
    assert float(diff[0, 0]) == pytest.approx(1.50, abs=0.01)


# The extraction's printed tables, to half a unit of their last digit (formerly in
# test_privacy_measures.py, which tested a second copy of these formulas).
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
        assert_printed(blip_single_information(c, 5000, 20, eps), single, ("single", eps))
        assert_printed(blip_joint_information_per_item(c, 5000, 20, eps), joint, ("joint", eps))


def test_bit_probability_matches_extraction() -> None:
    """p = 1 − (1 − 1/L)^K = 0.0039924 for K = 20, L = 5000 (Balu (3.5))."""
    assert blip_codeword_density(5000, 20) == pytest.approx(0.0039924, abs=5e-8)


def test_flip_probability_table() -> None:
    """p_ε by (3.4) with K = 20 matches the extraction's derived row (4 decimals)."""
    derived = [0.0497, 0.1978, 0.2994, 0.4013, 0.4256, 0.4378, 0.4626, 0.4750, 0.5]
    got = [flip_probability(e, 20) for e in EPS_BLIP]
    np.testing.assert_allclose(got, derived, atol=5e-5)


def test_blip_approximation_caveat_digg() -> None:
    """(3.18) gives 8.30 > I_joint/c = 6.56 for Digg at ε = 59 (extraction caveat)."""
    approx = blip_single_information_approx(317, 5000, 20, 59)
    assert approx == pytest.approx(8.30, abs=0.005)
    assert approx > blip_joint_information_per_item(317, 5000, 20, 59)


@pytest.mark.parametrize("eps", [0.5, 2.0, 8.0, 20.0, 59.0])
def test_blip_joint_bounds_chain(eps: float) -> None:
    """(3.21): h_b(π̃_c) − h_b(p_ε) ≤ log 2 − h_b(p_ε) ≤ (ε/K)σ(ε/K) ≤ ε/K."""
    per_bit = blip_joint_information_per_item(106, 5000, 20, eps) * 106 / 5000
    b1, _, b2, b3 = blip_bound_chain(eps, 20)
    assert per_bit <= b1 + 1e-15 <= b2 + 2e-15 <= b3 + 3e-15


def test_blip_single_never_exceeds_joint_per_item() -> None:
    """Moulin's theorem: I(B̃; X) ≤ I(B̃; P)/c (joint decoding never worse), ML-100K grid."""
    for eps in EPS_BLIP[:-1]:
        assert blip_single_information(106, 5000, 20, eps) <= blip_joint_information_per_item(
            106, 5000, 20, eps
        )


def test_typical_design_ratio() -> None:
    """(3.24): I_single = log 2 · I_joint/c under the typical Bloom design (1/log 2 ≈ 1.44×)."""
    j = blip_typical_joint_per_item(20.0, 0.01)
    assert blip_typical_single_information(20.0, 0.01) / j == pytest.approx(math.log(2))
    n_bits, k = typical_bloom_design(106, 0.01)
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
        got_s = jlt_single_information(106, 1000, s)
        if s == 6:
            assert got_s == pytest.approx(0.013848, abs=5e-7)
        assert_printed(got_s, "0.014" if s == 6 else single, ("single", s))
        assert_printed(jlt_joint_information_per_item(106, 1000, s), joint, ("joint", s))


def test_jlt_bounds() -> None:
    """(3.26) ≤ ε/32 needs σ² ≥ 16/ε (3.10); at ε = 6, σ = 1 it fails (0.475 > 0.1875)."""
    assert jlt_joint_information_per_item(106, 1000, 1) > jlt_joint_bound(6)
    for eps in (1.0, 0.5, 0.1):
        sigma = 4.0 / math.sqrt(eps)  # σ² = 16/ε exactly
        assert jlt_joint_information_per_item(106, 1000, sigma) <= jlt_joint_bound(eps)
        assert jlt_single_information(106, 1000, sigma) <= jlt_single_bound(eps, 106, 1000)


def test_jlt_zero_noise_is_infinite() -> None:
    """σ = 0 (the thesis's ε = 600 column) has no finite joint information."""
    assert jlt_joint_information_per_item(106, 1000, 0.0) == math.inf


# ------------------------------------------------------------------------------------ Bilge
