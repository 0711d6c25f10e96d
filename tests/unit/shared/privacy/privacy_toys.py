"""Tiny mechanisms with known privacy, for the accountant and audit tests.

They implement the `Mechanism` interface with a handful of output coordinates so an audit of
10⁵ releases runs in about a second. Each has a deliberately broken twin.
"""

from __future__ import annotations

import math
from typing import Any

import dp_accounting
import numpy as np

from shared.mechanisms.base import (
    BitPayload,
    DensePayload,
    Mechanism,
    PrivacyStatement,
    Profile,
)


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

    def release_many(self, profiles, rngs):  # noqa: ANN001, ANN201 - interface signature
        # Same numbers as `release` for each (profile, generator) pair, in order.
        return [self.release(p, r) for p, r in zip(profiles, rngs, strict=True)]

    def privacy(self) -> PrivacyStatement:
        return PrivacyStatement("pure", self.epsilon, 0.0, "one item added or removed")

    def event(self) -> dp_accounting.DpEvent:
        return dp_accounting.RandomizedResponseDpEvent(2 * self.flip_probability(), 2)


class BrokenToyBitRR(ToyBitRR):
    """Flips with 1/(1+e^{2ε}): truly 2ε-DP while claiming ε."""

    def flip_probability(self) -> float:
        return 1.0 / (1.0 + math.exp(2.0 * self.epsilon))


class ToyLaplace(Mechanism):
    """Releases the ratings of a few items plus Laplace(Δ/ε), Δ = 4 (ratings 1–5): ε-DP."""

    name = "toy_laplace"
    payload_field = "dense"

    def __init__(self, epsilon: float = 1.0, dim: int = 4) -> None:
        self.epsilon, self.dim = float(epsilon), int(dim)

    def scale(self) -> float:
        return 4.0 / self.epsilon

    def public_params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "dim": self.dim}

    def release(self, profile: Profile, rng: np.random.Generator) -> DensePayload:
        x = np.zeros(self.dim)
        x[profile.items[profile.items < self.dim]] = profile.ratings[profile.items < self.dim]
        return DensePayload(x + rng.laplace(0.0, self.scale(), self.dim))

    def privacy(self) -> PrivacyStatement:
        return PrivacyStatement("pure", self.epsilon, 0.0, "one rating changed (1–5)")

    def event(self) -> dp_accounting.DpEvent:
        return dp_accounting.LaplaceDpEvent(1.0 / self.epsilon)


class BrokenToyLaplace(ToyLaplace):
    """Half the scale: truly 2ε-DP."""

    def scale(self) -> float:
        return 2.0 / self.epsilon


class ToyGaussian(Mechanism):
    """One item's indicator times a unit vector spread over `dim` coordinates, plus N(0, σ²)."""

    name = "toy_gauss"
    payload_field = "dense"

    def __init__(self, sigma: float = 1.0, delta: float = 1e-3, dim: int = 16) -> None:
        self.sigma, self.delta, self.dim = float(sigma), float(delta), int(dim)

    def public_params(self) -> dict[str, Any]:
        return {"sigma": self.sigma, "delta": self.delta, "dim": self.dim}

    def noise(self) -> float:
        return self.sigma

    def release(self, profile: Profile, rng: np.random.Generator) -> DensePayload:
        x = np.full(self.dim, float(np.isin(0, profile.items)) / math.sqrt(self.dim))
        return DensePayload(x + rng.normal(0.0, self.noise(), self.dim))

    def privacy(self) -> PrivacyStatement:
        from dp_accounting.gaussian_mechanism import get_epsilon_gaussian

        return PrivacyStatement("approximate", get_epsilon_gaussian(self.sigma, self.delta),
                                self.delta, "one item added or removed")

    def event(self) -> dp_accounting.DpEvent:
        return dp_accounting.GaussianDpEvent(self.sigma)


class BrokenToyGaussian(ToyGaussian):
    """Half the noise."""

    def noise(self) -> float:
        return self.sigma / 2.0


class NoClaim(ToyBitRR):
    """A mechanism that makes no DP claim."""

    name = "toy_none"

    def privacy(self) -> PrivacyStatement:
        return PrivacyStatement("none", None, None, "not applicable")

    def event(self) -> dp_accounting.DpEvent:
        return dp_accounting.NonPrivateDpEvent()
