"""Client-side release mechanisms and their registry.

`make_mechanism(name, params)` builds the mechanism a run's config names; every mechanism is
listed once in `MECHANISMS`, keyed by its `name` (which is also the config value).

| name | paper | payload field | guarantee |
|---|---|---|---|
| rpt | Bilge Procedure 1 | rpt | none |
| rrt | Bilge Procedure 2 | rrt | none (per-cell deniability θ) |
| blip | Balu §3.1 | blip | pure ε, one item added/removed |
| jlt | Balu §3.2 | jlt | (ε, δ), one item added/removed |
| oue | Wang et al. 2017 | oue | pure ε, one item replaced (or added/removed) |
| pmd, pmc | Xin & Jaakkola Sec. 4 | pmd, pmc | element-wise (not DP) |
| laplace_second_order | Xin & Jaakkola Sec. 5 | laplace_second_order | pure ε per element |
| exact_second_order | Xin & Jaakkola Sec. 5 | exact_second_order | none |
| raw | trusted curator (Zhu, Wang & Tang, Balu ch. 4) | raw_ratings | none (model output privacy) |

The second-order mechanisms need the server's public model before they release:
``mech.bind(mu, V)`` (PMC with h_mode="shared" also ``shared_h=``); `fit_public_model` is the
public-tier estimator of (µ, V) (`server.models.two_tier` runs it and publishes the result).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from privrec.shared.mechanisms.base import (
    BitPayload,
    DensePayload,
    Mechanism,
    Payload,
    PrivacyStatement,
    Profile,
    SparsePayload,
)
from privrec.shared.mechanisms.blip import Blip
from privrec.shared.mechanisms.completion import (
    complete_vector,
    estimate_shared_h,
    fit_public_model,
)
from privrec.shared.mechanisms.jlt import JohnsonLindenstrauss
from privrec.shared.mechanisms.oue import OptimisedUnaryEncoding
from privrec.shared.mechanisms.raw import RawRatings
from privrec.shared.mechanisms.rpt import RandomizedPerturbation
from privrec.shared.mechanisms.rrt import RandomizedResponseGroups
from privrec.shared.mechanisms.second_order import (
    ExactSecondOrder,
    LaplaceSecondOrder,
    PrivateContinuous,
    PrivateDiscrete,
    SecondOrderMechanism,
)
from privrec.shared.registry import Registry

MECHANISMS: Registry[Mechanism] = Registry(
    "mechanism", "mechanism.name", Mechanism, declares=("payload_field", "releases")
)
MECHANISMS.register(RandomizedPerturbation)
MECHANISMS.register(RandomizedResponseGroups)
MECHANISMS.register(Blip)
MECHANISMS.register(JohnsonLindenstrauss)
MECHANISMS.register(OptimisedUnaryEncoding)
MECHANISMS.register(PrivateDiscrete)
MECHANISMS.register(PrivateContinuous)
MECHANISMS.register(LaplaceSecondOrder)
MECHANISMS.register(ExactSecondOrder)
MECHANISMS.register(RawRatings)


def make_mechanism(name: str, params: Mapping[str, Any] | None = None) -> Mechanism:
    """Build mechanism `name` with keyword `params` (ConfigError names a bad name or value)."""
    return MECHANISMS.build(name, params)


__all__ = [
    "MECHANISMS",
    "BitPayload",
    "Blip",
    "DensePayload",
    "ExactSecondOrder",
    "JohnsonLindenstrauss",
    "LaplaceSecondOrder",
    "Mechanism",
    "OptimisedUnaryEncoding",
    "Payload",
    "PrivacyStatement",
    "PrivateContinuous",
    "PrivateDiscrete",
    "Profile",
    "RandomizedPerturbation",
    "RandomizedResponseGroups",
    "RawRatings",
    "SecondOrderMechanism",
    "SparsePayload",
    "complete_vector",
    "estimate_shared_h",
    "fit_public_model",
    "make_mechanism",
]
