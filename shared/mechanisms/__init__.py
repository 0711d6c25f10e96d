"""Client-side release mechanisms and their registry.

`make_mechanism(name, params)` builds the mechanism a run's config names; every mechanism is
listed once in `MECHANISMS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.errors import ConfigError
from shared.mechanisms.base import (
    BitPayload,
    DensePayload,
    Mechanism,
    Payload,
    PrivacyStatement,
    Profile,
    SparsePayload,
)
from shared.mechanisms.rpt import RandomizedPerturbation

MECHANISMS: dict[str, type[Mechanism]] = {
    RandomizedPerturbation.name: RandomizedPerturbation,
}


def make_mechanism(name: str, params: Mapping[str, Any] | None = None) -> Mechanism:
    """Build mechanism `name` with keyword `params`.

    Raises:
        ConfigError: unknown mechanism, unknown parameter, or invalid value (naming it).
    """
    try:
        cls = MECHANISMS[name]
    except KeyError:
        raise ConfigError(
            f"mechanism.name: unknown mechanism {name!r}; known: {sorted(MECHANISMS)}"
        ) from None
    try:
        return cls(**dict(params or {}))
    except TypeError as exc:
        raise ConfigError(f"mechanism.{name}: {exc}") from exc
    except ValueError as exc:
        raise ConfigError(f"mechanism.{name}: {exc}") from exc


__all__ = [
    "MECHANISMS",
    "BitPayload",
    "DensePayload",
    "Mechanism",
    "Payload",
    "PrivacyStatement",
    "Profile",
    "RandomizedPerturbation",
    "SparsePayload",
    "make_mechanism",
]
