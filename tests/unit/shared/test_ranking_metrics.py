"""Top-K ranking metrics (`shared.ranking_metrics`): hand-made cases worked out on paper, and
NDCG against scikit-learn's `ndcg_score` and a written-out reference of the other metrics on
random users (fixed seeds, equal to 1e-12)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import ndcg_score

from privrec.shared.ranking_metrics import ranking_scores, top_k


def test_ranking_scores_by_hand() -> None:
    """Two users, K = 3, worked out on paper.

    User a: list [5, 1, 7], relevant {1, 9}: one hit at rank 2. User b: list [2, 3, 4],
    relevant {2}: a hit at rank 1. popularity φ = item index."""
    lists = [np.array([5, 1, 7]), np.array([2, 3, 4])]
    relevant = [np.array([1, 9]), np.array([2])]
    got = ranking_scores(lists, relevant, [3, 1], n_items=10, popularity=np.arange(10.0))
    inv = 1 / math.log2(3)  # the discount at rank 2
    assert got["precision_at_3"] == pytest.approx((1 / 3 + 1 / 3) / 2)
    assert got["recall_at_3"] == pytest.approx((1 / 2 + 1) / 2)
    assert got["ndcg_at_3"] == pytest.approx((inv / (1 + inv) + 1.0) / 2)
    assert got["hit_rate_at_3"] == 1.0
    assert got["mrr_at_3"] == pytest.approx((1 / 2 + 1) / 2)
    assert got["coverage_at_3"] == pytest.approx(6 / 10)  # {1, 2, 3, 4, 5, 7}
    assert got["arp_at_3"] == pytest.approx(((5 + 1 + 7) / 3 + (2 + 3 + 4) / 3) / 2)
    # K = 1: a's first item misses, b's hits
    assert got["precision_at_1"] == got["hit_rate_at_1"] == got["mrr_at_1"] == 0.5
    assert got["ndcg_at_1"] == 0.5
    assert got["recall_at_1"] == pytest.approx(0.5)
    assert got["coverage_at_1"] == pytest.approx(2 / 10)


def test_short_lists_divide_precision_by_k() -> None:
    """A user with fewer candidates than K: precision still divides by K, recall by |R|."""
    got = ranking_scores([np.array([4])], [np.array([4])], [5], 10, np.ones(10))
    assert got["precision_at_5"] == pytest.approx(1 / 5)
    assert got["recall_at_5"] == got["ndcg_at_5"] == got["hit_rate_at_5"] == 1.0


def test_top_k_order_ties_and_evidence() -> None:
    """Descending score, ties to the smaller item, items without evidence last."""
    items = np.array([8, 3, 5, 1, 9])
    scores = np.array([0.5, 0.9, 0.5, 2.0, 0.1])
    evidence = np.array([True, True, True, False, True])
    np.testing.assert_array_equal(top_k(items, scores, 5, evidence), [3, 5, 8, 9, 1])
    np.testing.assert_array_equal(top_k(items, scores, 2), [1, 3])


@pytest.mark.parametrize("seed", range(4))
def test_ranking_scores_match_sklearn_and_a_reference(seed: int) -> None:
    """Random users over 60 candidates with distinct scores: NDCG@K equals scikit-learn's
    `ndcg_score(y_true, y_score, k=K)` averaged over users; precision, recall, HR and MRR
    equal a loop written from the definitions."""
    rng = np.random.default_rng(seed)
    n_items, ks = 60, [1, 5, 10, 20]
    lists, relevant, y_true, y_score = [], [], [], []
    for _ in range(25):
        scores = rng.permutation(n_items).astype(float)  # distinct: no tie convention involved
        rel = rng.choice(n_items, size=int(rng.integers(1, 8)), replace=False)
        lists.append(top_k(np.arange(n_items), scores, max(ks)))
        relevant.append(rel)
        truth = np.zeros(n_items)
        truth[rel] = 1.0
        y_true.append(truth)
        y_score.append(scores)
    got = ranking_scores(lists, relevant, ks, n_items, np.ones(n_items))
    for k in ks:
        assert got[f"ndcg_at_{k}"] == pytest.approx(
            ndcg_score(np.array(y_true), np.array(y_score), k=k), abs=1e-12
        )
        prec, rec, hr, rr = [], [], [], []
        for lst, rel in zip(lists, relevant, strict=True):
            hits = [int(i in set(rel.tolist())) for i in lst[:k]]
            prec.append(sum(hits) / k)
            rec.append(sum(hits) / rel.size)
            hr.append(float(any(hits)))
            rr.append(1.0 / (hits.index(1) + 1) if 1 in hits else 0.0)
        assert got[f"precision_at_{k}"] == pytest.approx(np.mean(prec), abs=1e-12)
        assert got[f"recall_at_{k}"] == pytest.approx(np.mean(rec), abs=1e-12)
        assert got[f"hit_rate_at_{k}"] == pytest.approx(np.mean(hr), abs=1e-12)
        assert got[f"mrr_at_{k}"] == pytest.approx(np.mean(rr), abs=1e-12)


def test_ranking_scores_refuse_users_without_relevant_items() -> None:
    """A user with nothing relevant has no recall or NDCG: the caller must leave her out."""
    with pytest.raises(ValueError, match="at least one relevant item"):
        ranking_scores([np.array([1])], [np.array([], dtype=np.int64)], [1], 3, np.ones(3))
