"""The kNN graph on sanitized vectors and the de-biased estimates it compares."""

from __future__ import annotations

import numpy as np
import pytest

from privrec.server.models.sketch_knn import SketchKNN, cosine_knn
from privrec.shared.mechanisms import make_mechanism
from privrec.shared.mechanisms.base import Profile


def test_cosine_knn_matches_brute_force() -> None:
    """Blocked cosine kNN equals a direct computation, never lists a row as its own neighbour."""
    x = np.random.default_rng(0).normal(size=(57, 9))
    got = cosine_knn(x, 5, block=8)
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    sim = unit @ unit.T
    np.fill_diagonal(sim, -np.inf)
    np.testing.assert_array_equal(got, np.argsort(-sim, axis=1, kind="stable")[:, :5])
    assert not np.any(got == np.arange(57)[:, None])


def test_sketch_knn_publishes_graph_and_answers_no_queries() -> None:
    """fit builds the graph; the model says it answers no Predict queries."""
    model = SketchKNN(k=3).fit(np.eye(6) + 0.1)
    assert model.public_arrays()["neighbours"].shape == (6, 3)
    assert SketchKNN.answers_queries is False
    with pytest.raises(ValueError, match="k"):
        SketchKNN(k=0)


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("blip", {"epsilon": 4.0, "n_bits": 64, "n_hashes": 2}),
        ("oue", {"epsilon": 2.0}),
    ],
)
def test_estimate_is_unbiased(name: str, params: dict) -> None:
    """E[estimate] equals the clean encoding (mean of 4000 releases within 5 standard errors;
    false-failure rate < 1e-5 per coordinate by the normal tail); a broken de-biasing is not."""
    n_items = 40
    mech = make_mechanism(name, params)
    profile = Profile(np.array([1, 7, 30]), np.ones(3), n_items)
    rng = np.random.default_rng(1)
    est = np.stack([mech.estimate(mech.release(profile, rng), n_items) for _ in range(4000)])
    clean = (
        mech.bloom_filter(profile).astype(float)
        if name == "blip"
        else np.isin(np.arange(n_items), profile.items).astype(float)
    )
    se = est.std(axis=0, ddof=1) / np.sqrt(len(est))
    assert np.all(np.abs(est.mean(axis=0) - clean) < 5 * se + 1e-12)
    raw = est * 0.7  # a mis-scaled estimator must be caught
    assert np.any(np.abs(raw.mean(axis=0) - clean) > 5 * se)
