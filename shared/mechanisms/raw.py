"""No perturbation: the user sends her ratings as they are (a trusted-curator run).

Zhu's PNCF, Wang & Tang's DP neighbourhood models and Balu's DP count-sketch factorisation
assume a trusted curator that holds the raw ratings and protects only what it *outputs*. In
privrec the aggregator is untrusted, so such a run is stated as what it is: every user
releases her raw ratings through this mechanism (in the clear, like Xin & Jaakkola's public
users), and whatever guarantee the run has is the model's output privacy against other users
and observers (`Model.output_privacy`), never privacy from the aggregator. Its own statement
is therefore "none".

The release is deterministic (the generator is not used) and carries exactly her rated items.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from privrec.shared.accounting import dp
from privrec.shared.capabilities import PayloadKind, ReleaseKind, ReleaseScale
from privrec.shared.mechanisms.base import (
    Mechanism,
    Payload,
    PrivacyStatement,
    Profile,
    SparsePayload,
    require_sparse,
)


class RawRatings(Mechanism):
    """The identity release (see the module docstring)."""

    name: ClassVar[str] = "raw"
    payload_field: ClassVar[str] = "raw_ratings"
    releases: ClassVar[ReleaseKind] = ReleaseKind(PayloadKind.SPARSE, ReleaseScale.RATING)

    def public_params(self) -> dict[str, Any]:
        """None: the identity release has no parameters."""
        return {}

    def release(self, profile: Profile, rng: np.random.Generator) -> Payload:
        """The user's ratings as they are (nothing is random)."""
        del rng  # nothing is random
        return SparsePayload(
            profile.n_items,
            np.asarray(profile.items, dtype=np.int64).copy(),
            np.asarray(profile.ratings, dtype=np.float64).copy(),
        )

    def privacy(self) -> PrivacyStatement:
        """No privacy: the ratings are released unperturbed."""
        return PrivacyStatement(
            kind="none",
            epsilon=None,
            delta=None,
            neighbouring="n/a",
            notes=(
                "trusted curator: the aggregator sees every raw rating; a guarantee, if any, "
                "is the model's output privacy against other users and observers"
            ),
        )

    def event(self) -> dp.DpEvent:
        """A non-private event: there is no guarantee to account."""
        return dp.NonPrivateDpEvent()

    def validate(self, payload: Payload, n_items: int) -> None:
        """Refuse an empty release or one over another catalogue."""
        require_sparse(payload, "raw_ratings", n_items, "a release must hold at least one rating")


__all__ = ["RawRatings"]
