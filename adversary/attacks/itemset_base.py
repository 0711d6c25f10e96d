"""What Balu's four scorers share (§3.5.2): targets, ĉ, and the item-set output.

"We benchmark four attacks that produce a score per item … Reconstruction P̂ is then the list of
the top ĉ items ranked based on their scores" — with the same ĉ, estimated from the release, for
all four (Balu §3.5.2, "As the estimation of ĉ is performed similarly for all the four attacks").
An `ItemSetAttack` therefore:

1. takes the profiles worth attacking (`Observations.targets()`: everyone but the auxiliary
   users, whose raw profiles the adversary already holds);
2. builds the channel model of the run's mechanism (`itemset_channel`) and estimates ĉ and its
   upper confidence bound per user;
3. asks the subclass for a score per item (`_scores`) and returns an `AttackOutput` of kind
   ``"item_set"`` with `set_sizes` = ĉ, which the referee (`sim.referee_attacks`) turns into
   the top-ĉ reconstruction.

When BLIP's ε = 0 the release says nothing about c; ĉ is then the auxiliary users' mean profile
size, or N/2 without an auxiliary set (`itemset_channel`).
"""

from __future__ import annotations

import abc
import dataclasses
from typing import ClassVar

import numpy as np

from privrec.adversary.attacks.base import Attack, AttackOutput, OutputKind, UserEstimate
from privrec.adversary.attacks.itemset_channel import ItemSetChannel, SizeEstimate, channel_for
from privrec.adversary.attacks.itemset_prior import mean_profile_size
from privrec.adversary.observations import Observations
from privrec.shared.types import FloatArray, IntArray

_RELEASES = {
    "blip": "BLIP bit vectors + public ε, L, K, hash key (p_ε)",
    "jlt": "JLT vectors + public codebook seed, L, σ",
}


@dataclasses.dataclass(frozen=True)
class Targets:
    """The attacked users and what the channel says about them.

    Attributes:
        user_ids: the attacked users, in user-id order.
        releases: their releases stacked, (n, L).
        sizes: ĉ and c_high per user.
    """

    user_ids: list[str]
    releases: np.ndarray
    sizes: SizeEstimate


@dataclasses.dataclass(frozen=True)
class Scores:
    """A subclass's answer: per user the scored items (any order) and their scores."""

    items: list[IntArray]
    values: list[FloatArray]
    knowledge: str = ""
    diagnostics: dict[str, float] = dataclasses.field(default_factory=dict)


def _check_unit(name: str, value: float) -> float:
    if not (isinstance(value, int | float) and 0.0 < float(value) < 1.0):
        raise ValueError(f"`{name}` must be in (0, 1), got {value!r}")
    return float(value)


class ItemSetAttack(Attack):
    """Base of Balu's scorers on BLIP and JLT releases (see the module docstring).

    Args:
        confidence: level of the confidence interval on c (Balu gives none).
        sigma_floor: JLT only: the smallest σ the likelihoods assume (`JltChannel`).
    """

    applies_to: ClassVar[tuple[str, ...]] = ("blip", "jlt")

    def __init__(self, confidence: float = 0.99, sigma_floor: float = 0.01) -> None:
        self.confidence = _check_unit("confidence", confidence)
        if not (isinstance(sigma_floor, int | float) and float(sigma_floor) > 0.0):
            raise ValueError(f"`sigma_floor` must be > 0, got {sigma_floor!r}")
        self.sigma_floor = float(sigma_floor)

    def _targets(self, observations: Observations, channel: ItemSetChannel) -> Targets:
        targets = observations.targets()
        releases = channel.stack(list(targets.values()))
        aux = observations.auxiliary
        fallback = mean_profile_size(aux) if aux is not None else channel.n_items / 2.0
        sizes = channel.size(releases, self.confidence, fallback)
        return Targets(list(targets), releases, sizes)

    def _fit(self, observations: Observations) -> AttackOutput:
        channel = channel_for(observations, self.sigma_floor)
        targets = self._targets(observations, channel)
        scores = self._scores(observations, channel, targets)
        per_user = {}
        for uid, items, values in zip(targets.user_ids, scores.items, scores.values, strict=True):
            order = np.argsort(items, kind="stable")
            per_user[uid] = UserEstimate(
                np.asarray(items, dtype=np.int64)[order],
                np.asarray(values, dtype=np.float64)[order],
            )
        knowledge = _RELEASES[channel.mechanism] + scores.knowledge
        aux = observations.auxiliary
        if not channel.informative:
            knowledge += (
                f"; ĉ = the {aux.n_users} auxiliary users' mean profile size"
                if aux is not None
                else "; ĉ = N/2"
            ) + " (the release carries no size information)"
        c_hat = targets.sizes.c_hat
        diagnostics = {
            "users": float(len(per_user)),
            "c_hat_mean": float(c_hat.mean()) if c_hat.size else float("nan"),
            "c_hat_informative": float(channel.informative),
            **scores.diagnostics,
        }
        return AttackOutput(
            attack=self.name,
            kind=OutputKind.ITEM_SET,
            knowledge=knowledge,
            per_user=per_user,
            diagnostics=diagnostics,
            set_sizes={u: int(c) for u, c in zip(targets.user_ids, c_hat.tolist(), strict=True)},
        )

    @abc.abstractmethod
    def _scores(
        self, observations: Observations, channel: ItemSetChannel, targets: Targets
    ) -> Scores:
        """A score per item for every target user (higher = more likely in her profile)."""


def auxiliary_knowledge(observations: Observations) -> str:
    """The knowledge-line suffix naming the auxiliary set, or "" without one."""
    aux = observations.auxiliary
    if aux is None:
        return ""
    return f" + raw profiles of {aux.n_users} auxiliary users ({aux.name}; item popularity)"


__all__ = ["ItemSetAttack", "Scores", "Targets", "auxiliary_knowledge"]
