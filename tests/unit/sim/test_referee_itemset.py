"""The vectorised item-set scores equal the per-user reference (`sim.referee_itemset`)."""

from __future__ import annotations

import numpy as np
import pytest

from privrec.adversary.attacks.base import AttackOutput, UserEstimate
from privrec.sim import referee_itemset
from privrec.sim.referee_itemset import score_item_set

N_ITEMS = 60


def _output(
    seed: int, *, ties: str
) -> tuple[AttackOutput, dict[str, tuple[np.ndarray, np.ndarray]]]:
    rng = np.random.default_rng(seed)
    per_user, sizes, truth = {}, {}, {}
    for u in range(200):
        uid = f"u{u}"
        n_scored = int(rng.integers(0, N_ITEMS + 1))
        idx = np.sort(rng.choice(N_ITEMS, size=n_scored, replace=False))
        # few distinct values make ties everywhere (BLIP-like); "deep": ties among the
        # lowest scores only (below the top 10, maybe across the cut); "none": continuous
        val = rng.normal(size=n_scored)
        if ties == "all":
            val = rng.integers(0, 3, n_scored).astype(float)
        elif ties == "deep" and n_scored:
            val[val < np.quantile(val, 0.5)] = -5.0
        per_user[uid] = UserEstimate(idx.astype(np.int64), val)
        sizes[uid] = int(rng.integers(1, 30))
        c = int(rng.choice([0, 1, 5, 20, N_ITEMS])) if u % 7 == 0 else int(rng.integers(1, 40))
        items = rng.choice(N_ITEMS, size=c, replace=False)  # unsorted, as a profile may be
        truth[uid] = (items, np.ones(c))
    truth["not-attacked"] = (np.arange(3), np.ones(3))
    return AttackOutput("a", "item_set", "k", per_user, set_sizes=sizes), truth


@pytest.mark.parametrize("chunk", [7, 20_000])
@pytest.mark.parametrize("ties", ["none", "all", "deep"])
@pytest.mark.parametrize("seed", [0, 1])
def test_vectorised_equals_reference(
    seed: int, ties: str, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Equal figures, whether the users are scored in one pass or in chunks of 7."""
    monkeypatch.setattr(referee_itemset, "CHUNK", chunk)
    output, truth = _output(seed, ties=ties)
    fast = score_item_set(output, truth, N_ITEMS)
    slow = score_item_set(output, truth, N_ITEMS, method="reference")
    assert fast.keys() == slow.keys()
    for key in fast:
        assert fast[key] == pytest.approx(slow[key], rel=1e-12, abs=1e-12, nan_ok=True), key


def test_a_wrong_hit_changes_the_score() -> None:
    """The comparison above can fail: dropping one user's true item moves the figures."""
    output, truth = _output(0, ties="none")
    before = score_item_set(output, truth, N_ITEMS)
    uid = next(u for u, (items, _) in truth.items() if len(items) > 5)
    items, ratings = truth[uid]
    truth[uid] = (items[1:], ratings[1:])
    assert score_item_set(output, truth, N_ITEMS)["cosine_mean"] != before["cosine_mean"]


def test_missing_set_size_and_bad_method_are_refused() -> None:
    output, truth = _output(0, ties="none")
    del output.set_sizes["u3"]
    with pytest.raises(ValueError, match="no set size for user 'u3'"):
        score_item_set(output, truth, N_ITEMS)
    with pytest.raises(ValueError, match="`method`"):
        score_item_set(output, truth, N_ITEMS, method="fast")
