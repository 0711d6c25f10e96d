"""RRT (Bilge Procedure 2): groups, binarisation, group-level keep probability θ."""

from __future__ import annotations

import numpy as np
import pytest

from privrec.shared.errors import ValidationError
from privrec.shared.mechanisms import RandomizedResponseGroups
from privrec.shared.mechanisms.base import Profile, SparsePayload
from privrec.shared.mechanisms.rrt import binarise, group_of

from ._helpers import ALPHA, binomial_pvalue, random_profiles, rngs


def test_groups_are_contiguous_and_balanced() -> None:
    """M contiguous groups whose sizes differ by at most one (m = 1682, M = 3: 561, 561, 560)."""
    g = group_of(np.arange(1682), 1682, 3)
    assert np.all(np.diff(g) >= 0) and g[0] == 0 and g[-1] == 2
    assert np.bincount(g).tolist() == [561, 561, 560]
    sizes = np.bincount(group_of(np.arange(100), 100, 7))
    assert sizes.size == 7 and sizes.max() - sizes.min() <= 1


def test_binarisation_is_strictly_greater_than_threshold() -> None:
    """> 3 is a like; 3 itself is a dislike (Bilge Ch. 8; '≥ 3' is the careless reading)."""
    np.testing.assert_array_equal(binarise(np.array([1, 2, 3, 3.5, 4, 5]), 3.0), [0, 0, 0, 1, 1, 1])


def test_unrated_cells_untouched_and_groups_negated_together() -> None:
    """The release holds exactly the rated items; within a group all values flip together."""
    mech = RandomizedResponseGroups(theta=0.7, n_groups=3)
    p = random_profiles(4, 1, 60, low=40, high=40)[0]
    likes = binarise(p.ratings, 3.0)
    groups = group_of(p.items, 60, 3)
    for r in rngs(4, 50):
        out, neg = mech.release_with_negations(p, r)
        np.testing.assert_array_equal(out.indices, p.items)
        assert out.dim == 60
        flipped = out.values != likes
        np.testing.assert_array_equal(flipped, neg[groups])


class _Scaled(RandomizedResponseGroups):
    """A mis-implemented RRT keeping groups with probability factor·θ (for power checks)."""

    def __init__(self, factor: float) -> None:
        super().__init__()
        self._keep = self.theta * factor

    def negations(self, rng: np.random.Generator) -> np.ndarray:
        return rng.random(self.n_groups) > self._keep


def _kept(mech: RandomizedResponseGroups, n_users: int) -> tuple[int, int]:
    """(kept groups, groups) over users rating every item of a 30-item catalogue."""
    p = Profile(np.arange(30), np.linspace(1, 5, 30), 30)
    likes = binarise(p.ratings, 3.0)
    groups = group_of(p.items, 30, 3)
    kept = 0
    for r in rngs(5, n_users):
        same = mech.release(p, r).values == likes
        kept += sum(bool(same[groups == g].all()) for g in range(3))
    return kept, 3 * n_users


def test_group_keep_probability_is_theta_and_rejects_mis_scaled() -> None:
    """Kept groups ~ Binomial(n, θ = 0.7) (exact test, α = 1e-3); θ·0.7 and θ·1.3 rejected.

    Power: 3000 groups; 0.7 vs 0.49 or 0.91 is > 14 standard errors.
    """
    kept, n = _kept(RandomizedResponseGroups(), 1000)
    assert binomial_pvalue(kept, n, 0.7) > ALPHA
    for factor in (0.7, 1.3):
        bad_kept, _ = _kept(_Scaled(factor), 1000)
        assert binomial_pvalue(bad_kept, n, 0.7) < ALPHA


def test_draws_do_not_depend_on_the_profile() -> None:
    """M uniforms per release whatever she rated: equal seeds give equal negations."""
    mech = RandomizedResponseGroups()
    a = random_profiles(6, 2, 40)
    _, n1 = mech.release_with_negations(a[0], rngs(6, 1)[0])
    _, n2 = mech.release_with_negations(a[1], rngs(6, 1)[0])
    np.testing.assert_array_equal(n1, n2)


def test_more_groups_than_items_is_an_error() -> None:
    """M ≤ m is required."""
    with pytest.raises(ValueError, match="n_groups"):
        RandomizedResponseGroups(n_groups=50).release(random_profiles(1, 1, 10)[0], rngs(0, 1)[0])


def test_privacy_is_none_with_per_cell_odds_in_notes() -> None:
    """No DP claim; the notes give ln(θ/(1−θ)) and the flags say what leaks."""
    st = RandomizedResponseGroups().privacy()
    assert st.kind == "none" and st.epsilon is None
    assert "0.8473" in st.notes
    assert set(st.flags) == {"rated-items-revealed", "group-xor-revealed"}


@pytest.mark.parametrize(
    ("payload", "field", "msg"),
    [
        (SparsePayload(10, np.array([1, 3]), np.array([0.0, 0.5])), "rrt.values", "0 or 1"),
        (SparsePayload(10, np.array([3, 1]), np.array([0.0, 1.0])), "rrt.indices", "increasing"),
        (SparsePayload(10, np.array([1, 10]), np.array([0.0, 1.0])), "rrt.indices", "< n_items"),
        (SparsePayload(10, np.array([1, 2]), np.array([0.0])), "rrt.values", "one value per"),
        (SparsePayload(10, np.array([], dtype=np.int64), np.array([])), "rrt.indices", "at least"),
        (SparsePayload(11, np.array([1]), np.array([1.0])), "rrt.dim", "n_items 10"),
    ],
)
def test_validate_names_the_bad_field(payload: SparsePayload, field: str, msg: str) -> None:
    """Each malformed release is rejected with the offending field."""
    with pytest.raises(ValidationError, match=msg) as info:
        RandomizedResponseGroups().validate(payload, 10)
    assert info.value.field == field
