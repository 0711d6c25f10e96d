"""Attacks on what the untrusted aggregator observes, and their registry.

`make_attack(name, **params)` builds the attack a run's `[adversary]` section names; every attack
is listed once in `ATTACKS`. Usage: ``make_attack("rpt_spectral").fit(observations).output()``.
"""

from __future__ import annotations

from typing import Any

from adversary.attacks.base import Attack, AttackOutput, UserEstimate
from adversary.attacks.fake_detection import FakeDetection
from adversary.attacks.rpt_reconstruction import BayesReconstruction, SpectralFiltering
from shared.errors import ConfigError

ATTACKS: dict[str, type[Attack]] = {
    cls.name: cls for cls in (SpectralFiltering, BayesReconstruction, FakeDetection)
}


def make_attack(name: str, **params: Any) -> Attack:
    """Build attack `name` with keyword `params`.

    Raises:
        ConfigError: unknown attack, unknown parameter, or invalid value (naming it).
    """
    try:
        cls = ATTACKS[name]
    except KeyError:
        raise ConfigError(
            f"adversary.attacks: unknown attack {name!r}; known: {sorted(ATTACKS)}") from None
    try:
        return cls(**params)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"adversary.{name}: {exc}") from exc


__all__ = [
    "ATTACKS",
    "Attack",
    "AttackOutput",
    "BayesReconstruction",
    "FakeDetection",
    "SpectralFiltering",
    "UserEstimate",
    "make_attack",
]
