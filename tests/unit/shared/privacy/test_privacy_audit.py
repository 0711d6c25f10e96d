"""Tests of the black-box distinguishing audit (shared.privacy.audit).

Statistical contract (docs/architecture.md, "Conventions"): every audit runs with a fixed seed. Each
audit's `confidence` is 0.999, so for a correct mechanism P[ε_lcb > ε_claimed] ≤ 0.001 over seeds
(the two Clopper–Pearson bounds of the held-out evaluation part each fail w.p. ≤ 0.0005): that is
the false-failure rate of each "correct" test. Each broken-twin test asks for ε_lcb > 1.3·ε_claimed;
at seed 0 the margin is ≥ 0.6 nats, over 25 sampling sd of the evaluation estimate, so a miss needs
the selection step to pick a far worse event (not a rigorous rate; seeds 0–3 all pass). Set
PRIVREC_TEST_SEEDS=0,1,2,… to sweep seeds.

Figures at seed 0 (n = releases per neighbour; the audit's default likelihood-ratio statistic,
`shared.privacy.audit_statistics`, 25 % of the samples select the event, 75 % evaluate it;
ε_hat = point estimate; ε_tight = the exact ε of the configured parameters):

| mechanism (test parameters)                  | ε claimed | correct ε_lcb (ε_hat) | broken ε_lcb |
|----------------------------------------------|-----------|-----------------------|--------------|
| blip ε=4, L=500, K=4 (n = 1e5)               | 4         | 3.87 (4.07)           | 7.11         |
| oue ε=1, relation=replace (n = 1e5)          | 1         | 0.93 (0.98)           | 2.03         |
| laplace_second_order ε=1, m=20 (n = 6e4)     | 1         | 0.95 (1.00)           | 1.93         |
| jlt ε=2, δ=1e-3, L=100, N=20 (n = 1e5)       | 2 (tight 0.52) | 0.28 (0.35)      | 5.19         |

Broken twins: BLIP flipping with 1/(1+e^{2ε/K}) (truly 2ε), OUE keeping a held bit w.p. 3/4
(ε + ln 3 = 2.10), Laplace with half the scale (2ε), JLT with noise σ/√L (σ/Δ = 0.44).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import numpy as np
import pytest
from scipy import stats

from privrec.shared.errors import ConfigError
from privrec.shared.mechanisms import (
    Blip,
    JohnsonLindenstrauss,
    LaplaceSecondOrder,
    Mechanism,
    OptimisedUnaryEncoding,
    make_mechanism,
)
from privrec.shared.mechanisms.base import DensePayload, Payload, Profile
from privrec.shared.mechanisms.blip import flip_probability
from privrec.shared.privacy.audit import (
    AuditResult,
    audit,
    audit_by_name,
    audit_setup,
    clopper_pearson,
    epsilon_lower_bound,
)
from privrec.shared.privacy.audit_neighbours import neighbour_pair, worst_case_item

from .privacy_toys import BrokenToyBitRR, NoClaim, ToyBitRR

SEEDS = [int(s) for s in os.environ.get("PRIVREC_TEST_SEEDS", "0").split(",")]
CONFIDENCE = 0.999


# ------------------------------------------------------------------------------ broken twins
class BrokenBlip(Blip):
    """Flips with 1/(1 + e^{2ε/K}) instead of 1/(1 + e^{ε/K}): flips less, truly 2ε-DP."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.p_flip = flip_probability(2.0 * self.epsilon, self.n_hashes)


class BrokenOUE(OptimisedUnaryEncoding):
    """Keeps a held item's bit with probability 3/4 instead of 1/2: ε + ln 3 for a swap."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.p = 0.75


class BrokenLaplace(LaplaceSecondOrder):
    """Laplace noise with half the scale: truly 2ε-DP per element."""

    @property
    def scale(self) -> float:
        return 0.5 * (self.rating_max - self.rating_min) / self.epsilon


class BrokenJLT(JohnsonLindenstrauss):
    """Noise N(0, σ²/L): the codebook's 1/√L scaling wrongly applied to the noise too."""

    def release(self, profile: Profile, rng: np.random.Generator) -> DensePayload:
        noise = self.sigma / math.sqrt(self.dim) * rng.standard_normal(self.dim)
        return DensePayload(self.sketch(profile) + noise)

    def release_many(
        self, profiles: Sequence[Profile], rngs: Sequence[np.random.Generator]
    ) -> list[Payload]:
        return [self.release(p, r) for p, r in zip(profiles, rngs, strict=True)]


JLT_PARAMS = {"epsilon": 2.0, "delta": 1e-3, "dim": 100, "n_items": 20}
CASES = {
    # name: (correct, broken, n_samples, n_items)
    "blip": (Blip(4.0, 500, 4), BrokenBlip(4.0, 500, 4), 100_000, 20),
    "oue": (OptimisedUnaryEncoding(1.0), BrokenOUE(1.0), 100_000, 20),
    "laplace_second_order": (LaplaceSecondOrder(1.0), BrokenLaplace(1.0), 60_000, 20),
    "jlt": (JohnsonLindenstrauss(**JLT_PARAMS), BrokenJLT(**JLT_PARAMS), 100_000, 20),
}


def run(mech: Mechanism, n: int, m: int, seed: int) -> AuditResult:
    return audit(mech, n_samples=n, n_items=m, confidence=CONFIDENCE, seed=seed)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_audit_correct_mechanism_within_claim(name: str, seed: int) -> None:
    """A correct mechanism gives ε_lcb ≤ ε_claimed (false-failure rate ≤ 1 − 0.999)."""
    correct, _, n, m = CASES[name]
    result = run(correct, n, m, seed)
    assert result.mechanism == name
    assert 0.0 <= result.epsilon_lcb <= result.epsilon_claimed, result.event
    assert result.consistent


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_audit_broken_twin_exceeds_claim(name: str, seed: int) -> None:
    """The deliberately broken twin is caught: ε_lcb > ε_claimed (miss rate < 1e-6)."""
    _, broken, n, m = CASES[name]
    result = run(broken, n, m, seed)
    assert result.epsilon_lcb > 1.3 * result.epsilon_claimed, result.event
    assert not result.consistent


@pytest.mark.parametrize("seed", SEEDS)
def test_audit_pure_rr_is_nearly_tight(seed: int) -> None:
    """On binary RR(ε) the audit's bound approaches ε: 0.85ε < ε_lcb ≤ ε at n = 1e5.

    Expected ε_lcb with the tight event (the item's bit is 1): p = e/(1+e), q = 1/(1+e) on 5e4
    evaluation samples gives 0.96 (see `test_expected_power_of_rr_audit`).
    """
    result = audit(ToyBitRR(1.0), n_samples=100_000, n_items=4, seed=seed)
    assert 0.85 < result.epsilon_lcb <= 1.0
    assert result.epsilon_hat == pytest.approx(1.0, abs=0.05)
    broken = audit(BrokenToyBitRR(1.0), n_samples=100_000, n_items=4, seed=seed)
    assert broken.epsilon_lcb > 1.7


def test_expected_power_of_rr_audit() -> None:
    """Plugging the expected counts of the tight RR event into the bound gives ≈ 0.96."""
    p, q = math.e / (1 + math.e), 1 / (1 + math.e)
    eps = float(
        epsilon_lower_bound(round(p * 50_000), round(q * 50_000), 50_000, 0.0, (1 - CONFIDENCE) / 2)
    )
    assert 0.94 < eps < 1.0


def test_audit_same_seed_same_result() -> None:
    """The audit is reproducible: same seed, same figures; another seed, other samples."""
    a = audit(ToyBitRR(1.0), n_samples=2_000, n_items=4, seed=7)
    b = audit(ToyBitRR(1.0), n_samples=2_000, n_items=4, seed=7)
    c = audit(ToyBitRR(1.0), n_samples=2_000, n_items=4, seed=8)
    assert a == b
    assert a.event != c.event or a.epsilon_lcb != c.epsilon_lcb


@pytest.mark.parametrize("name", ["rpt", "rrt", "exact_second_order", "pmd", "pmc"])
def test_audit_refuses_mechanisms_without_claim(name: str) -> None:
    """No DP claim → a one-line ConfigError, nothing sampled."""
    with pytest.raises(ConfigError, match=rf"^mechanism {name} makes no DP claim.*nothing to"):
        audit_by_name(name, n_samples=1_000)


def test_audit_refuses_toy_without_claim() -> None:
    """The same for any mechanism whose statement is kind "none"."""
    with pytest.raises(ConfigError, match="makes no DP claim; nothing to audit"):
        audit(NoClaim(), n_samples=1_000)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"confidence": 1.0}, "confidence"), ({"n_samples": 10}, "samples"), ({"seed": -1}, "seed")],
)
def test_audit_validates_arguments(kwargs: dict[str, float], field: str) -> None:
    """Bad audit arguments are ConfigErrors naming the option."""
    with pytest.raises(ConfigError, match=field):
        audit(ToyBitRR(1.0), **kwargs)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- components
def test_clopper_pearson_edges() -> None:
    """k = 0: lower 0, upper 1 − α^{1/n}; k = n: upper 1, lower α^{1/n} (exact forms)."""
    alpha, n = 0.01, 50
    low, up = clopper_pearson(np.array([0, n]), n, alpha)
    assert low[0] == 0.0 and up[1] == 1.0
    assert up[0] == pytest.approx(1 - alpha ** (1 / n))
    assert low[1] == pytest.approx(alpha ** (1 / n))


def test_clopper_pearson_coverage() -> None:
    """Each one-sided bound misses the truth at most α of the time (20 000 seeded trials).

    Tolerance: CP is conservative, so the miss rate is ≤ α = 0.05; we allow 4 binomial sd
    above α (0.05 + 4·√(0.05·0.95/20000) = 0.056).
    """
    rng = np.random.default_rng(0)
    n, p, alpha = 200, 0.3, 0.05
    k = rng.binomial(n, p, size=20_000)
    low, up = clopper_pearson(k, n, alpha)
    assert np.mean(low > p) <= 0.056
    assert np.mean(up < p) <= 0.056


def test_epsilon_lower_bound_subtracts_delta() -> None:
    """ε_lcb = ln((p_low − δ)/q_up), clamped at 0."""
    low, _ = clopper_pearson(600, 1000, 0.01)
    _, up = clopper_pearson(100, 1000, 0.01)
    assert float(epsilon_lower_bound(600, 100, 1000, 0.0, 0.01)) == pytest.approx(
        math.log(low / up)
    )
    assert float(epsilon_lower_bound(600, 100, 1000, 0.1, 0.01)) == pytest.approx(
        math.log((low - 0.1) / up)
    )
    assert float(epsilon_lower_bound(10, 500, 1000, 0.0, 0.01)) == 0.0


def test_neighbour_pairs_follow_stated_relation() -> None:
    """Item added → empty vs {j}; item replaced → {j} vs {j+1}; element → rating 1 vs 5."""
    add = neighbour_pair(Blip(1.0, 64, 2), 10, item=3)
    assert add.d.items.size == 0 and add.d_prime.items.tolist() == [3]
    swap = neighbour_pair(OptimisedUnaryEncoding(1.0), 10, item=9)
    assert swap.d.items.tolist() == [9] and swap.d_prime.items.tolist() == [0]
    mech, elem = audit_setup(LaplaceSecondOrder(1.0), 10)
    assert elem.d.ratings.tolist() == [1.0] and elem.d_prime.ratings.tolist() == [5.0]
    # The bound copy's completion changes exactly one element by the full range.
    diff = mech.complete(elem.d_prime) - mech.complete(elem.d)  # type: ignore[attr-defined]
    assert np.count_nonzero(diff) == 1 and diff[0] == 4.0


def test_worst_case_items() -> None:
    """BLIP: an item with K distinct positions; JLT: the codeword of largest norm."""
    blip = Blip(1.0, 16, 4)
    j = worst_case_item(blip, 50)
    assert np.unique(blip.hashes.positions(np.array([j]))).size == 4
    jlt = JohnsonLindenstrauss(**JLT_PARAMS)
    j = worst_case_item(jlt, 20)
    assert np.linalg.norm(jlt.codebook(20)[j]) == pytest.approx(jlt.sensitivity())


def test_audit_by_name_uses_registry() -> None:
    """audit_by_name builds the mechanism through make_mechanism (unknown → ConfigError)."""
    with pytest.raises(ConfigError, match="unknown mechanism"):
        audit_by_name("nope")
    result = audit_by_name("oue", {"epsilon": 1.0}, n_samples=4_000, n_items=10)
    assert result.params == make_mechanism("oue", {"epsilon": 1.0}).public_params()
    assert set(result.to_dict()) >= {
        "epsilon_claimed",
        "epsilon_lcb",
        "n_samples",
        "confidence",
        "event",
        "consistent",
    }


def test_cp_upper_bound_matches_beta_quantile() -> None:
    """The upper bound is the Beta(k+1, n−k) quantile (scipy.stats.beta)."""
    _, up = clopper_pearson(7, 100, 0.025)
    assert float(up) == pytest.approx(stats.beta.ppf(0.975, 8, 93))
