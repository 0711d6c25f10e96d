"""The experiment's choice of the adversary's side knowledge, made from truth (only `sim` may).

`side_knowledge_plan(config, data)` draws, deterministically from the run seed, what
`[adversary]` asks for (`adversary.knowledge` says what each part is for):

* `outside_users` raw profiles of users OUTSIDE the run: the dataset's rows after the run's
  population (`[data] max_users` must leave that many);
* `knn_targets` users of the run with at least `knn_known_items` + 10 ratings, and for each
  `knn_known_items` of her ratings drawn at random (the attacker's "m items");
* `membership_candidates` users of the run and as many outside it (rows after the auxiliary
  ones), each with `membership_known_items` of her ratings, under shuffled opaque labels
  ("candidate-007"); the labels' membership goes to the referee only (`MembershipTruth`);
* `targets`: the sampled attack targets, when the population is sampled
  (`sim.auxiliary.attack_target_rows`), and the users the attacks fit on, when those are
  sampled too (`sim.auxiliary.attack_fit_rows`).

Draws come from ``rng_for(seed, "sim", "knowledge", …)``: the referee calls the same function
again and gets the same labels.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from privrec.adversary.knowledge import AdversaryKnowledge, KnownProfile
from privrec.adversary.sybils import SYBIL_MECHANISMS, SybilSettings, crowd_size, sybil_counts
from privrec.server.models import MODELS
from privrec.server.spec import model_params
from privrec.shared.config import ExperimentConfig
from privrec.shared.data.dataset import RatingData
from privrec.shared.errors import ConfigError
from privrec.shared.population import load_population, user_id_of
from privrec.shared.seeding import rng_for
from privrec.sim.auxiliary import attack_fit_ids, attack_target_ids


@dataclasses.dataclass(frozen=True)
class MembershipTruth:
    """What only the referee knows about the membership candidates.

    Attributes:
        members: label → True when the candidate is a user of the run.
    """

    members: dict[str, bool]


def _rows(data: RatingData, rows: range | np.ndarray) -> RatingData:
    return data.rows(rows)


def _known(
    data: RatingData, row: int, k: int, rng: np.random.Generator, label: str
) -> KnownProfile:
    items, ratings = data.user_row(row)
    pick = np.sort(rng.choice(items.size, size=k, replace=False))
    return KnownProfile(label, items[pick].astype(np.int64), ratings[pick].astype(np.float64))


def check_side_knowledge(config: ExperimentConfig) -> None:
    """Sybil probes need a model that answers queries and a mechanism the sybils can craft.

    Raises:
        ConfigError: naming `adversary.knn_targets` or `adversary.membership_candidates`.
    """
    adv = config.adversary
    for key in ("knn_targets", "membership_candidates"):
        if not getattr(adv, key):
            continue
        if not MODELS.lookup(config.model.name).capabilities.answers_queries:
            raise ConfigError(
                f"adversary.{key}: sybil probes need a model that answers queries; "
                f"{config.model.name!r} does not"
            )
        if config.mechanism.name not in SYBIL_MECHANISMS:
            raise ConfigError(
                f"adversary.{key}: sybils craft {list(SYBIL_MECHANISMS)} releases, not "
                f"{config.mechanism.name!r}"
            )


def side_knowledge_plan(
    config: ExperimentConfig, data: RatingData
) -> tuple[AdversaryKnowledge, MembershipTruth]:
    """The adversary's side knowledge and the referee's membership labels (module docstring).

    Args:
        config: the experiment (its `[adversary]` and `[data]` sections).
        data: the run's population (`load_population`).

    Raises:
        ConfigError: too few users outside the run, or too few eligible users in it.
    """
    adv, seed = config.adversary, config.run.seed
    check_side_knowledge(config)
    n_out = adv.outside_users + adv.membership_candidates
    outside = None
    if n_out:
        full = load_population(dataclasses.replace(config.data, max_users=0), seed)
        spare = full.n_users - data.n_users
        if spare < n_out:
            key = "outside_users" if adv.outside_users else "membership_candidates"
            raise ConfigError(
                f"adversary.{key}: needs {n_out} users outside the run "
                f"(outside_users + membership_candidates), but the dataset has "
                f"{full.n_users} and the run takes {data.n_users}; lower [data] max_users"
            )
        outside = _rows(full, range(data.n_users, data.n_users + n_out))
    auxiliary = None
    if adv.outside_users:
        assert outside is not None
        auxiliary = _rows(outside, range(adv.outside_users))

    counts = data.user_counts()
    targets: list[KnownProfile] = []
    if adv.knn_targets:
        eligible = np.flatnonzero(counts >= adv.knn_known_items + 10)
        if eligible.size < adv.knn_targets:
            raise ConfigError(
                f"adversary.knn_targets: only {eligible.size} users have "
                f"knn_known_items + 10 = {adv.knn_known_items + 10} ratings"
            )
        rng = rng_for(seed, "sim", "knowledge", "knn-targets")
        for row in np.sort(rng.choice(eligible, size=adv.knn_targets, replace=False)).tolist():
            uid = user_id_of(data, row)
            targets.append(_known(data, row, adv.knn_known_items, rng, uid))

    candidates: list[KnownProfile] = []
    members: dict[str, bool] = {}
    if adv.membership_candidates:
        assert outside is not None
        c, k = adv.membership_candidates, adv.membership_known_items
        rng = rng_for(seed, "sim", "knowledge", "membership")
        eligible = np.flatnonzero(counts >= k)
        if eligible.size < c:
            raise ConfigError(
                f"adversary.membership_candidates: only {eligible.size} users of the run "
                f"have membership_known_items = {k} ratings"
            )
        inside = rng.choice(eligible, size=c, replace=False)
        out_rows = np.arange(adv.outside_users, adv.outside_users + c)
        if np.any(outside.user_counts()[out_rows] < k):
            raise ConfigError(
                f"adversary.membership_known_items: a user outside the run has fewer than {k} "
                "ratings; lower it"
            )
        pool = [(data, int(r), True) for r in inside] + [(outside, int(r), False) for r in out_rows]
        order = rng.permutation(len(pool))
        for pos, i in enumerate(order.tolist()):
            source, row, member = pool[i]
            label = f"candidate-{pos:03d}"
            candidates.append(_known(source, row, k, rng, label))
            members[label] = member
    knowledge = AdversaryKnowledge(
        auxiliary,
        tuple(targets),
        tuple(candidates),
        attack_target_ids(config, data),
        attack_fit_ids(config, data),
    )
    return knowledge, MembershipTruth(members)


def sybil_users(config: ExperimentConfig, knowledge: AdversaryKnowledge) -> tuple[int, int]:
    """(sybils that will enroll, crowd profiles they will release) for the phase counts."""
    k = model_params(config).get("k")
    settings = SybilSettings.from_section(config.adversary)
    if not knowledge.targets and not knowledge.candidates:
        return 0, 0
    size = int(k) if isinstance(k, int) else None
    crowd_size(settings, size)  # validates
    return sybil_counts(knowledge, settings, size)


__all__ = ["MembershipTruth", "check_side_knowledge", "side_knowledge_plan", "sybil_users"]
