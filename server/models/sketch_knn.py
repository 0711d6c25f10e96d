"""kNN graph on sanitized vectors: the utility side of Balu ch. 3 (§3.5.4).

The untrusted aggregator finds each user's k nearest neighbours (k = 10 in Balu) by cosine
similarity between the de-biased releases (`Mechanism.estimate`: flipped Bloom filters for BLIP,
noisy projections for JLT, unary encodings for OUE, ±1 like vectors for RRT) and publishes the
graph with the model. The referee scores it as recall of the true 10-NN computed on the raw
profiles. Balu leaves the similarity estimator open ([NG]); cosine of unbiased estimates is our
choice (docs/decisions.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Self

import numpy as np

from privrec.server.models.base import MatrixModel
from privrec.shared.capabilities import ModelCapabilities, ModelInput, Serving
from privrec.shared.errors import NotFittedError
from privrec.shared.types import Arrays, FloatArray, IntArray


def cosine_knn(x: FloatArray, k: int, *, block: int = 2048) -> IntArray:
    """Row indices of each row's k most cosine-similar other rows, best first.

    Args:
        x: float array of shape (n, d).
        k: neighbours per row (at most n − 1).
        block: rows per block, so memory stays O(block · n).

    Ties go to the smaller row index (stable sort), so the graph is deterministic.
    """
    n = x.shape[0]
    k = min(k, n - 1)
    norms = np.linalg.norm(x, axis=1)
    unit = x / np.where(norms > 0, norms, 1.0)[:, None]
    out = np.empty((n, k), dtype=np.int64)
    for start in range(0, n, block):
        sim = unit[start : start + block] @ unit.T
        rows = np.arange(start, min(start + block, n))
        sim[rows - start, rows] = -np.inf  # never one's own neighbour
        out[start : start + block] = np.argsort(-sim, axis=1, kind="stable")[:, :k]
    return out


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
        return self.public_arrays()

    def restore(self, state: Mapping[str, np.ndarray]) -> Self:
        self.neighbours_ = np.asarray(state["neighbours"], dtype=np.int64)
        return self


__all__ = ["SketchKNN", "cosine_knn"]
