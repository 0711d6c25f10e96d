"""The adversary's declared side knowledge: raw profiles of a sample of the population.

`[adversary] auxiliary = "popularity"` grants the adversary the raw profiles of
`auxiliary_users` users (Balu §3.5.1: "the adversary has access to some raw profiles of users to
estimate the item priors"; ML-100K is split into 600 such training users and 343 attacked
users, Table 3.1). Balu does not say how the split is drawn; we draw the rows uniformly without
replacement from ("adversary", "auxiliary") of the run seed, so the orchestrator, the live
adversary node, `privrec replay` and the referee all derive the same set from the config alone.

The set is built here, in `sim`, because it is truth: the adversary package never loads the
population (`tests/unit/test_layout.py`); whoever starts the adversary hands it over as
`Observations.auxiliary`. Auxiliary users still release like everyone else; attacks skip them
(`Observations.targets`) and the referee leaves them out of the scores.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from privrec.shared.config import ExperimentConfig
from privrec.shared.data.dataset import RatingData
from privrec.shared.errors import ConfigError
from privrec.shared.population import THESIS_PROTOCOL_USERS, load_population, user_id_of
from privrec.shared.seeding import rng_for
from privrec.shared.types import IntArray


def auxiliary_rows(n_users: int, n_auxiliary: int, seed: int) -> IntArray:
    """The population rows of the auxiliary users, sorted (a seeded uniform sample).

    Raises:
        ConfigError: the population has no user left to attack.
    """
    if not 1 <= n_auxiliary < n_users:
        raise ConfigError(
            f"adversary.auxiliary_users: must leave users to attack (1 <= value < the "
            f"population's {n_users} users), got {n_auxiliary!r}"
        )
    rng = rng_for(seed, "adversary", "auxiliary")
    rows: IntArray = np.sort(rng.choice(n_users, size=n_auxiliary, replace=False)).astype(np.int64)
    return rows


SAMPLED_TARGETS = 10_000
"""Above it, the default number of sampled attack targets."""
SAMPLED_FIT_USERS = 20_000
"""Above it, the default number of users whose releases the attacks fit on."""


def attack_target_rows(config: ExperimentConfig, n_users: int) -> IntArray | None:
    """The population rows the attacks are scored on, sorted; None when that is every user
    the attacks see (`[adversary] targets`, `AdversarySection`).

    A uniform sample without replacement, from ("adversary", "targets") of the run seed, of the
    users who are not auxiliary users (those are never attacked): the orchestrator, the
    adversary's nodes (through its stated knowledge) and the referee derive the same set from
    the config. Sampled targets are how large-scale evaluation bounds the cost per user scored;
    every release still goes into the attacks' fits.
    """
    wanted = config.adversary.targets
    if wanted == 0:
        wanted = n_users if n_users <= THESIS_PROTOCOL_USERS else SAMPLED_TARGETS
    candidates = np.arange(n_users, dtype=np.int64)
    if config.adversary.auxiliary != "none":
        aux = auxiliary_rows(n_users, config.adversary.auxiliary_users, config.run.seed)
        candidates = np.setdiff1d(candidates, aux)
    if wanted >= candidates.size:
        return None
    rng = rng_for(config.run.seed, "adversary", "targets")
    rows: IntArray = np.sort(rng.choice(candidates, size=wanted, replace=False)).astype(np.int64)
    return rows


def attack_fit_rows(config: ExperimentConfig, n_users: int) -> IntArray | None:
    """The population rows whose releases the attacks fit on, sorted; None when that is every
    observed release (`[adversary] fit_users`, `AdversarySection`).

    Every attack target and auxiliary user, and a uniform sample without replacement, from
    ("adversary", "fit-users") of the run seed, of the other users up to `fit_users` (0: every
    user up to ML-1M's size, `SAMPLED_FIT_USERS` above). None when the targets are not sampled
    (each target's estimate must come from the fit) or an attack of the run is scored on
    something other than the attacked users' own releases (`Attack.fits_on_sample`: the kNN
    sybil attack, membership inference).
    """
    from privrec.adversary.attacks import make_attack

    targets = attack_target_rows(config, n_users)
    if targets is None or not all(make_attack(a).fits_on_sample for a in config.adversary.attacks):
        return None
    wanted = config.adversary.fit_users
    if wanted == 0:
        wanted = n_users if n_users <= THESIS_PROTOCOL_USERS else SAMPLED_FIT_USERS
    kept = targets
    if config.adversary.auxiliary != "none":
        aux = auxiliary_rows(n_users, config.adversary.auxiliary_users, config.run.seed)
        kept = np.union1d(kept, aux)
    if wanted >= n_users:
        return None
    rest = np.setdiff1d(np.arange(n_users, dtype=np.int64), kept)
    extra = max(0, min(wanted - kept.size, rest.size))
    rng = rng_for(config.run.seed, "adversary", "fit-users")
    rows: IntArray = np.union1d(kept, rng.choice(rest, size=extra, replace=False)).astype(np.int64)
    return rows


def attack_fit_ids(config: ExperimentConfig, data: RatingData) -> tuple[str, ...] | None:
    """Wire ids of the users the attacks fit on, in row order (None: every observed user)."""
    rows = attack_fit_rows(config, data.n_users)
    if rows is None:
        return None
    return tuple(user_id_of(data, int(r)) for r in rows)


def attack_target_ids(config: ExperimentConfig, data: RatingData) -> tuple[str, ...] | None:
    """Wire ids of the sampled attack targets in row order (None: every user is a target)."""
    rows = attack_target_rows(config, data.n_users)
    if rows is None:
        return None
    return tuple(user_id_of(data, int(r)) for r in rows)


def check_auxiliary(config: ExperimentConfig, n_users: int) -> None:
    """Fail before the run when the configured auxiliary set cannot be drawn."""
    if config.adversary.auxiliary != "none":
        auxiliary_rows(n_users, config.adversary.auxiliary_users, config.run.seed)


def auxiliary_set(config: ExperimentConfig, data: RatingData | None = None) -> RatingData | None:
    """The auxiliary users' raw profiles (None when `[adversary] auxiliary = "none"`).

    Args:
        config: the run's configuration.
        data: the population, if already loaded (else loaded from `[data]`).
    """
    if config.adversary.auxiliary == "none":
        return None
    data = data if data is not None else load_population(config.data, config.run.seed)
    rows = auxiliary_rows(data.n_users, config.adversary.auxiliary_users, config.run.seed)
    return dataclasses.replace(
        data,
        name=f"{data.name}, auxiliary users",
        ratings=data.ratings[rows].tocsr(),
        user_ids=np.asarray(data.user_ids)[rows],
    )


def auxiliary_user_ids(config: ExperimentConfig, data: RatingData) -> frozenset[str]:
    """Wire ids of the auxiliary users (empty when there are none)."""
    if config.adversary.auxiliary == "none":
        return frozenset()
    rows = auxiliary_rows(data.n_users, config.adversary.auxiliary_users, config.run.seed)
    return frozenset(user_id_of(data, int(r)) for r in rows)


__all__ = [
    "SAMPLED_TARGETS",
    "attack_target_ids",
    "attack_target_rows",
    "auxiliary_rows",
    "auxiliary_set",
    "auxiliary_user_ids",
    "check_auxiliary",
]
