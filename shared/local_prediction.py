"""Rules by which a user predicts locally from a model's published parameters.

A model that serves `Serving.LOCAL` answers no queries: it publishes parameters through
GetModel and names (`ModelCapabilities.local_predictor`) the rule each user applies to them
with her own training ratings. The rules live here, in `shared`, because the client runs them
and must not import the server.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from privrec.shared.mechanisms.completion import complete_vector
from privrec.shared.types import FloatArray, IntArray

LocalPredictor = Callable[[Mapping[str, np.ndarray], IntArray, FloatArray, IntArray], FloatArray]
"""(published arrays, her rated items, her ratings, target items) → scores of the targets."""


def low_rank_completion(
    published: Mapping[str, np.ndarray], items: IntArray, ratings: FloatArray, targets: IntArray
) -> FloatArray:
    """Her ratings of `targets` completed from her own ratings with the published (µ, V, λ′),
    Xin & Jaakkola Eq. (4) (`completion.complete_vector`)."""
    mu, V, ridge = published["mu"], published["V"], float(published["ridge"])
    return complete_vector(items, ratings, mu, V, ridge)[targets]


LOCAL_PREDICTORS: dict[str, LocalPredictor] = {"low_rank_completion": low_rank_completion}
"""Every local rule, by the name a model declares."""


__all__ = ["LOCAL_PREDICTORS", "LocalPredictor", "low_rank_completion"]
