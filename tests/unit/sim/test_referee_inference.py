"""The referee's scorers of the inference attacks, on hand-checkable outputs."""

from __future__ import annotations

import numpy as np
import pytest

from privrec.adversary.attacks.base import AttackOutput, UserEstimate
from privrec.adversary.knowledge import AdversaryKnowledge, KnownProfile
from privrec.shared.mechanisms.base import SparsePayload
from privrec.sim.referee_attacks import score_attack
from tests.run_configs import make_run_config


def _out(kind: str, per_user: dict[str, tuple[list[int], list[float]]]) -> AttackOutput:
    return AttackOutput(
        "x",
        kind,
        "k",
        {
            u: UserEstimate(np.array(i, dtype=np.int64), np.array(v, dtype=np.float64))
            for u, (i, v) in per_user.items()
        },
    )


def test_items_precision_and_baselines() -> None:
    """Target "1" rated {0..5}; the attacker knew {0, 1}; it inferred 2 (hit), 9 (miss), 3
    (hit) in that order: precision 2/3, recall 2/4. Item popularity (users "1", "2", "3") puts
    2 and 3 first after the known ones."""
    truth = {
        "1": (np.arange(6), np.ones(6)),
        "2": (np.array([2, 3, 7]), np.ones(3)),
        "3": (np.array([2, 3, 8]), np.ones(3)),
    }
    knowledge = AdversaryKnowledge(targets=(KnownProfile("1", np.array([0, 1]), np.ones(2)),))
    out = _out("item_hat", {"1": ([2, 3, 9], [1.0, 0.8, 0.9])})
    rc = make_run_config("rpt", {"sigma_max": 1.0, "beta_max": 0}, 10)
    m = score_attack("x", out, truth, run_config=rc, knowledge=knowledge)
    assert m["precision_inferred"] == pytest.approx(2 / 3)
    assert m["recall_inferred"] == pytest.approx(2 / 4)
    assert m["precision_inferred_popularity"] == pytest.approx(1.0)  # {2, 3, …}: top 3 = 2, 3, 4
    assert m["precision_chance"] == pytest.approx(4 / 8)


def test_membership_auc_and_kld() -> None:
    """Members predicted exactly, non-members off by 1 or 2: AUC 1, member loss 0."""
    cands = tuple(KnownProfile(f"c{i}", np.array([0, 1]), np.array([3.0, 4.0])) for i in range(4))
    knowledge = AdversaryKnowledge(candidates=cands)
    out = _out(
        "membership",
        {
            "c0": ([0, 1], [3.1, 3.9]),
            "c1": ([0, 1], [2.9, 4.1]),
            "c2": ([0, 1], [4.0, 2.0]),
            "c3": ([0, 1], [1.0, 5.0]),
        },
    )
    members = {"c0": True, "c1": True, "c2": False, "c3": False}
    m = score_attack("x", out, {}, knowledge=knowledge, members=members)
    assert m["auc"] == 1.0 and m["n_members"] == 2
    assert m["loss_members"] == pytest.approx(0.01)
    assert m["kld"] > 1.0


def test_bits_and_flips() -> None:
    """One user, M = 2 groups of 4 items: true likes (r > 3) at items 0, 1, 4; group 1 was
    flipped. The attack recovers group 0 and leaves group 1 as released: half the bits and
    half the flips are right; flipping group 1 too makes every bit right."""
    truth = {"u": (np.array([0, 1, 4, 5]), np.array([5.0, 4.0, 5.0, 1.0]))}
    released = {"u": SparsePayload(8, np.array([0, 1, 4, 5]), np.array([1.0, 1.0, 0.0, 1.0]))}
    rc = make_run_config("rrt", {"theta": 0.7, "n_groups": 2, "threshold": 3.0}, 8)
    out = _out("bit_hat", {"u": ([0, 1, 4, 5], [0.9, 0.9, 0.2, 0.8])})
    m = score_attack("x", out, truth, releases=released, run_config=rc)
    assert m["bit_accuracy"] == pytest.approx(0.5)
    assert m["bit_accuracy_released"] == pytest.approx(0.5)
    assert m["flip_accuracy"] == pytest.approx(0.5)  # group 0 right, group 1 missed
    fixed = _out("bit_hat", {"u": ([0, 1, 4, 5], [0.9, 0.9, 0.8, 0.2])})
    assert score_attack("x", fixed, truth, releases=released, run_config=rc)["bit_accuracy"] == 1


def test_denormalised_ratings() -> None:
    """RMSE on the genuine cells; estimates on other (fake) cells are ignored."""
    truth = {"u": (np.array([1, 3]), np.array([4.0, 2.0]))}
    out = _out("denormalised_hat", {"u": ([1, 2, 3], [4.0, 5.0, 3.0])})
    m = score_attack("x", out, truth)
    assert m["rmse"] == pytest.approx(np.sqrt(0.5))
    assert m["rmse_global_mean"] == pytest.approx(1.0)
    assert m["exact_rate"] == 0.5 and m["coverage"] == 1.0


def test_signs_up_to_global_sign() -> None:
    """A user whose estimate is exactly the mirror of her signs scores 0 with the attack's
    sign and 1 up to the global sign; her "above her mean" AUC is 0, 1 up to the sign."""
    public = {"p": SparsePayload(4, np.arange(4), np.full(4, 3.0))}  # µ = 3 everywhere
    truth = {"u": (np.arange(4), np.array([5.0, 1.0, 4.0, 2.0]))}
    out = _out("sign_hat", {"u": ([0, 1, 2, 3], [-2.0, 2.0, -1.0, 1.0])})
    m = score_attack("x", out, truth, public=public)
    assert m["sign_accuracy"] == 0.0 and m["sign_accuracy_global"] == 1.0
    assert m["above_mean_auc"] == 0.0 and m["above_mean_auc_global"] == 1.0


@pytest.mark.parametrize("kind", ["bit_hat", "item_hat", "membership"])
def test_missing_context_is_an_error(kind: str) -> None:
    """A kind scored without what it needs says so."""
    with pytest.raises(ValueError, match="needs"):
        score_attack("x", _out(kind, {"u": ([0], [1.0])}), {})


def test_sign_chance_is_an_accuracy_as_for_the_reconstruction() -> None:
    """Regression: #25 `second_order_signs` reported sign_accuracy_global_chance = 64.754 (a
    count times the vector length twice). Two users with 4 and 2 rated cells: the binomial
    chance of the best flip is E[max(X, n − X)] / n pooled over cells, (2.75 + 1.5) / 6 by
    hand, and equal to the same metric of `second_order_reconstruction` on the same cells."""
    public = {"p": SparsePayload(4, np.arange(4), np.full(4, 3.0))}  # µ = 3 everywhere
    truth = {
        "u": (np.arange(4), np.array([5.0, 1.0, 4.0, 2.0])),
        "v": (np.array([0, 2]), np.array([4.0, 1.0])),
    }
    estimates = {"u": ([0, 1, 2, 3], [1.0, -1.0, 1.0, 1.0]), "v": ([0, 2], [1.0, 1.0])}
    signs = score_attack("x", _out("sign_hat", estimates), truth, public=public)
    assert signs["sign_accuracy_global_chance"] == pytest.approx((2.75 + 1.5) / 6)
    ratings = {u: (i, [3.0 + v for v in vals]) for u, (i, vals) in estimates.items()}
    recon = score_attack("x", _out("rating_hat", ratings), truth, public=public)
    assert signs["sign_accuracy_global_chance"] == pytest.approx(
        recon["sign_accuracy_global_chance"]
    )
