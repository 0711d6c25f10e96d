"""OUE (Wang et al. 2017): exact probabilities, exact ε per relation, bit distribution."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privrec.shared.accounting import event_epsilon
from privrec.shared.mechanisms import OptimisedUnaryEncoding
from privrec.shared.mechanisms.oue import oue_probabilities

from ._helpers import ALPHA, binomial_pvalue, random_profiles, rngs


@pytest.mark.parametrize("eps", [0.0, 0.5, 1.0, 4.0, 8.0])
def test_probabilities_are_one_half_and_one_over_e_eps_plus_one(eps: float) -> None:
    """p = 1/2, q = 1/(e^ε + 1) (Wang et al. §4.4)."""
    mech = OptimisedUnaryEncoding(eps)
    assert mech.p == 0.5
    assert mech.q == pytest.approx(1 / (math.exp(eps) + 1), rel=1e-15)


def _max_ratio_one_bit(p: float, q: float) -> float:
    return max(p / q, (1 - q) / (1 - p), q / p, (1 - p) / (1 - q))


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0, 8.0])
def test_epsilon_is_exact_for_the_stated_relation(eps: float) -> None:
    """replace: two bits change, worst ratio p(1−q)/((1−p)q) = e^ε; add-remove: one bit, e^ε."""
    p, q = oue_probabilities(eps, "replace")
    assert math.log(p * (1 - q) / ((1 - p) * q)) == pytest.approx(eps)
    assert math.log(_max_ratio_one_bit(p, q)) == pytest.approx(
        OptimisedUnaryEncoding(eps).epsilon_add_remove()
    )
    assert OptimisedUnaryEncoding(eps).epsilon_add_remove() < eps
    p, q = oue_probabilities(eps, "add-remove")
    assert math.log(_max_ratio_one_bit(p, q)) == pytest.approx(eps)
    st = OptimisedUnaryEncoding(eps, "add-remove").privacy()
    assert st.neighbouring == "one item added or removed" and st.epsilon == eps
    assert event_epsilon(OptimisedUnaryEncoding(eps).event(), 0.0) == pytest.approx(eps)


def _ones(mech: OptimisedUnaryEncoding, n_users: int) -> tuple[int, int, int, int]:
    ps = random_profiles(9, n_users, 200, low=20, high=80)
    held = np.zeros((n_users, 200), dtype=bool)
    for i, p in enumerate(ps):
        held[i, p.items] = True
    bits = np.stack([o.bits for o in mech.release_many(ps, rngs(9, n_users))])
    return int(bits[held].sum()), int(held.sum()), int(bits[~held].sum()), int((~held).sum())


class _Scaled(OptimisedUnaryEncoding):
    def __init__(self, p_factor: float, q_factor: float) -> None:
        super().__init__(1.0)
        self.p *= p_factor
        self.q *= q_factor


def test_bit_rates_match_p_and_q_and_reject_mis_scaled() -> None:
    """Ones on held items ~ Bin(n, 1/2), elsewhere ~ Bin(n, q); ±30 % p or q is rejected.

    Exact binomial tests, α = 1e-3 each. Power at ε = 1 (q = 0.269): ~10,000 held and ~30,000
    other bits; a 30 % error is > 12 standard errors.
    """
    mech = OptimisedUnaryEncoding(1.0)
    k1, n1, k0, n0 = _ones(mech, 200)
    assert binomial_pvalue(k1, n1, mech.p) > ALPHA
    assert binomial_pvalue(k0, n0, mech.q) > ALPHA
    for pf, qf in ((0.7, 1.0), (1.3, 1.0), (1.0, 0.7), (1.0, 1.3)):
        b1, _, b0, _ = _ones(_Scaled(pf, qf), 200)
        assert min(binomial_pvalue(b1, n1, mech.p), binomial_pvalue(b0, n0, mech.q)) < ALPHA
