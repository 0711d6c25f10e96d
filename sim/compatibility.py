"""Whether a run's mechanism, model and attacks can work together, decided before it starts.

Each family declares its side, readable without building anything:

* a mechanism what its releases are (`Mechanism.releases`: the payload's shape and the scale
  of its values, `shared.capabilities.ReleaseScale`);
* a model which scales it reads (`Model.accepts`, derived from its capabilities by
  `server.models.base.default_accepts` unless it sets it);
* an attack which mechanisms' releases it decodes (`Attack.applies_to`) and what side
  knowledge it cannot run without (`Attack.needs`).

`check_compatible(config)` is the one check: `privrec sim` (`sim.run.simulate`), the reproduce
runner (`sim.reproduce.protocol_run.ProtocolRun`) and any sweep call it before a node starts,
so a combination that cannot work is one `privrec: error:` line naming both sides and what
would fit, never a traceback after enrolment and collection (or an attack skipped in silence,
or a z-score model de-normalising ratings). `model_refusal`, `attack_refusal` and
`models_for` answer the same questions one pair at a time (for grids and for tests).
"""

from __future__ import annotations

from collections.abc import Callable

from privrec.adversary.attacks import ATTACKS
from privrec.adversary.attacks.base import SideKnowledge
from privrec.server.models import MODELS
from privrec.shared.config import ExperimentConfig
from privrec.shared.errors import ConfigError
from privrec.shared.mechanisms import MECHANISMS

_GRANTS: dict[SideKnowledge, tuple[str, Callable[[ExperimentConfig], bool], str]] = {
    SideKnowledge.AUXILIARY: (
        "the raw profiles of auxiliary users",
        lambda c: c.adversary.auxiliary != "none",
        'set [adversary] auxiliary = "popularity"',
    ),
    SideKnowledge.KNN_TARGETS: (
        "kNN targets for its sybils",
        lambda c: c.adversary.knn_targets > 0,
        "set [adversary] knn_targets >= 1",
    ),
    SideKnowledge.MEMBERSHIP_CANDIDATES: (
        "membership candidates for its sybils",
        lambda c: c.adversary.membership_candidates > 0,
        "set [adversary] membership_candidates >= 1",
    ),
}
"""Per side knowledge: what it is, whether a config grants it, and how to grant it."""


def _listing(names: list[str]) -> str:
    if not names:
        return "none"
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def models_for(mechanism: str) -> list[str]:
    """The registered models that read `mechanism`'s releases, in registry order."""
    scale = MECHANISMS.lookup(mechanism).releases.scale
    return [name for name, cls in MODELS.items() if scale in cls.accepts]


def model_refusal(mechanism: str, model: str) -> str | None:
    """Why `model` cannot be fitted on `mechanism`'s releases (one line), or None if it can.

    Raises:
        ConfigError: either name is not registered.
    """
    releases = MECHANISMS.lookup(mechanism).releases
    accepts = MODELS.lookup(model).accepts
    if releases.scale in accepts:
        return None
    reads = sorted(accepts)
    mechanisms = [n for n, cls in MECHANISMS.items() if cls.releases.scale in accepts]
    return (
        f"model.name: model {model!r} reads "
        f"{_listing([s.description for s in reads])}, but mechanism {mechanism!r} releases "
        f"{releases.scale.description}; with {mechanism} use {_listing(models_for(mechanism))}, "
        f"or run {model} on {_listing(mechanisms)}"
    )


def attack_refusal(attack: str, config: ExperimentConfig) -> str | None:
    """Why `attack` cannot run in `config`'s run (one line), or None if it can: its
    mechanism is not one the attack decodes, or the config does not grant what it needs.

    Raises:
        ConfigError: the attack is not registered.
    """
    cls = ATTACKS.lookup(attack)
    mechanism = config.mechanism.name
    if mechanism not in cls.applies_to:
        fitting = [n for n, a in ATTACKS.items() if mechanism in a.applies_to]
        return (
            f"adversary.attacks: attack {attack!r} applies to mechanism "
            f"{_listing(list(cls.applies_to))}, not {mechanism!r}; attacks on {mechanism}: "
            f"{_listing(fitting)} (or attacks = [])"
        )
    for need in sorted(cls.needs):
        what, granted, how = _GRANTS[need]
        if not granted(config):
            return f"adversary.attacks: attack {attack!r} needs {what}; {how}"
    return None


def refusals(config: ExperimentConfig) -> list[str]:
    """Every reason `config`'s mechanism, model and attacks cannot work together (empty
    when they can)."""
    found = [model_refusal(config.mechanism.name, config.model.name)]
    found += [attack_refusal(a, config) for a in config.adversary.attacks]
    found.append(split_refusal(config))
    return [r for r in found if r is not None]


def split_refusal(config: ExperimentConfig) -> str | None:
    """The sybils place their crowd and probes by the thesis protocol's fold rule, which a
    named split (`[evaluation] split`) does not have."""
    sybils = config.adversary.knn_targets or config.adversary.membership_candidates
    if sybils and config.evaluation.split != "thesis":
        return (
            "evaluation.split: the sybil attacks (adversary.knn_targets, "
            "membership_candidates) place their crowd by the thesis protocol's fold rule; "
            f'use split = "thesis", got {config.evaluation.split!r}'
        )
    return None


def check_compatible(config: ExperimentConfig) -> None:
    """Refuse a run whose mechanism, model and attacks cannot work together, before anything
    starts.

    Raises:
        ConfigError: one line, naming both sides and what would fit (the first reason of
            `refusals`); an unknown mechanism, model or attack name.
    """
    reasons = refusals(config)
    if reasons:
        raise ConfigError(reasons[0])


__all__ = [
    "attack_refusal",
    "check_compatible",
    "model_refusal",
    "models_for",
    "refusals",
    "split_refusal",
]
