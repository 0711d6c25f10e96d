"""Tiny mechanisms with known privacy, for the accountant and audit tests.

They implement the `Mechanism` interface with a handful of output coordinates so an audit of
10⁵ releases runs in about a second; `BrokenToyBitRR` is the deliberately broken twin.
"""

from __future__ import annotations

import math
from typing import Any

import dp_accounting
import numpy as np

from privrec.shared.mechanisms.base import BitPayload, Mechanism, PrivacyStatement, Profile


class ToyBitRR(Mechanism):
    """Each item is one bit (1 iff rated), XOR-ed with Bernoulli(1/(1+e^ε)): ε-DP per item."""

    name = "toy_rr"
    payload_field = "bits"

    def __init__(self, epsilon: float = 1.0) -> None:
        self.epsilon = float(epsilon)

    def flip_probability(self) -> float:
        return 1.0 / (1.0 + math.exp(self.epsilon))

    def public_params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon}

    def release(self, profile: Profile, rng: np.random.Generator) -> BitPayload:
        bits = np.zeros(profile.n_items, dtype=bool)
        bits[profile.items] = True
        return BitPayload(bits ^ (rng.random(profile.n_items) < self.flip_probability()))

    def privacy(self) -> PrivacyStatement:
        return PrivacyStatement("pure", self.epsilon, 0.0, "one item added or removed")

    def event(self) -> dp_accounting.DpEvent:
        return dp_accounting.RandomizedResponseDpEvent(2 * self.flip_probability(), 2)


class BrokenToyBitRR(ToyBitRR):
    """Flips with 1/(1+e^{2ε}): truly 2ε-DP while claiming ε."""

    def flip_probability(self) -> float:
        return 1.0 / (1.0 + math.exp(2.0 * self.epsilon))


class NoClaim(ToyBitRR):
    """A mechanism that makes no DP claim."""

    name = "toy_none"

    def privacy(self) -> PrivacyStatement:
        return PrivacyStatement("none", None, None, "not applicable")

    def event(self) -> dp_accounting.DpEvent:
        return dp_accounting.NonPrivateDpEvent()
