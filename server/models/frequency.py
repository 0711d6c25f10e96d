"""Item frequencies from item-set releases: the frequency oracle of OUE (Wang et al. 2017).

Each user releases her item set P through a frequency-oracle mechanism (OUE: every bit of the
one-hot encoding kept w.p. p = 1/2 when set, raised w.p. q otherwise). The aggregator's
unbiased estimate of the number of users holding item j is (Wang, Blocki, Li, Jha 2017, §4,
Eq. (2), the "support" count corrected for the noise):

    ĉ_j = (Σ_u b_uj − N q) / (p − q) = Σ_u x̂_uj,   x̂_u = `Mechanism.estimate`(release_u),

so the model needs only the column sum of the de-biased releases and N
(`ModelInput.ESTIMATE_SUM`, summed block by block in `server.training.estimate_sum`): its cost is
linear in the number of users and its memory is O(n_items) — the population benchmark's model
(`bench/population.py`). It publishes the estimated frequencies f̂_j = ĉ_j / N and the `k`
most frequent items (a popularity recommendation, Balu §3.5's popularity baseline on the
server's side), and answers no queries. The referee scores it against the true frequencies of
the users' full profiles (`sim.referee_frequency`).

Choices where the paper is silent (docs/decisions/scale.md): the estimates are published unclipped
(an unbiased estimate may fall below 0 or above 1; clipping would bias it); ties in the top-k
go to the smaller item index. Every user's frequency is a post-processing of ε-DP releases, so
the model adds no privacy cost (`output_privacy` None: nothing beyond the releases).

References:
    T. Wang, J. Blocki, N. Li, S. Jha, "Locally differentially private protocols for frequency
    estimation", USENIX Security 2017, §4 (pure protocols, the support estimator) and §4.4.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Self

import numpy as np

from privrec.server.models.base import MatrixModel
from privrec.server.training import EstimateSum
from privrec.shared.capabilities import ModelCapabilities, ModelInput, Serving
from privrec.shared.errors import NotFittedError
from privrec.shared.types import Arrays, FloatArray, IntArray


def top_items(frequencies: FloatArray, k: int) -> IntArray:
    """The `k` items of highest frequency, best first, ties to the smaller index (stable)."""
    k = min(int(k), frequencies.size)
    return np.argsort(-frequencies, kind="stable")[:k].astype(np.int64)


class ItemFrequency(MatrixModel):
    """Estimated item frequencies and the top-k items (see the module docstring).

    Args:
        k: length of the published list of most frequent items.
    """

    name: ClassVar[str] = "item_frequency"
    capabilities: ClassVar[ModelCapabilities] = ModelCapabilities(
        ModelInput.ESTIMATE_SUM, Serving.PUBLISHED, publishes="item_frequencies"
    )

    def __init__(self, k: int = 10) -> None:
        if int(k) != k or k < 1:
            raise ValueError(f"`k` must be an int >= 1, got {k!r}")
        self.k = int(k)
        self.frequencies_: FloatArray | None = None
        self.n_users_: int | None = None

    def fit(self, train: EstimateSum, *, exclude_groups: IntArray | None = None) -> Self:
        """f̂ = Σ_u x̂_u / N (groups are not used: nobody is held out of a frequency).

        Raises:
            ValueError: `train` is not an `EstimateSum` of a 1-D finite sum over N >= 1.
        """
        del exclude_groups
        if not isinstance(train, EstimateSum):
            raise ValueError(f"`train` must be an EstimateSum, got {type(train).__name__}")
        total = np.asarray(train.total, dtype=np.float64)
        if total.ndim != 1 or total.size == 0 or not np.all(np.isfinite(total)):
            raise ValueError(f"`train.total` must be a finite 1-D array, got shape {total.shape}")
        if int(train.n) < 1:
            raise ValueError(f"`train.n` must be >= 1, got {train.n!r}")
        self.frequencies_ = total / int(train.n)
        self.n_users_ = int(train.n)
        return self

    def public_arrays(self) -> Arrays:
        """What GetModel publishes: f̂ (shape (n_items,)), the top-k items and N."""
        if self.frequencies_ is None or self.n_users_ is None:
            raise NotFittedError("ItemFrequency is not fitted; call fit() first")
        return {
            "frequencies": self.frequencies_,
            "top_items": top_items(self.frequencies_, self.k),
            "n_releases": np.array(self.n_users_),
        }

    def state_arrays(self) -> Arrays:
        """The arrays to save: the public frequency estimates and the release count."""
        return self.public_arrays()

    def restore(self, state: Mapping[str, np.ndarray]) -> Self:
        """Rebuild the frequency estimates from `state_arrays()`'s arrays."""
        self.frequencies_ = np.asarray(state["frequencies"], dtype=np.float64)
        self.n_users_ = int(state["n_releases"])
        return self


__all__ = ["ItemFrequency", "top_items"]
