"""What the adversary observes: everything the untrusted server received, plus public knowledge.

Built from the server's transcript (replay) or from the live observation feed; both give the same
`Observations` for the same run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

from privrec.adversary.knowledge import AdversaryKnowledge
from privrec.adversary.sybils import Probe, SybilPlan
from privrec.shared.data.dataset import RatingData
from privrec.shared.errors import ValidationError
from privrec.shared.mechanisms.base import Payload
from privrec.shared.run_config import PublicRunConfig


@dataclasses.dataclass(frozen=True)
class QueryObservation:
    """One Predict/Recommend request: the freshly perturbed query and the target items."""

    user_id: str
    payload: Payload
    items: tuple[int, ...]


@dataclasses.dataclass
class Observations:
    """The adversary's view of a run.

    Attributes:
        run_config: the public run configuration (mechanism, its public parameters, the model,
            `n_items`, `rating_scale`, ...) exactly as `GetRunConfig` publishes it.
        profiles: user id → payload of her (private-tier) profile release, in user-id order.
        public: user id → the ratings a public-tier user shared openly (`SparsePayload`,
            Xin & Jaakkola's public users), in user-id order; empty in one-tier runs.
        queries: every query release with its target items, in arrival order.
        auxiliary: explicit, documented side knowledge (e.g. raw profiles of a disjoint set of
            users, for item priors), or None.
        knowledge: the whole stated side knowledge of the run (`adversary.knowledge`: the
            auxiliary profiles, kNN targets, membership candidates); empty when none was given.
        sybils: what the adversary's own sybil clients sent and were answered
            (`adversary.sybils`), or None when the run had no sybils.
    """

    run_config: PublicRunConfig
    profiles: Mapping[str, Payload] = dataclasses.field(default_factory=dict)
    public: Mapping[str, Payload] = dataclasses.field(default_factory=dict)
    queries: list[QueryObservation] = dataclasses.field(default_factory=list)
    auxiliary: RatingData | None = None
    knowledge: AdversaryKnowledge = dataclasses.field(default_factory=AdversaryKnowledge)
    sybils: SybilPlan | None = None

    @property
    def auxiliary_user_ids(self) -> frozenset[str]:
        """Wire ids of the auxiliary users (whose raw profiles the adversary already holds)."""
        if self.auxiliary is None:
            return frozenset()
        return frozenset(str(int(u)) for u in self.auxiliary.user_ids)

    def targets(self) -> Mapping[str, Payload]:
        """The profiles worth attacking: every observed profile except the auxiliary users'
        (Balu §3.5.1: the training users' raw profiles serve the priors; only the others are
        attacked), and only the sampled attack targets when the experiment samples them
        (`knowledge.attack_targets`), in user-id order. A view of `profiles` (nothing is
        decoded here); an attack that fits population-level parameters reads `profiles`."""
        skip = self.auxiliary_user_ids
        view = _Without(self.profiles, skip) if skip else self.profiles
        keep = self.knowledge.attack_targets
        return view if keep is None else _Only(view, frozenset(keep))

    def probes(self, purpose: str, missing: str) -> list[Probe]:
        """The sybils' probes made for `purpose`; refuses a run without any (`missing` says
        which setting makes them)."""
        probes = self.sybils.of(purpose) if self.sybils is not None else []
        if not probes:
            raise ValidationError("sybils", missing)
        return probes

    @property
    def public_params(self) -> dict[str, Any]:
        """The mechanism's public parameters, as the run config publishes them."""
        return dict(self.run_config.public_params)

    @property
    def n_items(self) -> int:
        """Number of items in the run's catalogue."""
        return self.run_config.n_items


class _Without(Mapping[str, Payload]):
    """`base` without the keys in `skip`, as a view."""

    def __init__(self, base: Mapping[str, Payload], skip: frozenset[str]) -> None:
        self._base, self._skip = base, skip
        self._len = len(base) - sum(1 for uid in skip if uid in base)

    def __getitem__(self, user_id: str) -> Payload:
        if user_id in self._skip:
            raise KeyError(user_id)
        return self._base[user_id]

    def __contains__(self, user_id: object) -> bool:
        return user_id not in self._skip and user_id in self._base

    def __iter__(self) -> Iterator[str]:
        return (uid for uid in self._base if uid not in self._skip)

    def __len__(self) -> int:
        return self._len


class _Only(Mapping[str, Payload]):
    """`base` with only the keys in `keep`, in `base`'s order, as a view."""

    def __init__(self, base: Mapping[str, Payload], keep: frozenset[str]) -> None:
        self._base, self._keep = base, keep
        self._len = sum(1 for uid in keep if uid in base)

    def __getitem__(self, user_id: str) -> Payload:
        if user_id not in self._keep:
            raise KeyError(user_id)
        return self._base[user_id]

    def __contains__(self, user_id: object) -> bool:
        return user_id in self._keep and user_id in self._base

    def __iter__(self) -> Iterator[str]:
        return (uid for uid in self._base if uid in self._keep)

    def __len__(self) -> int:
        return self._len


__all__ = ["Observations", "QueryObservation"]
