"""RRT: randomized response on groups of binary ratings (Bilge 2013, §2.2.2, Procedure 2).

After Kaleli & Polat (2007) and Warner (1965). The user binarises her ratings (like = rating >
threshold, 1; otherwise 0), splits the catalogue into M contiguous groups, and for each group
draws r_i ~ U(0, 1): if r_i > θ the whole group is negated (probability 1 − θ), otherwise it is
kept (probability θ). Unrated cells (⊥) stay unrated: the release holds exactly her rated items,
each with a 0/1 value. θ and M are global and public (Bilge Procedure 2, lines 2–11).

Choices where the thesis is silent (Bilge extraction §1.3; docs/decisions/mechanisms.md):
  * ⊥ is never negated and no fake cells are filled, the reading consistent with Bilge's example.
  * Non-integer m/M: item j (0-based) belongs to group ⌊j·M/m⌋, so the M groups are contiguous
    and their sizes differ by at most one (M ≤ m is required).
  * Binarisation threshold 3.0, strictly greater ("> 3" for MovieLens, Bilge Ch. 8); ≥ would be a
    careless reading (extraction, careless list).
  * θ ∈ [1/2, 1]: θ < 1/2 is the same mechanism with the server negating every group.
  * Draw order: exactly M uniforms from the user's generator, one per group in group order, even
    for groups where she rated nothing (so the draws do not depend on her profile).
  * Defaults θ = 0.7, M = 3 (Kaleli & Polat 2007, quoted in Bilge §8.2).

Privacy: RRT has NO differential-privacy guarantee under any neighbouring relation: which items
she rated is released exactly (adding or removing a rated item changes the release's support),
and two rated cells of the same group are negated together, so their XOR is released exactly
(changing one rating in a group holding another rated cell gives disjoint output sets). What it
offers is per-cell deniability: each released value, looked at alone, is correct with
probability θ, i.e. log-odds ln(θ/(1−θ)) (0.847 at θ = 0.7), and only a user with at most one
rated cell per group gets that ε for "one rating flipped".

References:
    A. Bilge, PhD thesis, Anadolu University, 2013, §2.2.2, Procedure 2.
    C. Kaleli, H. Polat, "Providing naive Bayesian classifier-based private recommendations on
    partitioned data", PKDD 2007.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privrec.shared.accounting import dp
from privrec.shared.capabilities import PayloadKind, ReleaseKind, ReleaseScale
from privrec.shared.errors import ValidationError
from privrec.shared.mechanisms.base import (
    Mechanism,
    Payload,
    PrivacyStatement,
    Profile,
    SparsePayload,
    require_payload,
)
from privrec.shared.mechanisms.params import check_int, check_param
from privrec.shared.types import FloatArray, IntArray


def group_of(items: IntArray, n_items: int, n_groups: int) -> IntArray:
    """Group index ⌊j·M/m⌋ of each item j: M contiguous groups of sizes ⌊m/M⌋ or ⌈m/M⌉."""
    return (np.asarray(items, dtype=np.int64) * n_groups) // n_items


def binarise(ratings: np.ndarray, threshold: float) -> np.ndarray:
    """1.0 where rating > threshold (like), else 0.0 (Bilge Ch. 8)."""
    return (np.asarray(ratings) > threshold).astype(np.float64)


class RandomizedResponseGroups(Mechanism):
    """Bilge Procedure 2 with public θ, M and binarisation threshold.

    Args:
        theta: probability θ ∈ [1/2, 1] that a group is sent as is.
        n_groups: M, the number of contiguous item groups (each negated together).
        threshold: a rating > threshold is a like (1), otherwise a dislike (0).
    """

    name = "rrt"
    payload_field = "rrt"
    releases = ReleaseKind(PayloadKind.SPARSE, ReleaseScale.BINARY)

    def __init__(self, theta: float = 0.7, n_groups: int = 3, threshold: float = 3.0) -> None:
        self.theta = check_param("theta", theta, low=0.5, high=1.0)
        self.n_groups = check_int("n_groups", n_groups, low=1)
        self.threshold = check_param("threshold", threshold)

    def public_params(self) -> dict[str, Any]:
        """The public θ, M and binarisation threshold."""
        return {"theta": self.theta, "n_groups": self.n_groups, "threshold": self.threshold}

    def _check_catalogue(self, n_items: int) -> None:
        if self.n_groups > n_items:
            raise ValueError(
                f"`n_groups` = {self.n_groups} exceeds the catalogue's {n_items} items"
            )

    def negations(self, rng: np.random.Generator) -> np.ndarray:
        """Which groups are negated: r_i > θ for r_i ~ U(0, 1) (Procedure 2, lines 4–6)."""
        return rng.random(self.n_groups) > self.theta

    def release_with_negations(
        self, profile: Profile, rng: np.random.Generator
    ) -> tuple[SparsePayload, np.ndarray]:
        """The release and the private per-group negation flags behind it."""
        self._check_catalogue(profile.n_items)
        neg = self.negations(rng)
        likes = binarise(profile.ratings, self.threshold)
        flip = neg[group_of(profile.items, profile.n_items, self.n_groups)]
        values = np.where(flip, 1.0 - likes, likes)
        return SparsePayload(profile.n_items, np.asarray(profile.items, np.int64), values), neg

    def release(self, profile: Profile, rng: np.random.Generator) -> SparsePayload:
        """The group-negated binary ratings of Bilge Procedure 2 (negations discarded)."""
        return self.release_with_negations(profile, rng)[0]

    def privacy(self) -> PrivacyStatement:
        """No DP claim: the rated items and each group's XOR are released exactly (see flags)."""
        odds = np.log(self.theta / (1.0 - self.theta)) if self.theta < 1.0 else np.inf
        return PrivacyStatement(
            kind="none",
            epsilon=None,
            delta=None,
            neighbouring="not applicable",
            notes=(
                "RRT (Bilge 2013, Procedure 2) gives no differential-privacy guarantee: the set "
                "of rated items is released exactly, and cells of one group are negated "
                "together, so their XOR is released exactly. Each value alone is correct with "
                f"probability theta = {self.theta:g} (per-cell log-odds {odds:.4g}); a user "
                "with at most one rated cell per group would get that eps for one flipped "
                "rating."
            ),
            flags=("rated-items-revealed", "group-xor-revealed"),
        )

    def event(self) -> dp.DpEvent:
        """A non-private event: RRT has no DP guarantee."""
        return dp.NonPrivateDpEvent()

    def estimate(self, payload: Payload, n_items: int) -> FloatArray:
        """Like = +1, dislike = −1 at the rated cells, 0 elsewhere. Each value is right with
        probability θ (Bilge §8.3.1), so E = (2θ − 1)·truth: a global scale, irrelevant to
        cosine similarity."""
        require_payload(payload, SparsePayload, "rrt")
        assert isinstance(payload, SparsePayload)
        dense = np.zeros(n_items)
        dense[payload.indices] = 2.0 * np.asarray(payload.values) - 1.0
        return dense

    def validate(self, payload: Payload, n_items: int) -> None:
        """Refuse another catalogue, unsorted or out-of-range indices, values other than 0/1."""
        require_payload(payload, SparsePayload, "rrt")
        assert isinstance(payload, SparsePayload)
        if payload.dim != n_items:
            raise ValidationError(
                "rrt.dim", f"must equal the run's n_items {n_items}, got {payload.dim}"
            )
        idx = np.asarray(payload.indices)
        val = np.asarray(payload.values)
        if idx.ndim != 1 or val.ndim != 1 or idx.size != val.size:
            raise ValidationError(
                "rrt.values",
                f"needs one value per index, got {val.size} values for {idx.size} indices",
            )
        if idx.size == 0:
            raise ValidationError("rrt.indices", "a release must hold at least one rated cell")
        if idx.min() < 0 or idx.max() >= n_items:
            raise ValidationError(
                "rrt.indices", f"every index must be < n_items {n_items}, got max {int(idx.max())}"
            )
        if np.any(np.diff(idx) <= 0):
            raise ValidationError("rrt.indices", "must be strictly increasing")
        if not np.all((val == 0.0) | (val == 1.0)):
            bad = val[(val != 0.0) & (val != 1.0)][0]
            raise ValidationError("rrt.values", f"must be 0 or 1, got {bad!r}")


__all__ = ["RandomizedResponseGroups", "binarise", "group_of"]
