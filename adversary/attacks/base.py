"""The interface every attack implements: `Attack(...).fit(observations).output()`.

An attack is constructed with its parameters (sklearn style, STYLE.md item 4), reads only what the
untrusted server observed plus public parameters and an explicitly declared auxiliary set
(`adversary.observations.Observations`), and produces per-user estimates that the referee
(`sim.referee_attacks`) scores against the truth it alone holds. Attacks never see truth.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any, ClassVar, NamedTuple, Self

import numpy as np

from privrec.adversary.observations import Observations
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


@dataclasses.dataclass(frozen=True)
class AttackOutput:
    """What an attack hands to the referee.

    Attributes:
        attack: the attack's registry name, e.g. ``"rpt_spectral"``.
        kind: what `values` hold: ``"z_hat"`` (reconstructed z-scores), ``"genuine_score"``
            (higher = more likely a genuine rating; only the order matters), ``"rating_hat"``
            (reconstructed ratings on the rating scale) or ``"item_set"`` (a score per item,
            higher = more likely in the user's profile; the reconstruction P̂ is the
            `set_sizes[user]` top-scored items, ties in a random order the referee fixes); and
            for the inference attacks (scored by `sim.referee_inference`):
            ``"denormalised_hat"`` (ratings at the filled cells of RPT releases), ``"bit_hat"``
            (P(true like) at RRT's released cells), ``"sign_hat"`` (the sign estimates
            sign(r − µ), the magnitude is a confidence), ``"item_hat"`` (per kNN target, higher
            = more likely an item she rated) and ``"membership"`` (per membership candidate, the
            predictions of her held-back ratings).
        knowledge: one line naming exactly what this fitted instance used (it can be narrower
            than the class's `knowledge`, e.g. when no auxiliary set was available).
        per_user: user id → `UserEstimate` over that user's filled cells (all m items for
            "rating_hat" and "sign_hat"); keyed by the target's id or the candidate's label
            for "item_hat" and "membership".
        diagnostics: scalar facts about the fit (kept rank, noise edge, iterations, ...), for
            the report; never truth-derived.
        set_sizes: for kind "item_set": user id → ĉ, the size of her reconstructed item set
            (Balu §3.5.2); empty for other kinds.
    """

    attack: str
    kind: str
    knowledge: str
    per_user: dict[str, UserEstimate]
    diagnostics: dict[str, float] = dataclasses.field(default_factory=dict)
    set_sizes: dict[str, int] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Header of the output for a report (the arrays are left out)."""
        return {
            "attack": self.attack,
            "kind": self.kind,
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
    """

    name: ClassVar[str]
    knowledge: ClassVar[str]
    applies_to: ClassVar[tuple[str, ...]]

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
        self._output = self._fit(observations)
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


def per_user_from_flat(
    user_ids: list[str], indptr: IndexArray, indices: IndexArray, values: FloatArray
) -> dict[str, UserEstimate]:
    """Split CSR-ordered flat arrays into a `UserEstimate` per user (copies, not views)."""
    return {
        uid: UserEstimate(
            indices[indptr[u] : indptr[u + 1]].astype(np.int64),
            np.asarray(values[indptr[u] : indptr[u + 1]], dtype=np.float64).copy(),
        )
        for u, uid in enumerate(user_ids)
    }


__all__ = ["Attack", "AttackOutput", "UserEstimate", "per_user_from_flat"]
