"""Xin & Jaakkola's "Full EM" reference: EM without any privacy protection (NIPS 2014, Fig. 2).

In the paper's Fig. 2 the curve "Full EM" is the model the server would reach if every private
user gave it her ratings: "the server can access private vectors repeatedly and iterate"
(extraction §A8), against which the private mechanisms (one release each, used once) are
measured. In privrec it is a two-tier model whose private tier sends its training ratings in
the clear (the `raw` mechanism, statement "none"; `private_release = "ratings"`), round by
round as the private mechanisms do, so its curve has the same axis (private users folded in):

* `fit_public`: the same public model as `TwoTierLowRank` (`completion.fit_public_model`).
* `add_private(ratings)`: the new users join the pool and the whole EM is rerun on every user
  so far (public and private alike, weight 1: nothing is noisy), from scratch: µ = the item
  means of everyone's ratings (unlike the private mechanisms, which cannot improve µ beyond the
  public users, §A7 — the raw ratings can), then `em_iters` rounds of "complete every user with
  Eq. (4), re-estimate V" — each private user's ratings are re-completed at every iteration,
  which is exactly what a one-shot release forbids.

With every private user folded in, the model is the run's model fitted as if every user were
public: the referee's `baseline_all_public_*` (`sim.referee.score_all_public_baseline`) is the
right end of this curve (the same fit on the same ratings, up to row order).

Every user predicts locally with the published (µ, V, λ′) (`low_rank_completion`), as in the
private runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal, Self, cast

import numpy as np
import scipy.sparse as sp

from privrec.server.models.base import Arrays, TwoTierModel
from privrec.shared.capabilities import ModelCapabilities, ModelInput, Serving
from privrec.shared.errors import NotFittedError
from privrec.shared.mechanisms.completion import SPECTRA, fit_public_model
from privrec.shared.types import FloatArray


class TwoTierFullEM(TwoTierModel):
    """Full EM on the public users plus every private user so far (module docstring).

    Args:
        k: rank of V.
        ridge: λ′ of the completions.
        em_iters: EM rounds of each fit.
        spectrum: "covariance" or "trace-norm" (`completion.spectral_factor`).
    """

    name: ClassVar[str] = "two_tier_full_em"
    capabilities: ClassVar[ModelCapabilities] = ModelCapabilities(
        ModelInput.TWO_TIER, Serving.LOCAL, local_predictor="low_rank_completion"
    )
    private_release: ClassVar[str] = "ratings"

    def __init__(
        self, k: int = 10, ridge: float = 1.0, em_iters: int = 5, spectrum: str = "covariance"
    ) -> None:
        if isinstance(k, bool) or int(k) != k or k < 1:
            raise ValueError(f"`k` must be an int >= 1, got {k!r}")
        if not ridge > 0:
            raise ValueError(f"`ridge` must be > 0, got {ridge!r}")
        if isinstance(em_iters, bool) or int(em_iters) != em_iters or em_iters < 0:
            raise ValueError(f"`em_iters` must be an int >= 0, got {em_iters!r}")
        if spectrum not in SPECTRA:
            raise ValueError(f"`spectrum` must be one of {SPECTRA}, got {spectrum!r}")
        self.k, self.ridge, self.em_iters, self.spectrum = (
            int(k),
            float(ridge),
            int(em_iters),
            spectrum,
        )
        self.mu_: FloatArray | None = None
        self.V_: FloatArray | None = None
        self.n_public_ = self.n_private_ = 0
        self._ratings: sp.csr_matrix | None = None  # public rows, then private rows

    @property
    def min_public_users(self) -> int:
        """The public model of rank k needs at least k public users."""
        return self.k

    def _refit(self) -> None:
        assert self._ratings is not None
        self.mu_, self.V_ = fit_public_model(
            self._ratings, self.k, ridge=self.ridge, n_iter=self.em_iters, spectrum=self.spectrum
        )

    def fit_public(self, public_ratings: sp.spmatrix | sp.sparray) -> Self:
        """Stage 1: (µ, V) from the public users alone (`completion.fit_public_model`)."""
        self._ratings = sp.csr_matrix(cast(Any, public_ratings)).astype(np.float64)
        self.n_public_, self.n_private_ = int(self._ratings.shape[0]), 0
        self._refit()
        return self

    def add_private(
        self, second_order: Any, *, diagonal: FloatArray | Literal["outer"] | None = "outer"
    ) -> Self:
        """Stage 2: the private users' ratings (sparse, shape (n_new, m)) join the pool, and
        EM reruns on everyone (module docstring). `diagonal` does not apply (raw ratings).

        Raises:
            NotFittedError: before `fit_public`.
            ValueError: not a sparse matrix of m columns with finite ratings.
        """
        del diagonal
        if self._ratings is None:
            raise NotFittedError("TwoTierFullEM: call fit_public() first")
        if not sp.issparse(second_order):
            raise ValueError(
                "`second_order` must be the private users' ratings as a scipy sparse matrix "
                f"(Full EM's private tier sends ratings), got {type(second_order).__name__}"
            )
        new = sp.csr_matrix(cast(Any, second_order)).astype(np.float64)
        m = self._ratings.shape[1]
        if new.ndim != 2 or new.shape[1] != m:
            raise ValueError(f"`second_order` must have shape (n, {m}), got {new.shape}")
        if not np.all(np.isfinite(new.data)):
            raise ValueError("`second_order` must hold finite ratings")
        self._ratings = sp.vstack([self._ratings, new], format="csr")
        self.n_private_ += int(new.shape[0])
        self._refit()
        return self

    def state_arrays(self) -> Arrays:
        """The published arrays and every rating in the pool (public rows first)."""
        self._require("mu_", "V_", "_ratings")
        assert self._ratings is not None
        return self.public_arrays() | {
            "data": self._ratings.data,
            "indices": self._ratings.indices.astype(np.int64),
            "indptr": self._ratings.indptr.astype(np.int64),
        }

    def restore(self, state: Mapping[str, np.ndarray]) -> Self:
        """Rebuild μ, V and the training ratings from `state_arrays()`'s arrays."""
        mu = self._restore_public(state)
        self._ratings = sp.csr_matrix(
            (state["data"], state["indices"], state["indptr"]),
            shape=(self.n_public_ + self.n_private_, mu.size),
        )
        return self


__all__ = ["TwoTierFullEM"]
