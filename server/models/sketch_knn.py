"""kNN graph on sanitized vectors: the utility side of Balu ch. 3 (§3.5.4).

The untrusted aggregator finds each user's k nearest neighbours (k = 10 in Balu) by cosine
similarity between the de-biased releases (`Mechanism.estimate`: flipped Bloom filters for BLIP,
noisy projections for JLT, unary encodings for OUE, ±1 like vectors for RRT) and publishes the
graph with the model. The referee scores it as recall of the true 10-NN computed on the raw
profiles. Balu leaves the similarity estimator open ([NG]); cosine of unbiased estimates is our
choice (docs/decisions/mechanisms.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Self

import numpy as np

from privrec.server.models.base import MatrixModel
from privrec.shared.capabilities import ModelCapabilities, ModelInput, Serving
from privrec.shared.errors import NotFittedError
from privrec.shared.types import Arrays, FloatArray, IntArray

COSINE_KNN_METHODS = ("partition", "reference")
"""How `cosine_knn` ranks each block: "partition" (`np.argpartition`, linear per row) or
"reference" (a full stable `np.argsort` per row, N log N)."""

BLOCK_BYTES = 64 * 1024 * 1024
"""Memory of one block of similarities (block rows × n float64) for the "partition" path."""


def cosine_knn(
    x: FloatArray, k: int, *, block: int | None = None, method: str = "partition"
) -> IntArray:
    """Row indices of each row's k most cosine-similar other rows, best first.

    Args:
        x: float array of shape (n, d).
        k: neighbours per row (at most n − 1).
        block: rows per block, so memory stays O(block · n); default 2048 for "reference" and
            `BLOCK_BYTES` worth of rows for "partition".
        method: "partition" (the default) or "reference"; both give the same graph.

    Ties go to the smaller row index (stable sort), so the graph is deterministic. The
    "partition" path computes the same similarity blocks (one float64 product per block) and
    takes each row's top k with `np.argpartition`; where the k-th similarity is tied with one
    left out, that row is ranked by the reference's stable sort, so the graphs are equal
    (`tests/unit/server/models/test_models_sketch_knn.py`). float32 products are not used: on
    0/1 profiles exact ties are common and float32 rounding would break them differently.
    """
    if method not in COSINE_KNN_METHODS:
        raise ValueError(f"`method` must be one of {COSINE_KNN_METHODS}, got {method!r}")
    n = x.shape[0]
    k = min(k, n - 1)
    if block is None:
        block = 2048 if method == "reference" else max(1, min(2048, BLOCK_BYTES // (8 * n)))
    norms = np.linalg.norm(x, axis=1)
    unit = x / np.where(norms > 0, norms, 1.0)[:, None]
    out = np.empty((n, k), dtype=np.int64)
    for start in range(0, n, block):
        sim = unit[start : start + block] @ unit.T
        rows = np.arange(start, min(start + block, n))
        sim[rows - start, rows] = -np.inf  # never one's own neighbour
        if method == "reference":
            out[start : start + block] = np.argsort(-sim, axis=1, kind="stable")[:, :k]
        else:
            out[start : start + block] = _top_k_stable(-sim, k)
    return out


def _top_k_stable(neg: FloatArray, k: int) -> IntArray:
    """Per row, the columns of the k smallest values in stable-sort order (value, then column):
    `np.argsort(neg, axis=1, kind="stable")[:, :k]` in linear time per row."""
    if k >= neg.shape[1]:
        return np.argsort(neg, axis=1, kind="stable")[:, :k]
    chosen = np.argpartition(neg, k - 1, axis=1)[:, :k]
    kth = np.take_along_axis(neg, chosen[:, k - 1 : k], axis=1)
    # ambiguous: the k-th value is tied with a value left out (which ones are kept matters)
    tied = np.count_nonzero(neg < kth, axis=1) + np.count_nonzero(neg == kth, axis=1) > k
    chosen = np.sort(chosen, axis=1)
    order = np.argsort(np.take_along_axis(neg, chosen, axis=1), axis=1, kind="stable")
    top = np.take_along_axis(chosen, order, axis=1)
    for i in np.flatnonzero(tied).tolist():
        top[i] = np.argsort(neg[i], kind="stable")[:k]
    return top


class SketchKNN(MatrixModel):
    """The aggregator's kNN graph over de-biased releases (`Mechanism.estimate` rows); it
    publishes the graph (`knn_graph`) and answers no queries.

    Args:
        k: neighbours per user (Balu §3.5.4 uses 10).
    """

    name: ClassVar[str] = "sketch_knn"
    capabilities: ClassVar[ModelCapabilities] = ModelCapabilities(
        ModelInput.ESTIMATES, Serving.PUBLISHED, publishes="knn_graph"
    )

    def __init__(self, k: int = 10) -> None:
        if int(k) != k or k < 1:
            raise ValueError(f"`k` must be an int >= 1, got {k!r}")
        self.k = int(k)
        self.neighbours_: IntArray | None = None

    def fit(self, x: FloatArray, *, exclude_groups: IntArray | None = None) -> Self:
        """Build the graph (groups are not used: every user is a query here)."""
        del exclude_groups
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[0] < 2:
            raise ValueError(f"need a 2-D array with at least 2 rows, got shape {x.shape}")
        self.neighbours_ = cosine_knn(x, self.k)
        return self

    def public_arrays(self) -> Arrays:
        """What GetModel publishes: the neighbour graph (row indices into `user_ids`)."""
        if self.neighbours_ is None:
            raise NotFittedError("SketchKNN is not fitted; call fit() first")
        return {"neighbours": self.neighbours_}

    def state_arrays(self) -> Arrays:
        """The arrays to save: the public neighbour lists."""
        return self.public_arrays()

    def restore(self, state: Mapping[str, np.ndarray]) -> Self:
        """Rebuild the neighbour lists from `state_arrays()`'s arrays."""
        self.neighbours_ = np.asarray(state["neighbours"], dtype=np.int64)
        return self


__all__ = ["COSINE_KNN_METHODS", "SketchKNN", "cosine_knn"]
