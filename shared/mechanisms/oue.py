"""OUE: optimised unary encoding of the user's item set (Wang et al. 2017), BLIP's LDP comparator.

The item set P ⊂ [m] is one-hot encoded as a vector of m bits, and each bit is reported
independently (Wang, Blocki, Li, Jha 2017, §4.4):

    Pr[out_j = 1] = p = 1/2             if j ∈ P,
    Pr[out_j = 1] = q                   if j ∉ P.

Two calibrations, chosen by the public parameter `relation`:

  * "replace" (default; Wang et al.'s OUE): q = 1/(e^ε + 1). Replacing one item by another
    changes two bits (1→0 and 0→1) and the likelihood ratio is at most
    p(1−q) / ((1−p)q) = e^ε: exactly ε-DP for "one item replaced by another". Under "one item
    added or removed" (one bit) the same release is ln((1 + e^ε)/2)-DP, which is < ε.
  * "add-remove": q = e^{−ε}/2 (p = 1/2 kept). One added or removed item changes one bit, with
    ratio max(p/q, (1−q)/(1−p)) = max(e^ε, 2 − e^{−ε}) = e^ε: exactly ε-DP under BLIP's own
    relation, so BLIP(ε) and OUE(ε, relation="add-remove") are compared at equal ε.

Event: dp-accounting has no event for asymmetric bits, so `event()` is binary randomized
response with the same ε, which dominates every ε-DP mechanism (Kairouz, Oh & Viswanath 2015):
exact at δ = 0, conservative at δ > 0. It is accounted under REPLACE_ONE.

Draw order: exactly m uniforms u_j from the user's generator, out_j = [u_j < p or q].

References:
    T. Wang, J. Blocki, N. Li, S. Jha, "Locally differentially private protocols for frequency
    estimation", USENIX Security 2017, §4.4 (OUE).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar, Literal, get_args

import numpy as np

from privrec.shared.accounting import dp
from privrec.shared.accounting.events import Relation, pure_dp_dominating_event
from privrec.shared.capabilities import PayloadKind, ReleaseKind, ReleaseScale
from privrec.shared.mechanisms.base import (
    BitPayload,
    Mechanism,
    Payload,
    PrivacyStatement,
    Profile,
    require_bits,
    require_payload,
)
from privrec.shared.mechanisms.params import check_param
from privrec.shared.types import FloatArray

OueRelation = Literal["replace", "add-remove"]
_RELATIONS: tuple[str, ...] = get_args(OueRelation)


def oue_probabilities(epsilon: float, relation: str = "replace") -> tuple[float, float]:
    """(p, q) = Pr[1 | item held], Pr[1 | item not held] for OUE at ε (see module docstring)."""
    if relation == "replace":
        return 0.5, 1.0 / (math.exp(epsilon) + 1.0)
    if relation == "add-remove":
        return 0.5, 0.5 * math.exp(-epsilon)
    raise ValueError(f"`relation` must be one of {_RELATIONS}, got {relation!r}")


class OptimisedUnaryEncoding(Mechanism):
    """OUE of the item set (Wang et al. 2017).

    Args:
        epsilon: ε ≥ 0 of one release under `relation`.
        relation: "replace" (standard OUE, q = 1/(e^ε+1)) or "add-remove" (q = e^{−ε}/2).
    """

    name = "oue"
    payload_field = "oue"
    releases = ReleaseKind(PayloadKind.BITS, ReleaseScale.ITEM_BITS)
    accounting_relation: ClassVar[Relation] = "REPLACE_ONE"

    def __init__(self, epsilon: float = 8.0, relation: OueRelation = "replace") -> None:
        self.epsilon = check_param("epsilon", epsilon, low=0.0)
        if relation not in _RELATIONS:
            raise ValueError(f"`relation` must be one of {_RELATIONS}, got {relation!r}")
        self.relation: OueRelation = relation
        self.p, self.q = oue_probabilities(self.epsilon, relation)

    def public_params(self) -> dict[str, Any]:
        """The public ε and neighbouring relation."""
        return {"epsilon": self.epsilon, "relation": self.relation}

    def _probs(self, profile: Profile) -> np.ndarray:
        probs = np.full(profile.n_items, self.q)
        probs[profile.items] = self.p
        return probs

    def release(self, profile: Profile, rng: np.random.Generator) -> BitPayload:
        """Each item's bit set with probability p = 1/2 if held, q if not (`oue_probabilities`)."""
        return BitPayload(rng.random(profile.n_items) < self._probs(profile))

    def epsilon_add_remove(self) -> float:
        """ε of this release for one item added or removed."""
        if self.relation == "add-remove":
            return self.epsilon
        return math.log((1.0 + math.exp(self.epsilon)) / 2.0)

    def privacy(self) -> PrivacyStatement:
        """ε-DP under the chosen neighbouring relation (Wang et al. 2017; the other: notes)."""
        if self.relation == "replace":
            neighbouring = "one item replaced by another"
            other = (
                f"Under 'one item added or removed' it is "
                f"ln((1+e^eps)/2) = {self.epsilon_add_remove():.6g}-DP."
            )
        else:
            neighbouring = "one item added or removed"
            other = "Under 'one item replaced by another' the bound is 2*eps."
        return PrivacyStatement(
            kind="pure",
            epsilon=self.epsilon,
            delta=0.0,
            neighbouring=neighbouring,
            notes=(
                f"OUE (Wang et al. 2017): p = {self.p:.6g}, q = {self.q:.6g}. {other} "
                "Event: binary randomized response with the same eps (dominates any eps-DP "
                "release; exact at delta = 0, conservative above), accounted under REPLACE_ONE."
            ),
        )

    def event(self) -> dp.DpEvent:
        """Binary randomized response at ε, which dominates any ε-DP release."""
        return pure_dp_dominating_event(self.epsilon)

    def estimate(self, payload: Payload, n_items: int) -> FloatArray:
        """Unbiased estimate of the item indicator: P[bit = 1] = q + (p − q)·x, so
        x̂ = (b − q)/(p − q) (Wang et al. 2017, Sec. 4)."""
        require_payload(payload, BitPayload, "oue")
        assert isinstance(payload, BitPayload)
        return (payload.bits.astype(np.float64) - self.q) / (self.p - self.q)

    def estimate_many(self, payloads: Sequence[Payload], n_items: int) -> FloatArray:
        """`estimate` of each release, on the stacked bits at once (the same arithmetic per
        element, so the same numbers)."""
        bit_payloads = [p for p in payloads if isinstance(p, BitPayload)]
        if not payloads or len(bit_payloads) < len(payloads):
            return super().estimate_many(payloads, n_items)
        bits = np.stack([p.bits for p in bit_payloads])
        return (bits.astype(np.float64) - self.q) / (self.p - self.q)

    def validate(self, payload: Payload, n_items: int) -> None:
        """Refuse a payload that is not n_items boolean bits."""
        require_bits(payload, "oue", n_items, f"the run's n_items {n_items}")


__all__ = ["OptimisedUnaryEncoding", "OueRelation", "oue_probabilities"]
