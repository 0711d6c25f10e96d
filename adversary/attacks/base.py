"""The interface every attack implements: `Attack(...).fit(observations).output()`.

An attack is constructed with its parameters (sklearn style, STYLE.md item 4), reads only what the
untrusted server observed plus public parameters and an explicitly declared auxiliary set
(`adversary.observations.Observations`), and produces per-user estimates that the referee
(`sim.referee_attacks`) scores against the truth it alone holds. Attacks never see truth.
"""

from __future__ import annotations

import abc
import dataclasses
import enum
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar, NamedTuple, Self

import numpy as np
import numpy.typing as npt

from privrec.adversary.observations import Observations
from privrec.shared.csr import row_positions
from privrec.shared.errors import NotFittedError, ValidationError
from privrec.shared.types import FloatArray, IndexArray, IntArray


class UserEstimate(NamedTuple):
    """One user's estimates: `values[i]` is the attack's output for item `indices[i]`.

    Attributes:
        indices: int64 array of shape (k,), strictly increasing item indices.
        values: float64 array of shape (k,).
    """

    indices: IntArray
    values: FloatArray


class PackedEstimates(Mapping[str, UserEstimate]):
    """user id → `UserEstimate`, held as one CSR (ids, indptr, indices, data) instead of two
    arrays per user: a million users' estimates are a few flat arrays, not millions of Python
    objects (which the allocator never hands back; bench/population.py). A `UserEstimate` is
    made on access: its indices as int64 and its values as a read-only view.

    Args:
        user_ids: the users, in the order of the rows.
        indptr: int (n + 1,), row u is ``indices[indptr[u]:indptr[u + 1]]``.
        indices: int (nnz,), increasing within a row.
        data: float64 (nnz,), the values.
    """

    def __init__(
        self,
        user_ids: Sequence[str],
        indptr: npt.ArrayLike,
        indices: npt.ArrayLike,
        data: npt.ArrayLike,
    ) -> None:
        self.user_ids = list(user_ids)
        self.indptr = np.asarray(indptr, dtype=np.int64)
        self.indices = np.asarray(indices)
        self.data = np.asarray(data, dtype=np.float64)
        if self.indptr.shape != (len(self.user_ids) + 1,) or self.indptr[0] != 0:
            raise ValueError(
                f"indptr must have {len(self.user_ids) + 1} entries starting at 0, "
                f"got shape {self.indptr.shape}"
            )
        nnz = int(self.indptr[-1])
        if self.indices.shape != (nnz,) or self.data.shape != (nnz,):
            raise ValueError(
                f"indices and data must have indptr[-1] = {nnz} entries, got "
                f"{self.indices.shape} and {self.data.shape}"
            )
        if not np.issubdtype(self.indices.dtype, np.integer):
            raise ValueError(f"indices must be integers, got {self.indices.dtype}")
        self.data.flags.writeable = False  # the views handed out must not change the store
        self._rows: dict[str, int] | None = None

    @classmethod
    def of(cls, per_user: Mapping[str, UserEstimate]) -> PackedEstimates:
        """`per_user` packed with its users in sorted order (itself when it already is)."""
        if isinstance(per_user, PackedEstimates) and all(
            a < b for a, b in zip(per_user.user_ids, per_user.user_ids[1:], strict=False)
        ):
            return per_user
        users = sorted(per_user)
        lens = [np.size(per_user[u].indices) for u in users]
        indptr = np.zeros(len(users) + 1, dtype=np.int64)
        np.cumsum(lens, out=indptr[1:])
        return cls(
            users,
            indptr,
            _concat([per_user[u].indices for u in users], np.int64),
            _concat([per_user[u].values for u in users], np.float64),
        )

    def row(self, user_id: str) -> int:
        """The row of `user_id` (KeyError if absent)."""
        if self._rows is None:
            self._rows = {u: i for i, u in enumerate(self.user_ids)}
        return self._rows[user_id]

    def take(self, user_ids: Sequence[str]) -> tuple[IntArray, IntArray, FloatArray]:
        """(sizes, indices as int64, values) of `user_ids`' estimates, concatenated in that
        order: the same arrays as one `UserEstimate` per user, gathered in one pass."""
        rows = np.fromiter((self.row(u) for u in user_ids), dtype=np.int64, count=len(user_ids))
        lens, positions = row_positions(self.indptr, rows)
        return lens, self.indices[positions].astype(np.int64, copy=False), self.data[positions]

    def subset(self, user_ids: Sequence[str]) -> PackedEstimates:
        """The estimates of `user_ids` (present here), in that order, packed anew."""
        lens, indices, values = self.take(user_ids)
        indptr = np.zeros(len(user_ids) + 1, dtype=np.int64)
        np.cumsum(lens, out=indptr[1:])
        return PackedEstimates(user_ids, indptr, indices, values)

    def __getitem__(self, user_id: str) -> UserEstimate:
        r = self.row(user_id)
        a, b = int(self.indptr[r]), int(self.indptr[r + 1])
        return UserEstimate(self.indices[a:b].astype(np.int64, copy=False), self.data[a:b])

    def __contains__(self, user_id: object) -> bool:
        if not isinstance(user_id, str):
            return False
        try:
            self.row(user_id)
        except KeyError:
            return False
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(self.user_ids)

    def __len__(self) -> int:
        return len(self.user_ids)


def _concat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype)


class SideKnowledge(enum.StrEnum):
    """What an attack needs beyond the observed transcript: knowledge the experiment grants
    the adversary in its `[adversary]` section (`sim.compatibility` refuses a run that names
    the attack without granting it)."""

    AUXILIARY = "auxiliary"
    """Raw profiles of auxiliary users of the population (`Observations.auxiliary`)."""
    KNN_TARGETS = "knn-targets"
    """kNN targets with known ratings, and the answers to the sybils planted for them."""
    MEMBERSHIP_CANDIDATES = "membership-candidates"
    """Membership candidates with known ratings, and the answers to the sybils' probes."""


class OutputKind(enum.StrEnum):
    """What an `AttackOutput`'s values hold. The referee has one scoring rule per kind
    (`sim.referee_attacks.SCORERS`); a new kind needs its rule there."""

    Z_HAT = "z_hat"
    """Reconstructed z-scores at the filled cells of RPT releases."""
    GENUINE_SCORE = "genuine_score"
    """Per filled cell, higher = more likely a genuine rating (only the order matters)."""
    RATING_HAT = "rating_hat"
    """Reconstructed ratings on the rating scale, for all m items."""
    ITEM_SET = "item_set"
    """A score per item (higher = more likely in the profile), with `set_sizes`."""
    DENORMALISED_HAT = "denormalised_hat"
    """Ratings at the filled cells of RPT releases."""
    BIT_HAT = "bit_hat"
    """P(true like) at RRT's released cells."""
    SIGN_HAT = "sign_hat"
    """Sign estimates of r − µ for all m items; the magnitude is a confidence."""
    ITEM_HAT = "item_hat"
    """Per kNN target, higher = more likely an item she rated."""
    MEMBERSHIP = "membership"
    """Per membership candidate, the predictions of her held-back ratings."""


@dataclasses.dataclass(frozen=True)
class AttackOutput:
    """What an attack hands to the referee.

    Attributes:
        attack: the attack's registry name, e.g. ``"rpt_spectral"``.
        kind: what `values` hold, an `OutputKind` (a plain string naming one is converted;
            any other string is refused). For ``item_set`` the reconstruction P̂ is the
            `set_sizes[user]` top-scored items, ties in a random order the referee fixes.
        knowledge: one line naming exactly what this fitted instance used (it can be narrower
            than the class's `knowledge`, e.g. when no auxiliary set was available).
        per_user: user id → `UserEstimate` over that user's filled cells (all m items for
            "rating_hat" and "sign_hat"); keyed by the target's id or the candidate's label
            for "item_hat" and "membership". A dict, or a `PackedEstimates` at scale.
        diagnostics: scalar facts about the fit (kept rank, noise edge, iterations, ...), for
            the report; never truth-derived.
        set_sizes: for kind "item_set": user id → ĉ, the size of her reconstructed item set
            (Balu §3.5.2); empty for other kinds.
    """

    attack: str
    kind: OutputKind
    knowledge: str
    per_user: Mapping[str, UserEstimate]
    diagnostics: dict[str, float] = dataclasses.field(default_factory=dict)
    set_sizes: dict[str, int] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        try:  # a string naming a kind (a test, an output file) becomes the enum member
            kind = OutputKind(self.kind)
        except ValueError:
            known = ", ".join(k.value for k in OutputKind)
            raise ValueError(
                f"attack {self.attack!r}: output kind {self.kind!r} has no scoring rule; "
                f"known: {known}"
            ) from None
        object.__setattr__(self, "kind", kind)

    def to_dict(self) -> dict[str, Any]:
        """Header of the output for a report (the arrays are left out)."""
        return {
            "attack": self.attack,
            "kind": self.kind.value,
            "knowledge": self.knowledge,
            "users": len(self.per_user),
            "diagnostics": dict(self.diagnostics),
        }


class Attack(abc.ABC):
    """An attack on what the aggregator observed.

    Subclasses set the class attributes, take their parameters in `__init__` (validated there)
    and implement `_fit`, which returns the `AttackOutput`. `fit` checks the mechanism first.

    Attributes:
        name: registry name (``adversary.attacks.ATTACKS``).
        knowledge: one plain line describing everything the attack may use, e.g.
            "disguised profiles + public σ_max, β_max".
        applies_to: names of the mechanisms whose releases the attack understands.
        needs: the side knowledge it cannot run without (`SideKnowledge`).
        fits_on_sample: whether it may fit on a sample of the users' releases that holds
            every attacked user (`[adversary] fit_users`): True for attacks scored on the
            attacked users' own releases; False for those scored on others (kNN targets,
            membership candidates), which need every release.
    """

    name: ClassVar[str]
    knowledge: ClassVar[str]
    applies_to: ClassVar[tuple[str, ...]]
    needs: ClassVar[frozenset[SideKnowledge]] = frozenset()
    fits_on_sample: ClassVar[bool] = True

    _output: AttackOutput | None = None

    def fit(self, observations: Observations) -> Self:
        """Run the attack on `observations`; the result is in `output()`.

        Raises:
            ValidationError: the run's mechanism is not one the attack applies to.
        """
        mechanism = observations.run_config.mechanism_name
        if mechanism not in self.applies_to:
            raise ValidationError(
                "run_config.mechanism",
                f"attack {self.name!r} applies to {list(self.applies_to)}, got {mechanism!r}",
            )
        output = self._fit(observations)
        keep = observations.knowledge.attack_targets
        self._output = output if keep is None else restrict_to_targets(output, frozenset(keep))
        return self

    @abc.abstractmethod
    def _fit(self, observations: Observations) -> AttackOutput:
        """Compute the output from `observations` (already checked to be applicable)."""

    def output(self) -> AttackOutput:
        """The fitted output.

        Raises:
            NotFittedError: `fit` has not been called.
        """
        if self._output is None:
            raise NotFittedError(f"attack {self.name!r} is not fitted; call fit(observations)")
        return self._output


PROFILE_KINDS = frozenset(OutputKind) - {OutputKind.ITEM_HAT, OutputKind.MEMBERSHIP}
"""Output kinds keyed by the user whose release was attacked (not "item_hat", keyed by a kNN
target, nor "membership", keyed by a candidate's label)."""


def restrict_to_targets(output: AttackOutput, keep: frozenset[str]) -> AttackOutput:
    """`output` with only the estimates of the users in `keep` (the sampled attack targets,
    `[adversary] targets`), in its own order; outputs not keyed by attacked users unchanged.
    The fit itself read every release: the estimates of the targets are what they would be
    without the restriction."""
    if output.kind not in PROFILE_KINDS:
        return output
    users = [u for u in output.per_user if u in keep]
    per_user: Mapping[str, UserEstimate]
    if isinstance(output.per_user, PackedEstimates):
        per_user = output.per_user.subset(users)
    else:
        per_user = {u: output.per_user[u] for u in users}
    set_sizes = {u: c for u, c in output.set_sizes.items() if u in keep}
    return dataclasses.replace(output, per_user=per_user, set_sizes=set_sizes)


def per_user_from_flat(
    user_ids: list[str], indptr: IndexArray, indices: IndexArray, values: FloatArray
) -> PackedEstimates:
    """CSR-ordered flat arrays as a `UserEstimate` per user (copied, packed)."""
    bounds = np.asarray(indptr, dtype=np.int64)
    a, b = int(bounds[0]), int(bounds[-1])
    return PackedEstimates(
        user_ids,
        bounds - a,
        np.array(indices[a:b], dtype=np.int64),
        np.array(values[a:b], dtype=np.float64),
    )


__all__ = [
    "PROFILE_KINDS",
    "Attack",
    "AttackOutput",
    "OutputKind",
    "PackedEstimates",
    "SideKnowledge",
    "UserEstimate",
    "per_user_from_flat",
    "restrict_to_targets",
]
