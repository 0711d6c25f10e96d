"""The referee's metrics (`shared.metrics`) against scikit-learn's, the field's reference
implementation (a dev dependency only: docs/decisions/libraries.md, says why the metrics
stay by hand at run time). Random inputs with many ties, fixed seeds; equal to 1e-12."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import mean_absolute_error, mean_squared_error, roc_auc_score

from privrec.shared.metrics import mae, rmse, roc_auc


@pytest.mark.parametrize("seed", range(5))
def test_roc_auc_matches_sklearn_with_ties(seed: int) -> None:
    """Scores on a 5-level grid (ties everywhere) count a tie one half, as sklearn does."""
    rng = np.random.default_rng(seed)
    labels = rng.random(400) < 0.3
    scores = np.round(rng.normal(labels * 0.8, 1.0) * 2) / 2
    assert roc_auc(labels, scores) == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)


def test_roc_auc_refuses_a_single_class() -> None:
    """Undefined with one class: ours raises naming why (sklearn returns nan and warns)."""
    with pytest.raises(ValueError, match="one positive and one negative"):
        roc_auc(np.ones(5, bool), np.arange(5.0))


@pytest.mark.parametrize("seed", range(3))
def test_mae_and_rmse_match_sklearn(seed: int) -> None:
    rng = np.random.default_rng(seed)
    actual = rng.integers(1, 6, 300).astype(float)
    predicted = actual + rng.normal(0, 0.9, 300)
    assert mae(predicted, actual) == pytest.approx(mean_absolute_error(actual, predicted), 1e-12)
    assert rmse(predicted, actual) == pytest.approx(
        np.sqrt(mean_squared_error(actual, predicted)), 1e-12
    )
