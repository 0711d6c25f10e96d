"""The audit catches a 2× twin of each DP mechanism at the default parameters of its config.

A twin is a lying implementation: it publishes the configured parameters but releases with the
noise of 2ε (BLIP flips with p_{2ε}, OUE reports with q_{2ε}, JLT adds σ/2 of noise while
publishing σ — KKMM12's σ for 2ε —, the Laplace baseline uses half the scale). Parameters are
those of configs/{blip,jlt,oue,laplace_second_order}.toml (JLT with the ML-100K catalogue,
N = 1682, which the server fills in). The twins are audited with the audit's defaults except the
sample count where a smaller one already catches the twin (BLIP: 2e4 instead of 5e4, JLT: 1e5
instead of 1.5e5); the correct mechanisms with 2e4 samples (no false alarm needs no power).

Statistical contract. confidence = 0.999: for a correct mechanism every reported bound holds
together with probability ≥ 0.999, so "no violation found" on a correct mechanism fails with
probability ≤ 0.001 (the false-failure rate of the `correct` tests). Figures at seed 0
(ε_lcb / conformance bound vs ε_config; JLT's margins over seeds 0–3):

| mechanism (config defaults)     | N     | correct    | twin caught by                         |
|---------------------------------|-------|------------|----------------------------------------|
| blip ε=8, L=5000, K=20          | 2e4   | ε_lcb 3.7  | conformance 5.3 > 2.9 on {S < 8}       |
| oue ε=8, replace                | 1e5   | ε_lcb 7.0  | claim: ε_lcb 8.40 > 8                  |
| jlt ε=1, δ=1e-5, L=1000, N=1682 | 1e5   | ε_lcb 0.01 | conformance, margin 0.09–0.14          |
| laplace_second_order ε=1        | 2e4   | ε_lcb 0.9  | claim: ε_lcb 1.84 > 1                  |

The JLT claim itself is loose: σ = 13.57 at ε = 1 is tight ε = 0.263 at δ = 1e-5, which the
result reports beside the claim (`test_jlt_tight_epsilon_shows_the_loose_claim`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest
from scipy import stats

from privrec.shared.mechanisms import (
    Blip,
    JohnsonLindenstrauss,
    LaplaceSecondOrder,
    Mechanism,
    OptimisedUnaryEncoding,
)
from privrec.shared.mechanisms.base import DensePayload, Payload, Profile
from privrec.shared.mechanisms.blip import flip_probability
from privrec.shared.mechanisms.oue import oue_probabilities
from privrec.shared.privacy.audit import AuditResult, audit, audit_setup, default_samples
from privrec.shared.privacy.audit_statistics import (
    configured,
    strongest_statistic,
    tight_epsilon,
)

from .privacy_toys import BrokenToyBitRR, ToyBitRR

CONFIDENCE = 0.999


# ------------------------------------------------------------------------------ the twins
class TwinBlip(Blip):
    """Publishes ε but flips with p_{2ε} = 1/(1 + e^{2ε/K}): truly 2ε."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.p_flip = flip_probability(2.0 * self.epsilon, self.n_hashes)


class TwinOUE(OptimisedUnaryEncoding):
    """Publishes ε but reports absent items with q_{2ε}: truly 2ε."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.p, self.q = oue_probabilities(2.0 * self.epsilon, self.relation)


class TwinJLT(JohnsonLindenstrauss):
    """Publishes σ but adds N(0, (σ/2)²): KKMM12's noise for 2ε."""

    def release_many(
        self, profiles: Sequence[Profile], rngs: Sequence[np.random.Generator]
    ) -> list[Payload]:
        out = []
        for p, r in zip(profiles, rngs, strict=True):
            out.append(
                DensePayload(self.sketch(p) + 0.5 * self.sigma * r.standard_normal(self.dim))
            )
        return out


class TwinLaplace(LaplaceSecondOrder):
    """Publishes ε but adds Laplace noise of half the scale: truly 2ε."""

    @property
    def scale(self) -> float:
        return 0.5 * (self.rating_max - self.rating_min) / self.epsilon


def blip_default(twin: bool) -> Blip:
    return (TwinBlip if twin else Blip)(8.0, 5000, 20)


def oue_default(twin: bool) -> OptimisedUnaryEncoding:
    return (TwinOUE if twin else OptimisedUnaryEncoding)(8.0)


def jlt_default(twin: bool) -> JohnsonLindenstrauss:
    return (TwinJLT if twin else JohnsonLindenstrauss)(1.0, dim=1000, n_items=1682)


def laplace_default(twin: bool) -> LaplaceSecondOrder:
    return (TwinLaplace if twin else LaplaceSecondOrder)(1.0)


CASES = {
    # name: (factory, samples)
    "blip": (blip_default, 20_000),
    "oue": (oue_default, None),
    "jlt": (jlt_default, 100_000),
    "laplace_second_order": (laplace_default, None),
}


#: A correct mechanism passes at any sample count; its tests use a small one.
CORRECT_SAMPLES = 20_000


def run(name: str, twin: bool, seed: int = 0) -> AuditResult:
    factory, n = CASES[name]
    n = n if twin else CORRECT_SAMPLES
    return audit(factory(twin), n_samples=n, confidence=CONFIDENCE, seed=seed)


@pytest.mark.parametrize("name", sorted(CASES))
def test_correct_mechanism_passes_at_config_defaults(name: str) -> None:
    """The honest mechanism: no violation of its claim nor of its parameters (false-failure
    rate ≤ 0.001)."""
    result = run(name, twin=False)
    assert result.statistic == "likelihood-ratio"
    assert result.verdict == "no violation found", result
    assert result.epsilon_lcb <= result.epsilon_claimed
    assert result.epsilon_tight is not None and result.epsilon_lcb <= result.epsilon_tight


@pytest.mark.parametrize("name", sorted(CASES))
def test_twin_is_caught_at_config_defaults(name: str) -> None:
    """The 2× twin is caught: its claim or its configuration is proved wrong."""
    result = run(name, twin=True)
    assert result.verdict != "no violation found", result
    assert not (result.consistent and result.matches_parameters)


def test_blip_twin_caught_on_the_conformance_event() -> None:
    """BLIP's twin stays below the claim at 2e4 samples (its tight event has mass 3.5e-5) but
    its conformance bound exceeds what the configured mechanism allows by > 1 nat."""
    result = run("blip", twin=True)
    assert result.epsilon_lcb_conformance is not None
    assert result.epsilon_event_configured is not None
    assert result.epsilon_lcb_conformance > result.epsilon_event_configured + 1.0


def test_jlt_tight_epsilon_shows_the_loose_claim() -> None:
    """JLT's default σ (KKMM12 at ε = 1, δ = 1e-5) is tight ε ≈ 0.263 for the ML-100K
    codebook (analytic Gaussian, Balle & Wang 2018); the claim of 1 is loose."""
    mech = jlt_default(twin=False)
    assert tight_epsilon(mech, mech.delta) == pytest.approx(0.2627, abs=2e-3)
    assert tight_epsilon(mech, mech.delta) == pytest.approx(mech.tight_epsilon(), rel=1e-9)


def test_tight_epsilon_ignores_what_a_twin_does() -> None:
    """ε_tight and the statistic's configured law come from the public parameters rebuilt by
    the registered class, not from the (lying) instance."""
    twin = blip_default(twin=True)
    honest = configured(twin)
    assert type(honest) is Blip and honest.p_flip == pytest.approx(flip_probability(8.0, 20))
    assert tight_epsilon(twin, 0.0) == pytest.approx(8.0, rel=1e-6)


def test_blip_statistic_law_is_binomial() -> None:
    """The configured law of S (ones at the item's K positions) is Bin(K, p) without the
    item and Bin(K, 1 − p) with it; checked against 4,000 simulated releases (each tail
    within 4 binomial sd)."""
    mech = Blip(2.0, 200, 4)
    _, pair = audit_setup(mech, 20)
    stat = strongest_statistic(mech, pair.d, pair.d_prime)
    assert stat is not None and stat.coordinates.size == 4
    p = mech.p_flip
    ts = np.arange(5.0)
    np.testing.assert_allclose(
        stat.configured_probability(ts, True, 0), stats.binom.sf(ts - 1, 4, p)
    )
    np.testing.assert_allclose(
        stat.configured_probability(ts, True, 1), stats.binom.sf(ts - 1, 4, 1 - p)
    )
    rng = np.random.default_rng(3)
    for which, prof in ((0, pair.d), (1, pair.d_prime)):
        t = stat(stat.gather(mech.release_many([prof] * 4000, [rng] * 4000)))
        for thr in (1.0, 2.0, 3.0):
            want = stat.configured_probability(np.array([thr]), True, which)[0]
            sd = math.sqrt(want * (1 - want) / 4000)
            assert abs(np.mean(t >= thr) - want) < 4 * sd + 1e-9


def test_jlt_statistic_is_the_codeword_projection() -> None:
    """JLT's statistic reads every coordinate with the unit codeword of the added item and its
    configured law is N(⟨Y_D, u⟩, σ²)."""
    mech = JohnsonLindenstrauss(2.0, 1e-3, dim=50, n_items=20)
    _, pair = audit_setup(mech, 20)
    stat = strongest_statistic(mech, pair.d, pair.d_prime)
    assert stat is not None
    j = int(pair.d_prime.items[0])
    u = mech.codebook(20)[j] / np.linalg.norm(mech.codebook(20)[j])
    np.testing.assert_allclose(stat.weights, u)
    norm = float(np.linalg.norm(mech.codebook(20)[j]))
    assert stat.configured_probability(np.array([norm]), True, 1)[0] == pytest.approx(0.5)
    assert stat.configured_probability(np.array([0.0]), True, 0)[0] == pytest.approx(0.5)


def test_oue_statistic_law_by_hand() -> None:
    """OUE swap {0} → {1}: T = b₁ − b₀, P[T = 1 | D] = q/2 and P[T = 1 | D′] = (1 − q)/2, so
    the event {T ≥ 1} has ratio exactly e^ε (the claim)."""
    mech = OptimisedUnaryEncoding(3.0)
    _, pair = audit_setup(mech, 10)
    stat = strongest_statistic(mech, pair.d, pair.d_prime)
    assert stat is not None
    q = mech.q
    assert stat.configured_probability(np.array([1.0]), True, 0)[0] == pytest.approx(q / 2)
    assert stat.configured_probability(np.array([1.0]), True, 1)[0] == pytest.approx((1 - q) / 2)
    ratio = (1 - q) / q
    assert math.log(ratio) == pytest.approx(3.0)


def test_default_samples_per_mechanism() -> None:
    """Each mechanism's default sample count is the one that catches its twin."""
    assert default_samples(blip_default(False)) == 50_000
    assert default_samples(jlt_default(False)) == 150_000
    assert default_samples(ToyBitRR(1.0)) == 100_000


def test_learned_method_still_audits_unknown_mechanisms() -> None:
    """A mechanism without a likelihood-ratio statistic is audited with learned statistics,
    and the broken toy is still caught (ε_lcb > 1.7 for a claim of 1)."""
    good = audit(ToyBitRR(1.0), n_samples=40_000, n_items=4)
    bad = audit(BrokenToyBitRR(1.0), n_samples=40_000, n_items=4)
    assert good.statistic == "learned" and good.consistent
    assert bad.epsilon_lcb > 1.7 and not bad.consistent


def test_forced_learned_method_on_a_known_mechanism() -> None:
    """method="learned" skips the likelihood-ratio statistic (no conformance event)."""
    result = audit(Blip(4.0, 500, 4), n_samples=20_000, n_items=20, method="learned")
    assert result.statistic == "learned" and result.conformance_event == ""
    assert isinstance(result, AuditResult)


def test_unregistered_mechanism_is_its_own_configuration() -> None:
    """A toy that no registry knows is measured against its own event()."""
    toy: Mechanism = ToyBitRR(1.0)
    assert configured(toy) is toy
