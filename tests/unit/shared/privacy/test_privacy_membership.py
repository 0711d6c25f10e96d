"""Balu's KL-divergence membership measure (4.15) on hand-checkable inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privrec.shared.privacy.membership import GaussianFit, gaussian_kl, membership_kld


def test_kld_by_hand() -> None:
    """Train errors (−1, 1): N(0, 1); test errors (−2, 2): N(0, 4):
    ½(1/4 + 0 − 1 + log 4) = 0.318147…; with the test shifted by +1 the mean term adds
    ½·1/4."""
    assert membership_kld([-1.0, 1.0], [-2.0, 2.0]) == pytest.approx(0.5 * (0.25 - 1 + math.log(4)))
    assert membership_kld([-1.0, 1.0], [-1.0, 3.0]) == pytest.approx(
        0.5 * (0.25 + 0.25 - 1 + math.log(4))
    )


def test_kld_is_zero_for_identical_fits_and_not_symmetric() -> None:
    """KL(N ‖ N) = 0; KL is directed: KL(train ‖ test) ≠ KL(test ‖ train) in general."""
    e = np.random.default_rng(0).normal(size=100)
    assert membership_kld(e, e) == 0.0
    a, b = GaussianFit(0.0, 1.0), GaussianFit(0.5, 3.0)
    assert gaussian_kl(a, b) != pytest.approx(gaussian_kl(b, a))
    assert gaussian_kl(a, b) > 0 and gaussian_kl(b, a) > 0


def test_kld_refuses_degenerate_errors() -> None:
    """One error, a NaN, or zero variance: a ValueError naming the argument."""
    with pytest.raises(ValueError, match="train_errors"):
        membership_kld([1.0], [0.0, 1.0])
    with pytest.raises(ValueError, match="test_errors"):
        membership_kld([0.0, 1.0], [np.nan, 1.0])
    with pytest.raises(ValueError, match="zero variance"):
        membership_kld([0.0, 1.0], [2.0, 2.0])
