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


def classification_scores(predicted: np.ndarray, actual: np.ndarray) -> dict[str, float]:
    """Classification accuracy and F1 of the positive class "like" (Bilge §2.4, after Miyahara
    & Pazzani 2002): CA = share of correct labels; precision = TP/(TP + FP), recall =
    TP/(TP + FN), F1 = 2·precision·recall/(precision + recall). A ratio with an empty
    denominator is 0 (no like predicted: precision 0; F1 0 when both are 0).

    Args:
        predicted: 0/1 labels, shape (P,).
        actual: 0/1 true labels, shape (P,).

    Returns:
        {"ca", "precision", "recall", "f1"}, each in [0, 1].
    """
    p, a = np.asarray(predicted, float), np.asarray(actual, float)
    if p.shape != a.shape or p.size == 0:
        raise ValueError(f"need equal, non-empty shapes, got {p.shape} and {a.shape}")
    if not np.all(np.isin(p, (0.0, 1.0))) or not np.all(np.isin(a, (0.0, 1.0))):
        raise ValueError("classification_scores needs 0/1 labels")
    tp = float(np.sum((p == 1) & (a == 1)))
    precision = tp / float(p.sum()) if p.sum() else 0.0
    recall = tp / float(a.sum()) if a.sum() else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "ca": float(np.mean(p == a)),
        "precision": precision,
        "recall": recall,
        "f1": f1,
    }


__all__ = ["classification_scores", "mae", "recall_at_k", "rmse", "roc_auc"]
