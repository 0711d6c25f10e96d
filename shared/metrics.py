"""Utility and attack metrics (the referee's yardsticks)."""

from __future__ import annotations

import numpy as np
import scipy.stats

from privrec.shared.types import FloatArray


def mae(predicted: FloatArray, actual: FloatArray) -> float:
    """Mean absolute error (Bilge §2.4)."""
    p, a = np.asarray(predicted, float), np.asarray(actual, float)
    if p.shape != a.shape or p.size == 0:
        raise ValueError(f"need equal, non-empty shapes, got {p.shape} and {a.shape}")
    return float(np.mean(np.abs(p - a)))


def rmse(predicted: FloatArray, actual: FloatArray) -> float:
    """Root mean squared error."""
    p, a = np.asarray(predicted, float), np.asarray(actual, float)
    if p.shape != a.shape or p.size == 0:
        raise ValueError(f"need equal, non-empty shapes, got {p.shape} and {a.shape}")
    return float(np.sqrt(np.mean((p - a) ** 2)))


def roc_auc(labels: np.ndarray, scores: FloatArray) -> float:
    """Area under the ROC curve: P(score of a random positive > score of a random negative).

    Ties count one half (the Mann–Whitney U statistic divided by n_pos·n_neg).
    """
    y = np.asarray(labels, dtype=bool)
    s = np.asarray(scores, dtype=float)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        raise ValueError("roc_auc needs at least one positive and one negative label")
    ranks = scipy.stats.rankdata(s)  # average ranks handle ties
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def recall_at_k(recommended: np.ndarray, relevant: np.ndarray, k: int) -> float:
    """|top-k recommended ∩ relevant| / min(k, |relevant|)."""
    rel = set(np.asarray(relevant).tolist())
    if not rel:
        raise ValueError("recall_at_k needs a non-empty relevant set")
    hits = len(rel.intersection(np.asarray(recommended)[:k].tolist()))
    return hits / min(k, len(rel))


__all__ = ["mae", "recall_at_k", "rmse", "roc_auc"]
