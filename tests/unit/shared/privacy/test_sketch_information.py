"""Closed-form information of BLIP and JLT releases (shared.privacy.sketch_information),
against hand values and the extraction's computed anchors (Balu extraction §3.4 [D])."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privrec.shared.privacy.sketch_information import (
    binary_entropy,
    blip_bound_chain,
    blip_joint_information_per_item,
    blip_single_information,
    blip_single_information_approx,
    blip_typical_joint_per_item,
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
