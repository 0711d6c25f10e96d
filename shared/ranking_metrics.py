"""Top-K ranking metrics: precision, recall, NDCG, hit rate and MRR at K, catalogue coverage and
average recommendation popularity (the referee's ranking yardsticks).

The definitions are the ones RecBole, Elliot and LensKit print by default, for binary relevance
(a test item is relevant when its rating reaches the run's threshold, `[evaluation]
relevance_threshold`). For a user with the ranked list L (best first, at most K items) and the
relevant set R (|R| ≥ 1; users without a relevant item are not ranked):

* precision@K = |L_K ∩ R| / K (a list shorter than K still divides by K, as RecBole does);
* recall@K = |L_K ∩ R| / |R|;
* NDCG@K = DCG@K / IDCG@K with DCG@K = Σ_{r ≤ K, L_r ∈ R} 1/log2(r + 1) and IDCG@K the DCG of
  min(K, |R|) hits at the top (Järvelin & Kekäläinen 2002; scikit-learn's `ndcg_score` on the
  user's 0/1 relevance vector);
* HR@K = [L_K ∩ R ≠ ∅];
* MRR@K = 1/r for the rank r ≤ K of the first relevant item, 0 when there is none;

each averaged over the ranked users; and over all lists:

* coverage@K = |∪_u L_K(u)| / n_items (catalogue coverage, Ge et al. 2010);
* ARP@K = mean over users of the mean popularity φ(i) of the items of L_K(u), φ(i) the number
  of training ratings of item i (average recommendation popularity, Abdollahpouri et al. 2019).

References:
    Järvelin, Kekäläinen. "Cumulated gain-based evaluation of IR techniques", TOIS 2002.
    Ge, Delgado-Battenfeld, Jannach. "Beyond accuracy: evaluating recommender systems by
    coverage and serendipity", RecSys 2010.
    Abdollahpouri, Burke, Mobasher. "Managing popularity bias in recommender systems with
    personalized re-ranking", FLAIRS 2019 (ARP).
    Zhao et al. "RecBole: towards a unified, comprehensive and efficient framework for
    recommendation algorithms", CIKM 2021 (the metric definitions of its evaluator).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from privrec.shared.types import BoolArray, FloatArray, IntArray

RANKING_METRICS = ("precision", "recall", "ndcg", "hit_rate", "mrr")
"""The per-user metrics `ranking_scores` returns at each K (then "coverage" and "arp")."""


def top_k(
    items: IntArray, scores: FloatArray, k: int, evidence: BoolArray | None = None
) -> IntArray:
    """The `k` best of `items` by `scores`, best first: descending score, ties to the smaller
    item index (the order of `Recommender.recommend_block`); items without `evidence` (no
    training row behind the score) come after every item with evidence.

    Args:
        items: int array of shape (c,), the candidates.
        scores: float array of shape (c,), their scores.
        k: how many to keep (fewer when there are fewer candidates).
        evidence: bool array of shape (c,), or None (every score has evidence).
    """
    items = np.asarray(items, dtype=np.int64)
    scores = np.asarray(scores, dtype=np.float64)
    no_evidence = np.zeros(items.size, bool) if evidence is None else ~np.asarray(evidence, bool)
    # lexsort: the last key is primary
    order = np.lexsort((items, -scores, no_evidence))[:k]
    ranked: IntArray = items[order]
    return ranked


def hit_matrix(lists: Sequence[IntArray], relevant: Sequence[IntArray], k: int) -> BoolArray:
    """hits[u, r]: whether the item at rank r + 1 of user u's list is relevant to her, for
    r < k (False past the end of a shorter list)."""
    hits = np.zeros((len(lists), k), dtype=bool)
    for u, (ranked, rel) in enumerate(zip(lists, relevant, strict=True)):
        top = np.asarray(ranked[:k], dtype=np.int64)
        hits[u, : top.size] = np.isin(top, rel)
    return hits


def ranking_scores(
    lists: Sequence[IntArray],
    relevant: Sequence[IntArray],
    ks: Sequence[int],
    n_items: int,
    popularity: FloatArray,
) -> dict[str, float]:
    """Every ranking metric of the module docstring at each K in `ks`.

    Args:
        lists: per user, her ranked items (best first, at least max(ks) long when she has as
            many candidates); users with an empty relevant set must be left out by the caller.
        relevant: per user, her relevant test items (non-empty).
        ks: the cut-offs K (each >= 1).
        n_items: the catalogue size (coverage's denominator).
        popularity: float array of shape (n_items,): φ(i), the number of training ratings of
            each item (ARP).

    Returns:
        ``{"precision_at_10": …, "recall_at_10": …, "ndcg_at_10": …, "hit_rate_at_10": …,
        "mrr_at_10": …, "coverage_at_10": …, "arp_at_10": …, …}`` for every K.

    Raises:
        ValueError: no user, a user without relevant items, or a K below 1.
    """
    if not lists or len(lists) != len(relevant):
        raise ValueError(f"need as many lists as relevant sets (>= 1), got {len(lists)}")
    n_rel = np.array([np.asarray(r).size for r in relevant], dtype=np.float64)
    if np.any(n_rel == 0):
        raise ValueError("every ranked user needs at least one relevant item")
    if any(k < 1 for k in ks):
        raise ValueError(f"every K must be >= 1, got {list(ks)}")
    k_max = max(ks)
    hits = hit_matrix(lists, relevant, k_max)
    discount = 1.0 / np.log2(np.arange(2, k_max + 2))
    ideal = np.cumsum(discount)
    first = np.where(hits.any(axis=1), hits.argmax(axis=1) + 1, k_max + 1)  # 1-based
    phi = np.asarray(popularity, dtype=np.float64)
    out: dict[str, float] = {}
    for k in sorted(set(ks)):
        h = hits[:, :k]
        n_hits = h.sum(axis=1)
        dcg = (h * discount[:k]).sum(axis=1)
        idcg = ideal[np.minimum(n_rel, k).astype(np.int64) - 1]
        tops = [np.asarray(lst[:k], dtype=np.int64) for lst in lists]
        shown = np.unique(np.concatenate(tops)) if tops else np.zeros(0, np.int64)
        arp = [float(phi[t].mean()) for t in tops if t.size]
        out |= {
            f"precision_at_{k}": float(np.mean(n_hits / k)),
            f"recall_at_{k}": float(np.mean(n_hits / n_rel)),
            f"ndcg_at_{k}": float(np.mean(dcg / idcg)),
            f"hit_rate_at_{k}": float(np.mean(n_hits > 0)),
            f"mrr_at_{k}": float(np.mean(np.where(first <= k, 1.0 / first, 0.0))),
            f"coverage_at_{k}": shown.size / n_items,
            f"arp_at_{k}": float(np.mean(arp)) if arp else float("nan"),
        }
    return out


__all__ = ["RANKING_METRICS", "hit_matrix", "ranking_scores", "top_k"]
