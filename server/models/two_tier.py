"""Xin & Jaakkola's two-tier low-rank model (NIPS 2014, Sec. 2–4; extraction §A2–A3, §A6).

Two stages, one per tier:

1. `fit_public(public_ratings)`: the public users shared their ratings openly; the server fits
   (µ, V) from them alone (`shared.mechanisms.completion.fit_public_model`: item means and EM
   rounds of "complete each public user with Eq. (4), re-estimate V"). This *public model* is
   published through GetModel before the private users release, so each of them can complete
   her ratings locally and run her mechanism on the completed vector.
2. `fit_private(second_order)`: each private user sent one vector; the mechanism turns it into
   u (`SecondOrderMechanism.estimate`: x − µ for PMD and Laplace, the release itself for PMC and
   exact second order), and the M-step adds w·u uᵀ to the public users' completed outer
   products (r − µ)(r − µ)ᵀ, w = `private_weight` (the paper's experiments: 1/2 per private user,
   1 per public user):

       M = Σ_public c cᵀ + w Σ_private u uᵀ,   n = n_public + w·n_private,

   where the diagonal of a private u uᵀ is replaced by what the mechanism says it estimates
   (`SecondOrderMechanism.moment_diagonal`: u² for exact second order, u² − 2b² for Laplace),
   or, when the release says nothing about it (PMD), by the public users' average of c_i²
   (each entry of the covariance estimated from the users who inform it),

   and V from the k leading eigenpairs of M (`completion.spectral_factor`: the covariance M/n,
   or with `spectrum = "trace-norm"` the minimiser of the paper's Eq. (3)). µ stays the public
   item means ("µ cannot be improved beyond the public users", §A7). Then `em_iters` rounds
   re-complete the public users with the new V and repeat the M-step; the private vectors are
   used as sent, "only once".

Every user then predicts her own held-out ratings locally with Eq. (4) and the final (µ, V):
the model answers no queries (`answers_queries = False`) and publishes (µ, V, λ′) instead.

Choices where the paper is silent (docs/decisions/two_tier.md): the default PPCA-scaled spectrum
(the paper's trace-norm one is `spectrum = "trace-norm"`); `k` caps the rank; the rounds of private
releases are the protocol's (`[population] private_round_size`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Literal, Self

import numpy as np
import scipy.linalg
import scipy.sparse as sp
import scipy.sparse.linalg

from privrec.server.models.base import TwoTierModel
from privrec.shared.capabilities import ModelCapabilities, ModelInput, Serving
from privrec.shared.errors import NotFittedError
from privrec.shared.mechanisms.completion import (
    SPECTRA,
    complete_vector,
    fit_public_model,
    spectral_factor,
)
from privrec.shared.types import Arrays, FloatArray, SparseMatrix, as_csr

LANCZOS_MIN_ITEMS = 500
"""From this many items on, the M-step's eigenpairs come from Lanczos (`eigsh`)."""


class TwoTierLowRank(TwoTierModel):
    """The aggregator's model for the second-order mechanisms (see the module docstring).

    Args:
        k: rank of V.
        ridge: λ′ of the completions (the public users' E-steps and everyone's prediction).
        em_iters: EM rounds, in the public fit and again after the private M-step.
        private_weight: w, the weight of one private user's u uᵀ against a public user's.
        spectrum: "covariance" or "trace-norm" (`completion.spectral_factor`).
    """

    name: ClassVar[str] = "two_tier_lowrank"
    capabilities: ClassVar[ModelCapabilities] = ModelCapabilities(
        ModelInput.TWO_TIER, Serving.LOCAL, local_predictor="low_rank_completion"
    )

    def __init__(
        self,
        k: int = 10,
        ridge: float = 1.0,
        em_iters: int = 5,
        private_weight: float = 0.5,
        spectrum: str = "covariance",
    ) -> None:
        if int(k) != k or k < 1:
            raise ValueError(f"`k` must be an int >= 1, got {k!r}")
        if not ridge > 0:
            raise ValueError(f"`ridge` must be > 0, got {ridge!r}")
        if int(em_iters) != em_iters or em_iters < 0:
            raise ValueError(f"`em_iters` must be an int >= 0, got {em_iters!r}")
        if not private_weight >= 0:
            raise ValueError(f"`private_weight` must be >= 0, got {private_weight!r}")
        if spectrum not in SPECTRA:
            raise ValueError(f"`spectrum` must be one of {SPECTRA}, got {spectrum!r}")
        self.k, self.ridge, self.spectrum = int(k), float(ridge), spectrum
        self.em_iters, self.private_weight = int(em_iters), float(private_weight)
        self.mu_: FloatArray | None = None
        self.V_: FloatArray | None = None
        self.n_public_ = self.n_private_ = 0
        self._public: sp.csr_matrix | None = None
        self._private_moment: FloatArray | None = None  # w Σ_private u uᵀ so far
        self._private_no_diagonal = 0  # private users whose releases say nothing on the diagonal

    @property
    def min_public_users(self) -> int:
        """The public model of rank k needs at least k public users."""
        return self.k

    def fit_public(self, public_ratings: SparseMatrix) -> Self:
        """Stage 1: (µ, V) from the public users alone (rows in a canonical order)."""
        self._public = as_csr(public_ratings)
        self.mu_, self.V_ = fit_public_model(
            self._public, self.k, ridge=self.ridge, n_iter=self.em_iters, spectrum=self.spectrum
        )
        self.n_public_, self.n_private_ = self._public.shape[0], 0
        self._private_moment = np.zeros((self.mu_.size, self.mu_.size))
        self._private_no_diagonal = 0
        return self

    def fit_private(
        self,
        second_order: FloatArray,
        *,
        diagonal: FloatArray | Literal["outer"] | None = "outer",
    ) -> Self:
        """Stage 2: the weighted M-step with one vector u per private user, shape (n, m),
        replacing any private users added before."""
        if self.mu_ is not None:
            self._private_moment = np.zeros((self.mu_.size, self.mu_.size))
            self.n_private_ = 0
            self._private_no_diagonal = 0
        return self.add_private(second_order, diagonal=diagonal)

    def add_private(
        self,
        second_order: FloatArray,
        *,
        diagonal: FloatArray | Literal["outer"] | None = "outer",
    ) -> Self:
        """Stage 2, incrementally: fold more private users' vectors u (shape (n_new, m)) into
        the second-order sum and redo the M-step (a collect round of the protocol).

        `diagonal` (`TwoTierModel.add_private`): the per-user estimates of (r_i − µ_i)² the
        releases carry ("outer": u² itself, exact for exact second order; Laplace: u² − 2b²),
        or None when they carry none (PMD: every coordinate has variance Var(S) whatever the
        user), in which case the diagonal of these users' second moment is filled with the
        public users' average, i.e. each entry of the covariance is estimated from the users
        who inform it (docs/decisions/two_tier.md, "Null part")."""
        if self.mu_ is None or self.V_ is None or self._private_moment is None:
            raise NotFittedError("TwoTierLowRank: call fit_public() first")
        u = np.asarray(second_order, dtype=np.float64)
        if u.ndim == 1:
            u = u[None, :]
        if u.ndim != 2 or u.shape[1] != self.mu_.size:
            raise ValueError(
                f"`second_order` must have shape (n, {self.mu_.size}), got {np.shape(second_order)}"
            )
        if not np.all(np.isfinite(u)):
            raise ValueError("`second_order` must be finite")
        moment = u.T @ u
        if isinstance(diagonal, str):
            if diagonal != "outer":
                raise ValueError(f"`diagonal` must be an array, None or 'outer', got {diagonal!r}")
        else:
            if diagonal is not None and (
                np.shape(diagonal) != u.shape or not np.all(np.isfinite(diagonal))
            ):
                raise ValueError(
                    f"`diagonal` must be finite with the shape of `second_order` {u.shape}, "
                    f"got {np.shape(diagonal)}"
                )
            np.fill_diagonal(moment, 0.0 if diagonal is None else np.sum(diagonal, axis=0))
            if diagonal is None:
                self._private_no_diagonal += int(u.shape[0])
        self._private_moment += moment * self.private_weight
        self.n_private_ += int(u.shape[0])
        total = self.n_public_ + self.private_weight * self.n_private_
        V = self.V_
        for _ in range(max(1, self.em_iters)):
            c = self._completed_public(V)
            public = c.T @ c
            imputed = np.diag(public).copy() * (
                self.private_weight * self._private_no_diagonal / self.n_public_
            )
            V = self._factor(public + self._private_moment + np.diag(imputed), total)
        self.V_ = V
        return self

    def _completed_public(self, V: FloatArray) -> FloatArray:
        """c_i = r_i − µ of every public user, completed with Eq. (4) under V."""
        assert self._public is not None and self.mu_ is not None
        csr = self._public
        rows = [
            complete_vector(
                csr.indices[a:b].astype(np.int64), csr.data[a:b], self.mu_, V, self.ridge
            )
            - self.mu_
            for a, b in zip(csr.indptr[:-1], csr.indptr[1:], strict=True)
        ]
        return np.stack(rows)

    def _factor(self, moment: FloatArray, n: float) -> FloatArray:
        """V from the k leading eigenpairs of the second-moment sum `moment` over n users."""
        m = moment.shape[0]
        rank = min(self.k, m)
        if m >= LANCZOS_MIN_ITEMS and rank < m // 4:
            # Lanczos on the k leading pairs (fixed start vector: deterministic), ~2x faster than
            # a full tridiagonalisation at m = 1682; the projection agrees to ~1e-12.
            vals, vecs = scipy.sparse.linalg.eigsh(
                moment, k=rank, which="LA", v0=np.ones(m), tol=0.0
            )
        else:
            vals, vecs = scipy.linalg.eigh(moment, subset_by_index=(m - rank, m - 1))
        return spectral_factor(vals, vecs, n, spectrum=self.spectrum, ridge=self.ridge)

    def state_arrays(self) -> Arrays:
        """The published arrays, the public ratings and the private second-moment sum so far
        (enough to fold in further rounds exactly as an uninterrupted model would)."""
        self._require("mu_", "V_", "_public", "_private_moment")
        assert self._public is not None and self._private_moment is not None
        return self.public_arrays() | {
            "public_data": self._public.data,
            "public_indices": self._public.indices.astype(np.int64),
            "public_indptr": self._public.indptr.astype(np.int64),
            "private_moment": self._private_moment,
            "private_no_diagonal": np.array(self._private_no_diagonal),
        }

    def restore(self, state: Mapping[str, np.ndarray]) -> Self:
        """Rebuild μ, V and the public ratings from `state_arrays()`'s arrays."""
        mu = self._restore_public(state)
        self._public = sp.csr_matrix(
            (state["public_data"], state["public_indices"], state["public_indptr"]),
            shape=(self.n_public_, mu.size),
        )
        self._private_moment = np.asarray(state["private_moment"], dtype=np.float64)
        self._private_no_diagonal = int(state.get("private_no_diagonal", 0))
        return self


__all__ = ["TwoTierLowRank"]
