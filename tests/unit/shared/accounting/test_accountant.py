"""Tests of the per-user privacy ledger and its composition (shared.accounting.accountant)."""

from __future__ import annotations

import math

import dp_accounting
import pytest
from dp_accounting import privacy_accountant as pa
from dp_accounting.gaussian_mechanism import get_epsilon_gaussian
from dp_accounting.pld import PLDAccountant

from privrec.shared.accounting import (
    PrivacyLedger,
    check_mechanism,
    check_supported,
    compose_epsilon,
    event_epsilon,
    naive_epsilon,
    pure_epsilon,
    supports,
)
from privrec.shared.errors import UnsupportedEventError
from privrec.shared.mechanisms import MECHANISMS, OptimisedUnaryEncoding, make_mechanism
from privrec.shared.mechanisms.base import PrivacyStatement

# PLD discretisation is pessimistic: each composed leaf may add up to one interval (1e-4).
PLD_TOL = 2e-3


def rr(eps: float) -> dp_accounting.RandomizedResponseDpEvent:
    """Binary RR with ε: flip probability 1/(1+e^ε), dp-accounting noise parameter 2×that."""
    return dp_accounting.RandomizedResponseDpEvent(2.0 / (1.0 + math.exp(eps)), 2)


# ------------------------------------------------------------------ closed-form oracles (item 20)
@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0, 3.0])
def test_compose_rr_once_gives_its_epsilon(eps: float) -> None:
    """One binary RR(ε) composed once gives ε at δ = 0 (closed form) and at δ = 1e-9 (PLD)."""
    assert compose_epsilon([rr(eps)], 0.0) == pytest.approx(eps, abs=1e-12)
    assert compose_epsilon([rr(eps)], 1e-9) == pytest.approx(eps, abs=PLD_TOL)


@pytest.mark.parametrize("k", [3, 4])
def test_compose_k_ary_rr_matches_closed_form(k: int) -> None:
    """k-ary RR with noise p: ε = ln(1 + k(1−p)/p)."""
    event = dp_accounting.RandomizedResponseDpEvent(0.4, k)
    exact = math.log(1 + k * 0.6 / 0.4)
    assert pure_epsilon(event) == pytest.approx(exact)
    assert compose_epsilon([event], 1e-9) == pytest.approx(exact, abs=PLD_TOL)


def test_compose_laplace_k_fold_at_most_naive_sum() -> None:
    """k-fold Laplace(b): exactly k/b at δ = 0 and strictly below the naive sum at δ > 0."""
    event, k = dp_accounting.LaplaceDpEvent(2.0), 10
    assert compose_epsilon([(event, k)], 0.0) == pytest.approx(k / 2.0)
    tight = compose_epsilon([(event, k)], 1e-6)
    assert tight < naive_epsilon([(event, k)], 1e-6) == pytest.approx(k / 2.0)
    # Advanced composition (Dwork, Rothblum, Vadhan 2010) is a valid upper bound too.
    e0 = 0.5
    advanced = math.sqrt(2 * k * math.log(1 / 1e-6)) * e0 + k * e0 * math.expm1(e0)
    assert tight <= min(advanced, k * e0) + PLD_TOL


def test_compose_gaussian_once_close_to_analytic() -> None:
    """One Gaussian(σ) through RDP is ≥ the exact analytic ε (Balle & Wang) and within 40%."""
    sigma, delta = 2.0, 1e-5
    exact = get_epsilon_gaussian(sigma, delta)
    got = compose_epsilon([dp_accounting.GaussianDpEvent(sigma)], delta)
    assert exact <= got <= 1.4 * exact


def test_compose_gaussian_count_equals_scaled_noise() -> None:
    """k Gaussian(σ) releases = one Gaussian(σ/√k): RDP composition is exact for Gaussians."""
    a = compose_epsilon([(dp_accounting.GaussianDpEvent(4.0), 16)], 1e-5)
    b = compose_epsilon([dp_accounting.GaussianDpEvent(1.0)], 1e-5)
    assert a == pytest.approx(b, rel=1e-6)


def test_pld_self_composed_randomized_response_counts() -> None:
    """Regression: dp-accounting 0.6 PLDAccountant ignores `count` for RR; ours does not.

    BLIP's event is SelfComposedDpEvent(RR(ε/K), K); the upstream accountant reports ε/K.
    """
    event = dp_accounting.SelfComposedDpEvent(rr(0.5), 4)
    upstream = PLDAccountant(pa.NeighboringRelation.REPLACE_ONE).compose(event).get_epsilon(1e-9)
    ours = compose_epsilon([event], 1e-9)
    assert upstream == pytest.approx(0.5, abs=PLD_TOL)  # the upstream bug, pinned
    assert ours == pytest.approx(2.0, abs=PLD_TOL)
    # Fails (and should be revisited) the day dp-accounting fixes it.


def test_compose_mixed_rr_and_laplace() -> None:
    """RR and Laplace leaves compose (each under its own relation): ≤ sum, ≥ each part."""
    events = [(rr(1.0), 3), (dp_accounting.LaplaceDpEvent(1.0), 2)]
    eps = compose_epsilon(events, 1e-6)
    assert compose_epsilon([(rr(1.0), 3)], 1e-6) < eps <= 5.0 + PLD_TOL


def test_compose_non_private_is_infinite() -> None:
    """A NonPrivateDpEvent makes the composition ∞ (no ε)."""
    assert compose_epsilon([rr(1.0), dp_accounting.NonPrivateDpEvent()], 1e-6) == math.inf


def test_compose_rejects_bad_delta() -> None:
    """δ outside [0, 1) is a ValueError naming delta."""
    with pytest.raises(ValueError, match="delta"):
        compose_epsilon([rr(1.0)], 1.0)


# ------------------------------------------------------------------------------ supports()
def test_check_supported_names_the_subevent() -> None:
    """An unsupported subevent fails before the run with its name in the message (item 3)."""
    bad = dp_accounting.ComposedDpEvent([rr(1.0), dp_accounting.UnsupportedDpEvent()])
    assert not supports(bad)
    with pytest.raises(UnsupportedEventError, match="caused by subevent UnsupportedDpEvent"):
        check_supported(bad)


def test_check_supported_accepts_non_private_and_known_events() -> None:
    """NonPrivate (no guarantee, reported as such) and RR/Laplace/Gaussian are supported."""
    for event in (
        dp_accounting.NonPrivateDpEvent(),
        rr(1.0),
        dp_accounting.LaplaceDpEvent(1.0),
        dp_accounting.GaussianDpEvent(1.0),
        dp_accounting.NoOpDpEvent(),
    ):
        check_supported(event)


def test_ledger_unsupported_event_reported_not_composed() -> None:
    """An UnsupportedDpEvent is recorded; summary says no ε, epsilon() raises naming it."""
    ledger = PrivacyLedger()
    ledger.record("u", dp_accounting.UnsupportedDpEvent())
    s = ledger.summary(1e-6)
    assert s["epsilon"] is None and "UnsupportedDpEvent" in s["reason"]
    with pytest.raises(UnsupportedEventError, match="caused by subevent"):
        ledger.epsilon("u", 1e-6)


@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_check_mechanism_passes_registry(name: str) -> None:
    """Every registered mechanism passes the pre-run gate with its default parameters."""
    mech = make_mechanism(name, {"n_items": 1682} if name == "jlt" else {})
    check_mechanism(mech)


def test_check_mechanism_refuses_claim_without_composable_event() -> None:
    """A mechanism claiming ε-DP with an event the accountant lacks fails before the run."""

    class Claims(OptimisedUnaryEncoding):
        def event(self) -> dp_accounting.DpEvent:
            return dp_accounting.UnsupportedDpEvent()

    with pytest.raises(UnsupportedEventError, match="caused by subevent UnsupportedDpEvent"):
        check_mechanism(Claims(1.0))


@pytest.mark.parametrize(
    ("name", "params", "expected"),
    [
        ("blip", {"epsilon": 8.0}, 8.0),
        ("oue", {"epsilon": 2.0}, 2.0),
        ("laplace_second_order", {"epsilon": 1.5}, 1.5),
    ],
)
def test_registry_pure_events_compose_to_claim(
    name: str, params: dict[str, float], expected: float
) -> None:
    """One release of each pure mechanism composes to its claimed ε (δ = 0 exact, PLD close)."""
    mech = make_mechanism(name, params)
    assert mech.privacy().epsilon == expected
    assert compose_epsilon([mech.event()], 0.0) == pytest.approx(expected, rel=1e-9)
    assert compose_epsilon([mech.event()], 1e-9) == pytest.approx(expected, abs=PLD_TOL * 20)


def test_registry_jlt_event_matches_tight_epsilon() -> None:
    """JLT's Gaussian event through RDP is ≥ its exact (analytic) ε and within 40%."""
    mech = make_mechanism("jlt", {"epsilon": 1.0, "n_items": 1682})
    tight = mech.tight_epsilon()  # type: ignore[attr-defined]
    got = compose_epsilon([mech.event()], mech.privacy().delta or 0.0)
    assert tight <= got <= 1.4 * tight


def test_summary_element_wise_statement() -> None:
    """PMD (element-wise, UnsupportedDpEvent): reason names element-wise privacy."""
    mech = make_mechanism("pmd")
    ledger = PrivacyLedger()
    ledger.record("u", mech.event())
    s = ledger.summary(1e-6, mech.privacy())
    assert s["epsilon"] is None and "element-wise" in s["reason"]


# ------------------------------------------------------------------------ contract (item 18)
class LedgerContract:
    """Properties every (event family × ledger) must satisfy."""

    __test__ = False
    delta = 1e-6

    def make_event(self) -> dp_accounting.DpEvent:
        raise NotImplementedError

    def test_composition_is_monotone_in_count(self) -> None:
        """More releases never lower a user's ε."""
        ledger = PrivacyLedger()
        for count in (1, 2, 5):
            ledger.record(count, self.make_event(), count=count)
        eps = [ledger.epsilon(c, self.delta) for c in (1, 2, 5)]
        assert eps[0] <= eps[1] <= eps[2]

    def test_composed_at_most_naive_sum(self) -> None:
        """The accountant's ε never exceeds basic composition (up to PLD rounding)."""
        ledger = PrivacyLedger()
        ledger.record("u", self.make_event(), count=7)
        assert ledger.epsilon("u", self.delta) <= ledger.naive_epsilon("u", self.delta) + PLD_TOL

    def test_same_ledger_same_epsilon(self) -> None:
        """Two users with the same releases get the same ε (order of entries irrelevant)."""
        ledger = PrivacyLedger()
        ledger.record("a", self.make_event(), count=2, purpose="predict")
        ledger.record("a", self.make_event(), purpose="profile")
        ledger.record("b", self.make_event(), purpose="profile")
        ledger.record("b", self.make_event(), count=2, purpose="predict")
        assert ledger.epsilon("a", self.delta) == ledger.epsilon("b", self.delta)

    def test_summary_has_report_keys(self) -> None:
        """summary() gives the report.json privacy block."""
        ledger = PrivacyLedger()
        ledger.record(0, self.make_event())
        ledger.record(1, self.make_event(), count=3)
        s = ledger.summary(self.delta)
        assert set(s) >= {
            "kind",
            "epsilon_per_release",
            "delta",
            "per_user_epsilon",
            "naive_sum",
            "accountant",
        }
        assert s["per_user_epsilon"]["max"] == ledger.epsilon(1, self.delta)
        assert s["per_user_epsilon"]["median"] == pytest.approx(
            (ledger.epsilon(0, self.delta) + ledger.epsilon(1, self.delta)) / 2
        )


class TestLedgerRandomizedResponse(LedgerContract):
    __test__ = True

    def make_event(self) -> dp_accounting.DpEvent:
        return dp_accounting.SelfComposedDpEvent(rr(0.25), 4)  # BLIP-shaped, ε = 1


class TestLedgerLaplace(LedgerContract):
    __test__ = True

    def make_event(self) -> dp_accounting.DpEvent:
        return dp_accounting.LaplaceDpEvent(2.0)


class TestLedgerGaussian(LedgerContract):
    __test__ = True

    def make_event(self) -> dp_accounting.DpEvent:
        return dp_accounting.GaussianDpEvent(3.0)


# ------------------------------------------------------------------------------- summary()
def test_summary_pure_rr_ledger() -> None:
    """BLIP-like profile release + 0–2 Predict queries: per-user max/median and naive sums."""
    ledger = PrivacyLedger()
    blip = dp_accounting.SelfComposedDpEvent(rr(0.5), 4)  # ε = 2 per release
    for user in range(5):
        ledger.record(user, blip, purpose="profile")
        if user % 3:
            ledger.record(user, blip, count=user % 3, purpose="predict")
    s = ledger.summary(1e-6, PrivacyStatement("pure", 2.0, 0.0, "one item added or removed"))
    assert s["kind"] == "pure" and s["accountant"] == "pld" and s["users"] == 5
    assert s["epsilon_per_release"] == 2.0
    assert s["naive_sum"] == {"max": pytest.approx(6.0), "median": pytest.approx(4.0)}
    assert s["per_user_epsilon"]["max"] <= 6.0 + PLD_TOL
    assert s["per_user_epsilon"]["median"] <= s["per_user_epsilon"]["max"]


def test_summary_gaussian_ledger_uses_rdp() -> None:
    """Only Gaussian events → the RDP accountant, kind approximate, naive sum ≥ composed."""
    ledger = PrivacyLedger()
    for user in range(3):
        ledger.record(user, dp_accounting.GaussianDpEvent(5.0), count=user + 1)
    s = ledger.summary(1e-5)
    assert s["accountant"] == "rdp" and s["kind"] == "approximate"
    assert s["per_user_epsilon"]["max"] <= s["naive_sum"]["max"]


def test_summary_non_private_gives_reason_not_number() -> None:
    """RPT-like (NonPrivateDpEvent) releases: epsilon None and a reason, no ∞ printed."""
    ledger = PrivacyLedger()
    ledger.record("u", dp_accounting.NonPrivateDpEvent(), purpose="profile")
    s = ledger.summary(1e-6)
    assert s["epsilon"] is None and "non-private" in s["reason"] and "profile" in s["reason"]


def test_summary_statement_without_claim() -> None:
    """A mechanism statement of kind "none" is reported as such, with its notes."""
    ledger = PrivacyLedger()
    ledger.record("u", dp_accounting.NonPrivateDpEvent())
    s = ledger.summary(1e-6, PrivacyStatement("none", None, None, "not applicable", "RPT."))
    assert s["epsilon"] is None and "no differential-privacy claim" in s["reason"]


def test_ledger_composed_event_round_trips() -> None:
    """composed_event() rebuilds the user's ledger as one dp-accounting event."""
    ledger = PrivacyLedger()
    ledger.record("u", rr(1.0))
    ledger.record("u", rr(1.0), count=2, purpose="predict")
    assert compose_epsilon([ledger.composed_event("u")], 0.0) == pytest.approx(3.0)
    assert [e.purpose for e in ledger.entries("u")] == ["profile", "predict"]


def test_ledger_rejects_bad_count() -> None:
    """count must be a positive integer."""
    with pytest.raises(ValueError, match="count"):
        PrivacyLedger().record("u", rr(1.0), count=0)


# ------------------------------------------------------ one closed form for pure events
# Before shared/accounting/, `events.pure_leaf_epsilon` and `accountant.pure_epsilon` both wrote
# the pure ε down and disagreed at the edges; each case below pins the value the math gives
# (docs/decisions/privacy.md).
RR = dp_accounting.RandomizedResponseDpEvent
DLAP = dp_accounting.dp_event.DiscreteLaplaceDpEvent
PURE_CASES = [
    # k = 1: the only bucket is output whatever the input (accountant had ln(1/p), ∞ at p = 0).
    pytest.param(RR(0.5, 1), 0.0, id="rr-one-bucket"),
    pytest.param(RR(0.0, 1), 0.0, id="rr-one-bucket-no-noise"),
    pytest.param(RR(1.0, 2), 0.0, id="rr-uniform-output"),
    pytest.param(RR(0.0, 2), math.inf, id="rr-no-noise"),
    pytest.param(RR(0.4, 3), math.log(1 + 3 * 0.6 / 0.4), id="rr-k-ary"),
    pytest.param(dp_accounting.LaplaceDpEvent(0.0), math.inf, id="laplace-no-noise"),
    pytest.param(dp_accounting.LaplaceDpEvent(2.0), 0.5, id="laplace"),
    # Discrete Laplace: ε = aΔ (events had no closed form); a = 0 is the infinite-noise limit.
    pytest.param(DLAP(0.5, 2), 1.0, id="discrete-laplace"),
    pytest.param(DLAP(0.0, 1), 0.0, id="discrete-laplace-a0"),
    # Non-leaf events (both had None).
    pytest.param(dp_accounting.NoOpDpEvent(), 0.0, id="no-op"),
    pytest.param(dp_accounting.NonPrivateDpEvent(), math.inf, id="non-private"),
    pytest.param(dp_accounting.SelfComposedDpEvent(rr(0.5), 4), 2.0, id="self-composed"),
    pytest.param(
        dp_accounting.SelfComposedDpEvent(dp_accounting.LaplaceDpEvent(1.0), 0),
        0.0,
        id="self-composed-zero-times",
    ),
    pytest.param(
        dp_accounting.ComposedDpEvent(
            [rr(1.0), dp_accounting.LaplaceDpEvent(2.0), dp_accounting.NoOpDpEvent()]
        ),
        1.5,
        id="composed",
    ),
    pytest.param(
        dp_accounting.ComposedDpEvent(
            [dp_accounting.GaussianDpEvent(1.0), dp_accounting.NonPrivateDpEvent()]
        ),
        math.inf,
        id="composed-with-non-private",
    ),
]


@pytest.mark.parametrize(("event", "expected"), PURE_CASES)
def test_pure_epsilon_edge_cases(event: dp_accounting.DpEvent, expected: float) -> None:
    """Regression: the two closed forms disagreed at these edges; the one left is right."""
    assert pure_epsilon(event) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(
    "event",
    [
        pytest.param(dp_accounting.GaussianDpEvent(1.0), id="gaussian"),
        pytest.param(dp_accounting.ZCDpEvent(0.5), id="zcdp"),
        pytest.param(
            dp_accounting.ComposedDpEvent([rr(1.0), dp_accounting.GaussianDpEvent(1.0)]),
            id="composed-with-gaussian",
        ),
        pytest.param(dp_accounting.UnsupportedDpEvent(), id="unsupported"),
    ],
)
def test_pure_epsilon_is_none_for_events_that_are_not_pure(event: dp_accounting.DpEvent) -> None:
    """Approximate-DP and unsupported events have no closed-form pure ε."""
    assert pure_epsilon(event) is None


@pytest.mark.parametrize(("event", "expected"), PURE_CASES)
def test_every_evaluator_uses_the_one_closed_form(
    event: dp_accounting.DpEvent, expected: float
) -> None:
    """At δ = 0 the event ε, the composition and the ledger all give `pure_epsilon`."""
    assert event_epsilon(event, 0.0) == pytest.approx(expected, abs=1e-12)
    assert compose_epsilon([event], 0.0) == pytest.approx(expected, abs=1e-12)
    ledger = PrivacyLedger()
    ledger.record("u", event)
    assert ledger.epsilon("u", 0.0) == pytest.approx(expected, abs=1e-12)


def test_zero_epsilon_leaves_compose_to_zero_at_positive_delta() -> None:
    """Regression: ε = 0 leaves crashed or inflated the composition at δ > 0.

    RR with p = 1 reached dp-accounting's PLD, which rejects p = 1; discrete Laplace with a = 0
    was read as "no noise" (∞); a leaf self-composed 0 times was composed once by `event_epsilon`.
    """
    uniform, wide = RR(1.0, 2), DLAP(0.0, 1)
    never = dp_accounting.SelfComposedDpEvent(dp_accounting.LaplaceDpEvent(1.0), 0)
    for event in (uniform, wide, never):
        assert compose_epsilon([event], 1e-6) == 0.0
        assert event_epsilon(event, 1e-6) == 0.0
    assert compose_epsilon([uniform, rr(1.0)], 1e-9) == pytest.approx(1.0, abs=PLD_TOL)


def test_only_one_closed_form_remains() -> None:
    """Regression: `events.pure_leaf_epsilon` duplicated `accountant.pure_epsilon`."""
    from privrec.shared.accounting import events

    assert not hasattr(events, "pure_leaf_epsilon")
    assert not hasattr(events, "event_epsilon")


def test_weighted_median_is_the_median_of_the_repeated_values() -> None:
    """`weighted_median` gives `statistics.median` of the repeated list, the same float."""
    import random
    import statistics

    from privrec.shared.accounting.ledger import weighted_median

    rng = random.Random(3)
    for _ in range(200):
        values = [rng.choice([0.1, 0.25, 1 / 3, 2.0, 7.5]) for _ in range(rng.randint(1, 6))]
        weights = [rng.randint(0, 4) for _ in values]
        if not sum(weights):
            weights[0] = 1
        repeated = [v for v, n in zip(values, weights, strict=True) for _ in range(n)]
        assert weighted_median(values, weights) == statistics.median(repeated)
    with pytest.raises(statistics.StatisticsError):
        weighted_median([1.0], [0])


def test_weighted_summary_equals_every_user_recorded_alone() -> None:
    """A ledger whose users stand for many identical users (`summary(weights=...)`) reports
    what recording each of them alone reports: ε's median and max, naive sums, user count."""
    alone, grouped = PrivacyLedger(), PrivacyLedger()
    ledgers = {"a": [(rr(1.0), 1)], "b": [(rr(1.0), 1), (rr(0.5), 3)], "c": [(rr(2.0), 2)]}
    weights = {"a": 5, "b": 2, "c": 4}
    for key, entries in ledgers.items():
        for event, count in entries:
            grouped.record(key, event, count=count)
            for i in range(weights[key]):
                alone.record(f"{key}{i}", event, count=count)
    assert grouped.summary(1e-6, weights=weights) == alone.summary(1e-6)
    assert grouped.summary(1e-6, weights=weights)["users"] == 11
