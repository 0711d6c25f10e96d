"""dp-accounting events of the mechanisms, and the neighbouring relation each is stated for.

Conventions shared with the accountant (`shared.accounting.accountant`): every mechanism normalises
its event to its own stated neighbouring relation, and each event type is composed under the
dp-accounting relation its PLD is defined for:

  * `RandomizedResponseDpEvent(noise_parameter=q, num_buckets=k)` under REPLACE_ONE: with
    probability 1 − q the input bucket is kept, with probability q a uniform bucket is output.
    For k = 2 the flip probability is q/2, so a bit flipped with probability f is
    `RandomizedResponseDpEvent(2f, 2)` and its ε is ln((1 − f)/f).
  * `LaplaceDpEvent(s/Δ₁)` and `GaussianDpEvent(σ/Δ₂)` under ADD_OR_REMOVE_ONE, with Δ the
    sensitivity under the mechanism's stated relation.

`mechanism_accounting_relation(mech)` says which relation a mechanism's event is meant for. What
an event is worth in ε is the accountant's business (`shared.accounting.accountant`: one closed
form for pure events, `pure_epsilon`, and `event_epsilon` / `compose_epsilon` at any δ).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal, get_args

from privrec.shared.accounting import dp

if TYPE_CHECKING:  # the mechanisms import this module: a runtime import would be a cycle
    from privrec.shared.mechanisms.base import Mechanism


def binary_rr_event(flip_probability: float) -> dp.DpEvent:
    """A bit XOR-ed with Bernoulli(f): dp-accounting's 2-bucket RR with noise parameter 2f.

    f = 1/2 (ε = 0) releases pure noise: `NoOpDpEvent` (dp-accounting's PLD rejects q = 1).
    """
    if not 0.0 <= flip_probability <= 0.5:
        raise ValueError(f"`flip_probability` must be in [0, 1/2], got {flip_probability!r}")
    if flip_probability == 0.5:
        return dp.NoOpDpEvent()
    return dp.RandomizedResponseDpEvent(noise_parameter=2.0 * flip_probability, num_buckets=2)


def pure_dp_dominating_event(epsilon: float) -> dp.DpEvent:
    """Binary randomized response with ε: a dominating pair for *every* ε-DP mechanism.

    Kairouz, Oh & Viswanath ("The composition theorem for differential privacy", ICML 2015,
    §2): the privacy region of any ε-DP mechanism lies inside that of binary RR with the same
    ε. Accounting an ε-DP release as this event is therefore exact at δ = 0 and conservative for
    δ > 0 (used where dp-accounting has no event of the mechanism's own shape, e.g. OUE's
    asymmetric bits).
    """
    return binary_rr_event(1.0 / (1.0 + math.exp(epsilon)))


Relation = Literal["ADD_OR_REMOVE_ONE", "REPLACE_ONE"]
"""A mechanism's `accounting_relation`: the name of a dp-accounting `NeighboringRelation` (a
name, so that declaring it does not import dp-accounting; see `shared.accounting.dp`)."""


def mechanism_accounting_relation(mech: Mechanism) -> dp.NeighboringRelation:
    """The dp-accounting relation `mech.event()` is normalised to (ADD_OR_REMOVE_ONE if unset)."""
    name: object = getattr(mech, "accounting_relation", "ADD_OR_REMOVE_ONE")
    if name not in get_args(Relation):
        raise ValueError(
            f"{type(mech).__name__}.accounting_relation must be one of {get_args(Relation)}, "
            f"got {name!r}"
        )
    return dp.NeighboringRelation[str(name)]


__all__ = [
    "Relation",
    "binary_rr_event",
    "mechanism_accounting_relation",
    "pure_dp_dominating_event",
]
