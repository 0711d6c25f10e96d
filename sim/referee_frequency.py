"""The referee's score of published item frequencies (`server.models.frequency`).

The truth is the fraction f_j of the users whose releases trained the model (the published
`user_ids`) who hold item j in their full profile (what each of them released, perturbed). The
score: the mean and largest absolute error of f̂ over items, and the recall of the true k most
frequent items in the published top-k list (ties to the smaller item index on both sides).
Everything is one sparse column count: linear in the users.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from privrec.server.models.frequency import top_items
from privrec.shared.config import ExperimentConfig
from privrec.shared.data.dataset import RatingData
from privrec.shared.run_config import PublicRunConfig
from privrec.shared.serde import read_npz
from privrec.shared.types import FloatArray, IntArray


def rows_of(data: RatingData, user_ids: np.ndarray) -> IntArray:
    """Rows of `data` of the wire ids `user_ids` (the dataset's own ids as strings),
    vectorised: one sort of the dataset's ids and a binary search.

    Raises:
        KeyError: a user id that is not in the data set.
    """
    wanted = np.asarray(user_ids).astype(np.int64)
    known = np.asarray(data.user_ids, dtype=np.int64)
    order = np.argsort(known, kind="stable")
    at = np.searchsorted(known[order], wanted)
    at = np.minimum(at, known.size - 1)
    rows = order[at]
    missing = known[rows] != wanted
    if np.any(missing):
        raise KeyError(f"user {int(wanted[np.argmax(missing)])} is not in the data set")
    return rows.astype(np.int64)


def true_frequencies(data: RatingData, rows: IntArray) -> FloatArray:
    """f_j: the fraction of users `rows` holding item j (a rated cell), shape (n_items,)."""
    sub = data.ratings.tocsr()[rows]
    counts = np.bincount(sub.indices, minlength=data.n_items).astype(np.float64)
    return counts / max(rows.size, 1)


def score_frequencies(
    config: ExperimentConfig, data: RatingData, out_dir: Path, run_config: PublicRunConfig
) -> dict[str, float]:
    """`frequency_mae`, `frequency_max_error` and `top_k_recall` of the published model."""
    del config, run_config
    z = read_npz(out_dir / "model.npz", "published model")
    estimate, top, user_ids = z["frequencies"], z["top_items"], z["user_ids"]
    truth = true_frequencies(data, rows_of(data, user_ids))
    k = int(top.size)
    hits = np.intersect1d(top, top_items(truth, k)).size
    error = np.abs(estimate - truth)
    return {
        "frequency_mae": float(error.mean()),
        "frequency_max_error": float(error.max()),
        f"top_{k}_recall": hits / k,
    }


__all__ = ["rows_of", "score_frequencies", "true_frequencies"]
