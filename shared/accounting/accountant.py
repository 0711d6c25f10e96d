"""Composition of privacy events with dp-accounting, and the gate before a run.

The ε of one event, of a composition, and of a user's flattened ledger (the per-user ledger
itself is `shared.accounting.ledger.PrivacyLedger`), beside the naive sum of the per-release
ε's (basic sequential composition, Dwork & Roth 2014, Thm 3.16); and `check_mechanism`, which
refuses before a run a mechanism whose claim cannot be composed.

Which accountant:
  * Randomized-response, Laplace and discrete-Laplace events (and any ledger that mixes them
    with Gaussian events) are composed through privacy-loss distributions (PLD; Koskela et al.
    2020, Doroshenko et al. 2022) built with `dp_accounting.pld.privacy_loss_distribution`.
  * A ledger made only of Gaussian (and zCDP) events is composed with
    `dp_accounting.rdp.RdpAccountant` (Mironov 2017), the usual accountant for Gaussian noise.

Why the PLDs are built here rather than through `dp_accounting.pld.PLDAccountant`:
  * dp-accounting 0.6.0's `PLDAccountant` ignores `count` for `RandomizedResponseDpEvent`:
    `SelfComposedDpEvent(RR(ε), 4)` composes to ε, not 4ε (see the regression test
    `test_pld_self_composed_randomized_response_counts`). BLIP's event is exactly such a
    K-fold self-composition, so that accountant would under-report its ε by a factor K.
  * `PLDAccountant` takes one neighbouring relation for the whole ledger, yet RR is only
    defined for REPLACE_ONE and Laplace only for ADD_OR_REMOVE_ONE / REPLACE_SPECIAL. Each
    mechanism normalises its event to its own stated neighbouring relation (the event's noise
    parameter is relative to the sensitivity under that relation), so each leaf here uses the
    relation its PLD constructor is defined for: REPLACE_ONE for RR, ADD_OR_REMOVE_ONE for the
    additive mechanisms.

One closed form: `pure_epsilon` is the only place the ε of a pure-DP event is written down
(k-ary RR, Laplace, discrete Laplace, and any composition of them). The δ = 0 answers of
`compose_epsilon`, `event_epsilon` and `naive_epsilon`, and which leaves count as trivial (ε = 0)
or non-private (ε = ∞) when a ledger is flattened, all come from it.

Conventions: ε in nats; δ ∈ [0, 1). A ledger containing a `NonPrivateDpEvent` (e.g. RPT) has
no ε (∞ here; the ledger's `summary` says so with a reason).
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

import dp_accounting
from dp_accounting import privacy_accountant as _pa
from dp_accounting.gaussian_mechanism import get_epsilon_gaussian
from dp_accounting.pld import privacy_loss_distribution as _pld
from dp_accounting.rdp import RdpAccountant

from privrec.shared.errors import UnsupportedEventError

if TYPE_CHECKING:  # the mechanisms import this package: a runtime import would be a cycle
    from privrec.shared.mechanisms.base import Mechanism

_Rel = _pa.NeighboringRelation

#: Leaf events the PLD path composes.
PLD_LEAVES: tuple[type[dp_accounting.DpEvent], ...] = (
    dp_accounting.RandomizedResponseDpEvent,
    dp_accounting.LaplaceDpEvent,
    dp_accounting.dp_event.DiscreteLaplaceDpEvent,
    dp_accounting.GaussianDpEvent,
)
#: Leaf events the RDP path composes (used when the ledger holds only these).
RDP_LEAVES: tuple[type[dp_accounting.DpEvent], ...] = (
    dp_accounting.GaussianDpEvent,
    dp_accounting.ZCDpEvent,
)
#: Pure ε-DP leaves (their per-release ε does not depend on δ).
PURE_LEAVES: tuple[type[dp_accounting.DpEvent], ...] = (
    dp_accounting.RandomizedResponseDpEvent,
    dp_accounting.LaplaceDpEvent,
    dp_accounting.dp_event.DiscreteLaplaceDpEvent,
)


@dataclasses.dataclass(frozen=True, slots=True)
class FlatLedger:
    """A ledger flattened to leaf events with multiplicities (and what blocks composition)."""

    leaves: tuple[tuple[dp_accounting.DpEvent, int], ...]
    non_private: bool
    unsupported: dp_accounting.DpEvent | None
    key: tuple[tuple[str, int], ...] = dataclasses.field(init=False, compare=False)
    """The leaves by repr: equal for equal multisets of releases (the composition cache's key)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", tuple((repr(e), c) for e, c in self.leaves))


def flatten_ledger(entries: Iterable[tuple[dp_accounting.DpEvent, int]]) -> FlatLedger:
    """Expand Composed/SelfComposed events into (leaf, total count), merging equal leaves."""
    counts: Counter[str] = Counter()
    first: dict[str, dp_accounting.DpEvent] = {}
    non_private = False
    unsupported: dp_accounting.DpEvent | None = None
    stack: list[tuple[dp_accounting.DpEvent, int]] = list(entries)
    while stack:
        event, count = stack.pop()
        if count == 0 or isinstance(event, dp_accounting.NoOpDpEvent):
            continue
        if isinstance(event, dp_accounting.SelfComposedDpEvent):
            stack.append((event.event, event.count * count))
        elif isinstance(event, dp_accounting.ComposedDpEvent):
            stack.extend((e, count) for e in event.events)
        elif isinstance(event, dp_accounting.NonPrivateDpEvent):
            non_private = True
        elif isinstance(event, PLD_LEAVES + RDP_LEAVES):
            eps = _leaf_epsilon(event)
            if eps == 0.0:
                continue  # releases nothing about the input (e.g. RR over one bucket)
            if eps == math.inf or _is_noiseless_gaussian(event):
                non_private = True
                continue
            key = repr(event)
            counts[key] += count
            first.setdefault(key, event)
        elif unsupported is None:
            unsupported = event
    leaves = tuple((first[k], counts[k]) for k in sorted(counts))
    return FlatLedger(leaves, non_private, unsupported)


def _leaf_epsilon(event: dp_accounting.DpEvent) -> float | None:
    """The closed-form ε of one pure leaf (see `pure_epsilon`), None for any other event."""
    if isinstance(event, dp_accounting.RandomizedResponseDpEvent):
        p, k = event.noise_parameter, event.num_buckets
        if k == 1:
            return 0.0  # one bucket: the output is that bucket whatever the input
        return math.inf if p == 0 else math.log1p(k * (1.0 - p) / p)
    if isinstance(event, dp_accounting.LaplaceDpEvent):
        return math.inf if event.noise_multiplier == 0 else 1.0 / event.noise_multiplier
    if isinstance(event, dp_accounting.dp_event.DiscreteLaplaceDpEvent):
        return float(event.noise_parameter * event.sensitivity)
    return None


def _is_noiseless_gaussian(event: dp_accounting.DpEvent) -> bool:
    """A Gaussian release with zero noise is the data itself."""
    return isinstance(event, dp_accounting.GaussianDpEvent) and event.noise_multiplier == 0


def composition_path(flat: FlatLedger) -> str:
    """The accountant: "rdp" when every leaf is Gaussian/zCDP, else "pld" (ledger supported)."""
    if flat.leaves and all(isinstance(e, RDP_LEAVES) for e, _ in flat.leaves):
        return "rdp"
    return "pld"


def check_supported(event: dp_accounting.DpEvent) -> None:
    """Fail before a run starts if the accountant cannot compose `event`.

    `NonPrivateDpEvent` is accepted (the run then reports "no DP guarantee"); anything the
    accountant has no composition rule for is not.

    Raises:
        UnsupportedEventError: naming the offending subevent.
    """
    flat = flatten_ledger([(event, 1)])
    if flat.unsupported is not None:
        raise UnsupportedEventError(
            f"the privacy accountant cannot compose {event!r}: caused by subevent "
            f"{flat.unsupported!r}"
        )
    zcdp = [e for e, _ in flat.leaves if isinstance(e, dp_accounting.ZCDpEvent)]
    if zcdp and any(not isinstance(e, RDP_LEAVES) for e, _ in flat.leaves):
        raise UnsupportedEventError(
            f"the privacy accountant cannot compose {event!r}: zCDP events only compose with "
            f"Gaussian ones, caused by subevent {zcdp[0]!r}"
        )


def check_mechanism(mechanism: Mechanism) -> None:
    """Pre-run gate: a mechanism that claims DP must have an event the accountant composes.

    Mechanisms without a DP claim (kind "none" or "element-wise": RPT, RRT, PMD, PMC, exact
    second order) pass; their report states that no ε exists.

    `privrec sim` calls it before any node starts (`sim.run`), so such a setting fails with one
    error line rather than a report without an ε.

    Raises:
        UnsupportedEventError: the mechanism claims ε-DP or (ε, δ)-DP but its event cannot be
            composed, naming the mechanism and the subevent (STYLE item 3).
    """
    kind = mechanism.privacy().kind
    if kind in ("pure", "approximate"):
        try:
            check_supported(mechanism.event())
        except UnsupportedEventError as exc:
            raise UnsupportedEventError(
                f"mechanism.name: {mechanism.name!r} claims {kind} DP, but {exc}"
            ) from exc


def supports(event: dp_accounting.DpEvent) -> bool:
    """True iff `check_supported(event)` would pass."""
    try:
        check_supported(event)
    except UnsupportedEventError:
        return False
    return True


# ----------------------------------------------------------------------------- composition
def _leaf_pld(
    event: dp_accounting.DpEvent, count: int, interval: float
) -> _pld.PrivacyLossDistribution:
    """The PLD of `count` compositions of one leaf event (pessimistic discretisation)."""
    if isinstance(event, dp_accounting.RandomizedResponseDpEvent):
        pld = _pld.from_randomized_response(
            noise_parameter=event.noise_parameter,
            num_buckets=event.num_buckets,
            value_discretization_interval=interval,
            neighboring_relation=_Rel.REPLACE_ONE,
        )
        return pld.self_compose(count) if count > 1 else pld
    if isinstance(event, dp_accounting.LaplaceDpEvent):
        pld = _pld.from_laplace_mechanism(
            parameter=event.noise_multiplier, value_discretization_interval=interval
        )
        return pld.self_compose(count) if count > 1 else pld
    if isinstance(event, dp_accounting.dp_event.DiscreteLaplaceDpEvent):
        pld = _pld.from_discrete_laplace_mechanism(
            parameter=event.noise_parameter,
            sensitivity=event.sensitivity,
            value_discretization_interval=interval,
        )
        return pld.self_compose(count) if count > 1 else pld
    if isinstance(event, dp_accounting.GaussianDpEvent):
        # count Gaussian releases of sensitivity 1 = one release with σ/√count (exact).
        return _pld.from_gaussian_mechanism(
            standard_deviation=event.noise_multiplier / math.sqrt(count),
            value_discretization_interval=interval,
            neighboring_relation=_Rel.ADD_OR_REMOVE_ONE,
        )
    raise UnsupportedEventError(f"no PLD for subevent {event!r}")  # pragma: no cover


def compose_flat(flat: FlatLedger, delta: float, interval: float) -> float:
    """ε at `delta` of a supported, private flattened ledger."""
    if not flat.leaves:
        return 0.0
    if delta == 0.0:
        # At δ = 0 the worst-case losses of pure mechanisms add exactly (and the PLD's tail
        # truncation would report ∞); approximate mechanisms have no finite ε at δ = 0.
        pure = all(isinstance(e, PURE_LEAVES) for e, _ in flat.leaves)
        return naive_epsilon(flat, 0.0) if pure else math.inf
    if composition_path(flat) == "rdp":
        acc = RdpAccountant()
        for event, count in flat.leaves:
            acc.compose(event, count)
        return float(acc.get_epsilon(delta))
    return max(0.0, _pld_epsilon(flat, delta, interval))


def _pld_epsilon(flat: FlatLedger, delta: float, interval: float) -> float:
    """ε at `delta` of the PLD composition of every leaf of `flat` (at least one leaf)."""
    total: _pld.PrivacyLossDistribution | None = None
    for event, count in flat.leaves:
        pld = _leaf_pld(event, count, interval)
        total = pld if total is None else total.compose(pld)
    assert total is not None
    return float(total.get_epsilon_for_delta(delta))


def pure_epsilon(event: dp_accounting.DpEvent) -> float | None:
    """Closed-form ε of a pure ε-DP event (at δ = 0), or None if the event is not pure ε-DP.

    Leaves:

    * k-ary RR with noise parameter p: the output equals the input w.p. 1 − p + p/k and any
      other bucket w.p. p/k, so ε = ln(1 + k(1 − p)/p) (Warner 1965; Kairouz et al. 2016).
      Edge cases: p = 0 (no noise, k ≥ 2) gives ∞; p = 1 (a uniform bucket) gives 0; k = 1
      gives 0 for every p, since the only bucket is output whatever the input.
    * Laplace with noise multiplier b (scale / L1-sensitivity): ε = 1/b (Dwork et al. 2006);
      b = 0 (no noise) gives ∞.
    * Discrete Laplace DLap(a) with sensitivity Δ, P(x) ∝ exp(−a|x|): ε = aΔ. `a` is a decay
      rate, not a scale: a → 0 is ever wider noise, so ε → 0 (a → ∞ is no noise, ε → ∞).

    `NoOpDpEvent` has ε = 0 and `NonPrivateDpEvent` ε = ∞. A composition (`ComposedDpEvent`,
    `SelfComposedDpEvent`, with counts) of pure events has ε = Σ count·ε_leaf: the worst-case
    outputs of independent releases occur together, so the sum is exact at δ = 0 (Dwork & Roth
    2014, Thm 3.16). A composition with a non-private part is ∞; one with a Gaussian, zCDP or
    unsupported part (and no non-private part) is not pure: None.
    """
    flat = flatten_ledger([(event, 1)])
    if flat.non_private:
        return math.inf
    if flat.unsupported is not None or not all(isinstance(e, PURE_LEAVES) for e, _ in flat.leaves):
        return None
    return naive_epsilon(flat, 0.0)


def naive_epsilon(
    flat_or_events: FlatLedger | Iterable[tuple[dp_accounting.DpEvent, int]], delta: float
) -> float:
    """Basic sequential composition: Σ count·ε_i (Dwork & Roth 2014, Thm 3.16).

    Pure leaves contribute their closed-form ε; the n approximate (Gaussian/zCDP) releases
    share δ equally, each contributing its exact ε at δ/n (analytic Gaussian mechanism,
    Balle & Wang 2018; zCDP via ε = ρ + 2√(ρ ln(1/δ)), Bun & Steinke 2016, Prop 1.3).
    """
    flat = (
        flat_or_events if isinstance(flat_or_events, FlatLedger) else flatten_ledger(flat_or_events)
    )
    n_approx = sum(c for e, c in flat.leaves if not isinstance(e, PURE_LEAVES))
    share = delta / n_approx if n_approx else 0.0
    total = 0.0
    for event, count in flat.leaves:
        eps = _leaf_epsilon(event)
        if eps is None and isinstance(event, dp_accounting.GaussianDpEvent):
            eps = (
                math.inf
                if share <= 0
                else float(get_epsilon_gaussian(event.noise_multiplier, share))
            )
        elif eps is None and isinstance(event, dp_accounting.ZCDpEvent):
            eps = (
                math.inf
                if share <= 0
                else (event.rho + event.xi + 2.0 * math.sqrt(event.rho * math.log(1.0 / share)))
            )
        assert eps is not None
        total += count * eps
    return total


def compose_epsilon(
    events: Iterable[tuple[dp_accounting.DpEvent, int] | dp_accounting.DpEvent],
    delta: float,
    *,
    value_discretization_interval: float = 1e-4,
) -> float:
    """ε at `delta` of the composition of `events` (each a DpEvent or a (DpEvent, count) pair).

    Returns math.inf if any event is non-private.

    Raises:
        ValueError: `delta` outside [0, 1).
        UnsupportedEventError: an event the accountant cannot compose, naming it.
    """
    check_delta(delta)
    pairs = [e if isinstance(e, tuple) else (e, 1) for e in events]
    for event, _ in pairs:
        check_supported(event)
    flat = flatten_ledger(pairs)
    if flat.non_private:
        return math.inf
    return compose_flat(flat, delta, value_discretization_interval)


def event_epsilon(event: dp_accounting.DpEvent, delta: float, *, interval: float = 1e-4) -> float:
    """ε at `delta` of one release described by `event` (math.inf if it is not private).

    The tightest ε stated for one release (the mechanisms' contract tests compare it with their
    claims): at δ = 0 it is `pure_epsilon(event)` (∞ if a part is Gaussian). Otherwise a single
    Gaussian leaf uses the analytic Gaussian mechanism (Balle & Wang 2018), and any other event
    is composed from PLDs leaf by leaf (pessimistic discretisation of width `interval`; PLD tail
    truncation makes δ = 0 itself infinite, so ask for a tiny δ instead). Unlike
    `compose_epsilon`, an all-Gaussian event with several leaves is composed by PLD, not RDP.

    Raises:
        ValueError: for an event type this helper cannot evaluate (e.g. UnsupportedDpEvent).
    """
    flat = flatten_ledger([(event, 1)])
    if flat.non_private:
        return math.inf
    unknown = [e for e, _ in flat.leaves if not isinstance(e, PLD_LEAVES)]
    if flat.unsupported is not None:
        unknown.insert(0, flat.unsupported)
    if unknown:
        raise ValueError(f"cannot evaluate the ε of {unknown[0]!r}")
    if not flat.leaves:
        return 0.0
    if delta == 0.0:
        return compose_flat(flat, 0.0, interval)
    if len(flat.leaves) == 1 and isinstance(flat.leaves[0][0], dp_accounting.GaussianDpEvent):
        gaussian, count = flat.leaves[0]
        return float(get_epsilon_gaussian(gaussian.noise_multiplier / math.sqrt(count), delta))
    return _pld_epsilon(flat, delta, interval)


def check_delta(delta: float) -> None:
    """Refuse a δ outside [0, 1) (ValueError naming `delta`)."""
    if not 0.0 <= delta < 1.0:
        raise ValueError(f"`delta` must be in [0, 1), got {delta!r}")


__all__ = [
    "PLD_LEAVES",
    "PURE_LEAVES",
    "RDP_LEAVES",
    "FlatLedger",
    "check_delta",
    "check_mechanism",
    "check_supported",
    "compose_epsilon",
    "compose_flat",
    "composition_path",
    "event_epsilon",
    "flatten_ledger",
    "naive_epsilon",
    "pure_epsilon",
    "supports",
]
