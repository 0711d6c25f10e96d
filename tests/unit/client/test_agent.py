"""A simulated user (`client.agent.UserAgent`): what leaves her client and what stays."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from privrec.client.agent import UserAgent
from privrec.shared.config import ExperimentConfig
from privrec.shared.data.dataset import RatingData
from privrec.shared.mechanisms import RandomizedPerturbation
from privrec.shared.mechanisms.completion import complete_vector
from privrec.shared.population import population_plan
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.serde import payload_from_proto
from privrec.shared.zscores import zscore


def tiny_data() -> RatingData:
    rng = np.random.default_rng(3)
    dense = np.where(rng.random((6, 20)) < 0.7, rng.integers(1, 6, (6, 20)), 0).astype(float)
    return RatingData("tiny", sp.csr_matrix(dense), np.arange(6) + 100, np.arange(20), (1.0, 5.0))


def agent() -> UserAgent:
    (plan,) = population_plan(tiny_data(), ExperimentConfig(), [2])
    return UserAgent.from_plan(plan, seed=0)


def test_agent_follows_the_public_plan() -> None:
    """from_plan keeps the plan's id, withheld items and tier."""
    a = agent()
    assert a.user_id == "102" and a.withheld.size == 5 and a.tier == pb.TIER_PRIVATE
    assert set(a.withheld) <= set(a.profile.items)


def test_query_holds_no_withheld_rating_and_is_fresh() -> None:
    """The query release covers her non-withheld items only, disguised anew each index."""
    a = agent()
    a.token = "t"
    mech = RandomizedPerturbation(1.0, 0)
    q0, q1 = a.query_request("run", mech, 0), a.query_request("run", mech, 1)
    _, p0 = payload_from_proto(q0.query)
    _, p1 = payload_from_proto(q1.query)
    assert not set(p0.indices) & set(a.withheld)  # type: ignore[union-attr]
    assert list(q0.items) == a.withheld.tolist()
    assert (q0.query.nonce, q1.query.nonce) == ("query-0", "query-1")
    assert not np.array_equal(p0.values, p1.values)  # type: ignore[union-attr]


def test_public_release_is_her_training_ratings_verbatim() -> None:
    """A public-tier user shares exactly her non-withheld ratings."""
    a = agent()
    field, payload = payload_from_proto(a.public_release("run"))
    q = a.query_profile()
    assert field == "public_ratings"
    np.testing.assert_array_equal(payload.indices, q.items)  # type: ignore[union-attr]
    np.testing.assert_array_equal(payload.values, q.ratings)  # type: ignore[union-attr]


def test_local_prediction_applies_the_named_rule() -> None:
    """`local_predictions` with the low-rank rule is Xin & Jaakkola Eq. (4) on her ratings."""
    a = agent()
    rng = np.random.default_rng(0)
    published = {"mu": rng.normal(3, 0.2, 20), "V": rng.normal(size=(20, 2)), "ridge": 1.0}
    q = a.query_profile()
    expected = complete_vector(q.items, q.ratings, published["mu"], published["V"], 1.0)
    got = a.local_predictions("low_rank_completion", published)  # type: ignore[arg-type]
    np.testing.assert_allclose(got, expected[a.withheld])


def test_denormalise_uses_her_own_statistics() -> None:
    """p = v̄ + σ·P′ with the mean and deviation of her query ratings (Bilge Eq 2.5)."""
    a = agent()
    z = zscore(a.query_profile().ratings)
    np.testing.assert_allclose(a.denormalise(np.array([0.0, 1.0]), None), [z.mean, z.mean + z.std])
