"""`biased_mf`: the strong non-private factorisation baseline (Koren, Bell & Volinsky 2009).

r̂_ui = µ + b_u + b_i + p_u·q_i, trained by privrec's one SGD trainer
(`server.models.factorization.fit_mf`) on the users' releases, one state per cross-validation
fold (`server.models.foldwise`): a querying user of fold f is folded in (her b_u and p_u, the
exact minimiser of her part of the training objective with the item side fixed) against the
state trained without fold f. It is the non-private counterpart of the DP factorisation models
that run the same trainer (DPSGD-MF at ε → ∞ meets it within 1 %, tested) and the reference a
reviewer expects beside them: with the defaults (d = 100, η = 0.01, λ = 0.1, λ_b = 0.02, 40
epochs, chosen on a validation split) it reaches RMSE ≈ 0.91 on ML-100K's 80/20 random split
(`bench/mf_baseline.py`; docs/decisions/factorization.md).

It makes no output-privacy claim: fitted on raw ratings, its answers may reveal them.

References:
    Y. Koren, R. Bell, C. Volinsky. "Matrix Factorization Techniques for Recommender Systems",
    IEEE Computer 42(8), 2009.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from privrec.server.models.base import UInt32Array
from privrec.server.models.factorization import FactorModel, MFConfig, fit_mf
from privrec.server.models.foldwise import FoldKey, FoldwiseRecommender, fold_seed_key
from privrec.shared.capabilities import ModelCapabilities, ModelInput, ScoreKind, Serving
from privrec.shared.seeding import rng_for
from privrec.shared.types import FloatArray, IntArray


@dataclasses.dataclass(frozen=True)
class _FoldState:
    model: FactorModel
    item_counts: IntArray


class BiasedMF(FoldwiseRecommender):
    """Biased matrix factorisation by SGD (module docstring).

    Args:
        n_factors: d.
        n_epochs: passes over the training ratings.
        learning_rate: η.
        reg: λ, the per-rating penalty of the factors.
        reg_bias: λ_b, the per-rating penalty of the biases.
        init_scale: standard deviation of the initial factors.
        random_state: seeds the initial factors and the visiting orders (per fold).
    """

    name: ClassVar[str] = "biased_mf"
    capabilities: ClassVar[ModelCapabilities] = ModelCapabilities(
        ModelInput.RELEASES, Serving.QUERIES, ScoreKind.RATING
    )

    def __init__(
        self,
        n_factors: int = 100,
        *,
        n_epochs: int = 40,
        learning_rate: float = 0.01,
        reg: float = 0.1,
        reg_bias: float = 0.02,
        init_scale: float = 0.1,
        random_state: int = 0,
    ) -> None:
        self.n_factors, self.n_epochs = n_factors, n_epochs
        self.learning_rate, self.reg, self.reg_bias = learning_rate, reg, reg_bias
        self.init_scale, self.random_state = init_scale, random_state
        if (
            isinstance(random_state, bool)
            or not isinstance(random_state, int | np.integer)
            or random_state < 0
        ):
            raise ValueError(f"`random_state` must be an int >= 0, got {random_state!r}")
        self.config  # noqa: B018 - builds the trainer's config: validates every hyper-parameter

    @property
    def config(self) -> MFConfig:
        """The shared trainer's hyper-parameters."""
        return MFConfig(
            n_factors=self.n_factors,
            n_epochs=self.n_epochs,
            learning_rate=self.learning_rate,
            reg=self.reg,
            reg_bias=self.reg_bias,
            init_scale=self.init_scale,
        )

    def _fit_fold(self, train: sp.csr_matrix, key: FoldKey) -> _FoldState:
        rng = rng_for(self.random_state, self.name, *fold_seed_key(key))
        counts = np.bincount(train.indices, minlength=train.shape[1]).astype(np.int64)
        return _FoldState(fit_mf(train, self.config, rng), counts)

    def _predict_fold(
        self, state: Any, key: FoldKey, indices: IntArray, values: FloatArray, items: IntArray
    ) -> tuple[FloatArray, UInt32Array]:
        scores = state.model.predict_new_user(indices, values, items)
        return scores, state.item_counts[items].astype(np.uint32)


__all__ = ["BiasedMF"]
