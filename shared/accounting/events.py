"""dp-accounting events of the mechanisms, and the one-release ε an event certifies.

Conventions shared with the accountant (`shared.accounting.accountant`): every mechanism normalises
its event to its own stated neighbouring relation, and each event type is composed under the
dp-accounting relation its PLD is defined for:

  * `RandomizedResponseDpEvent(noise_parameter=q, num_buckets=k)` under REPLACE_ONE: with
    probability 1 − q the input bucket is kept, with probability q a uniform bucket is output.
    For k = 2 the flip probability is q/2, so a bit flipped with probability f is
    `RandomizedResponseDpEvent(2f, 2)` and its ε is ln((1 − f)/f).
  * `LaplaceDpEvent(s/Δ₁)` and `GaussianDpEvent(σ/Δ₂)` under ADD_OR_REMOVE_ONE, with Δ the
    sensitivity under the mechanism's stated relation.

`mechanism_accounting_relation(mech)` says which relation a mechanism's event is meant for.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import dp_accounting
from dp_accounting.gaussian_mechanism import get_epsilon_gaussian
from dp_accounting.pld import privacy_loss_distribution as _pld
from dp_accounting.privacy_accountant import NeighboringRelation

if TYPE_CHECKING:  # the mechanisms import this module: a runtime import would be a cycle
    from privrec.shared.mechanisms.base import Mechanism


def binary_rr_event(flip_probability: float) -> dp_accounting.DpEvent:
    """A bit XOR-ed with Bernoulli(f): dp-accounting's 2-bucket RR with noise parameter 2f.

    f = 1/2 (ε = 0) releases pure noise: `NoOpDpEvent` (dp-accounting's PLD rejects q = 1).
    """
    if not 0.0 <= flip_probability <= 0.5:
        raise ValueError(f"`flip_probability` must be in [0, 1/2], got {flip_probability!r}")
    if flip_probability == 0.5:
        return dp_accounting.NoOpDpEvent()
    return dp_accounting.RandomizedResponseDpEvent(
        noise_parameter=2.0 * flip_probability, num_buckets=2
    )


def pure_dp_dominating_event(epsilon: float) -> dp_accounting.DpEvent:
    """Binary randomized response with ε: a dominating pair for *every* ε-DP mechanism.

    Kairouz, Oh & Viswanath ("The composition theorem for differential privacy", ICML 2015,
    §2): the privacy region of any ε-DP mechanism lies inside that of binary RR with the same
    ε. Accounting an ε-DP release as this event is therefore exact at δ = 0 and conservative for
    δ > 0 (used where dp-accounting has no event of the mechanism's own shape, e.g. OUE's
    asymmetric bits).
    """
    return binary_rr_event(1.0 / (1.0 + math.exp(epsilon)))


def mechanism_accounting_relation(mech: Mechanism) -> NeighboringRelation:
    """The dp-accounting relation `mech.event()` is normalised to (ADD_OR_REMOVE_ONE if unset)."""
    rel: object = getattr(mech, "accounting_relation", None)
    return rel if isinstance(rel, NeighboringRelation) else NeighboringRelation.ADD_OR_REMOVE_ONE


def _leaves(
    event: dp_accounting.DpEvent, count: int = 1
) -> list[tuple[dp_accounting.DpEvent, int]]:
    if isinstance(event, dp_accounting.SelfComposedDpEvent):
        return _leaves(event.event, count * event.count)
    if isinstance(event, dp_accounting.ComposedDpEvent):
        return [leaf for e in event.events for leaf in _leaves(e, count)]
    return [(event, count)]


def pure_leaf_epsilon(event: dp_accounting.DpEvent) -> float | None:
    """Closed-form ε of a pure-DP leaf (RR or Laplace), None for other events.

    RR over k buckets with noise q: ln((1 − q + q/k)/(q/k)); Laplace with multiplier s: 1/s.
    """
    if isinstance(event, dp_accounting.RandomizedResponseDpEvent):
        q, k = event.noise_parameter, event.num_buckets
        if k == 1 or q == 1.0:
            return 0.0
        return math.inf if q == 0.0 else math.log((1.0 - q + q / k) / (q / k))
    if isinstance(event, dp_accounting.LaplaceDpEvent):
        return math.inf if event.noise_multiplier == 0 else 1.0 / event.noise_multiplier
    return None


def event_epsilon(event: dp_accounting.DpEvent, delta: float, *, interval: float = 1e-4) -> float:
    """ε at `delta` of one release described by `event` (math.inf if it is not private).

    At δ = 0 with only pure leaves (RR, Laplace) it is the exact sum of the leaves' ε (the
    worst-case outputs of independent leaves occur together). Otherwise it is built from PLDs
    leaf by leaf (pessimistic discretisation of width `interval`; PLD tail truncation makes δ = 0
    itself infinite, so ask for a tiny δ instead), because dp-accounting 0.6's `PLDAccountant`
    ignores the count of a self-composed RR event. A single Gaussian leaf uses the analytic
    Gaussian mechanism (Balle & Wang 2018).

    Raises:
        ValueError: for an event type this helper cannot evaluate (e.g. UnsupportedDpEvent).
    """
    leaves = _leaves(event)
    if any(isinstance(e, dp_accounting.NonPrivateDpEvent) for e, _ in leaves):
        return math.inf
    leaves = [(e, c) for e, c in leaves if not isinstance(e, dp_accounting.NoOpDpEvent)]
    if not leaves:
        return 0.0
    pure = [(pure_leaf_epsilon(e), c) for e, c in leaves]
    if delta == 0.0 and all(x is not None for x, _ in pure):
        return float(sum((x or 0.0) * c for x, c in pure))
    # Leaves with ε = 0 (e.g. RR with q = 1) add nothing; dp-accounting's PLD rejects them.
    leaves = [leaf for leaf, (x, _) in zip(leaves, pure, strict=True) if x != 0.0]
    if not leaves:
        return 0.0
    if len(leaves) == 1 and isinstance(leaves[0][0], dp_accounting.GaussianDpEvent):
        e, c = leaves[0]
        if e.noise_multiplier == 0:
            return math.inf
        return float(get_epsilon_gaussian(e.noise_multiplier / math.sqrt(c), delta))
    total: _pld.PrivacyLossDistribution | None = None
    for e, c in leaves:
        if isinstance(e, dp_accounting.RandomizedResponseDpEvent):
            if e.noise_parameter == 0:
                return math.inf
            p = _pld.from_randomized_response(
                noise_parameter=e.noise_parameter,
                num_buckets=e.num_buckets,
                value_discretization_interval=interval,
                neighboring_relation=NeighboringRelation.REPLACE_ONE,
            )
        elif isinstance(e, dp_accounting.LaplaceDpEvent):
            if e.noise_multiplier == 0:
                return math.inf
            p = _pld.from_laplace_mechanism(
                parameter=e.noise_multiplier, value_discretization_interval=interval
            )
        elif isinstance(e, dp_accounting.GaussianDpEvent):
            if e.noise_multiplier == 0:
                return math.inf
            p = _pld.from_gaussian_mechanism(
                standard_deviation=e.noise_multiplier, value_discretization_interval=interval
            )
        else:
            raise ValueError(f"cannot evaluate the ε of {e!r}")
        p = p.self_compose(c) if c > 1 else p
        total = p if total is None else total.compose(p)
    assert total is not None
    return float(total.get_epsilon_for_delta(delta))


__all__ = [
    "NeighboringRelation",
    "binary_rr_event",
    "event_epsilon",
    "mechanism_accounting_relation",
    "pure_dp_dominating_event",
    "pure_leaf_epsilon",
]
