"""Telling genuine ratings from fakes in RPT releases (Bilge 2013, §2.2.1 and §3.1.1).

RPT hides which items a user rated by filling β % of her empty cells with pure noise (Bilge
Procedure 1, lines 7–12). Bilge §3.1.1 measures this by the chance of guessing the exact genuine
list. This attack instead scores every filled cell with the posterior log odds that it is
genuine, combining three kinds of evidence:

1. Values. A genuine cell holds z + r and a fake holds r alone. Because each user's z-scores
   have variance 1, genuine values are wider (variance ≈ 1 + σ²) than fakes (σ²), and under
   the uniform coin a fake never exceeds √3σ in magnitude. This is modelled per user, with σ
   and the noise shape unknown (`fit_rpt_posterior`).
2. Low-rank structure. A genuine value sits near the user's low-rank predicted z-score μ_uj,
   which is learned from all users; a fake does not.
3. Item popularity (optional). Genuine ratings follow item popularity, whereas fakes are drawn
   uniformly from the user's empty cells. The prior odds that filled cell j of user u is genuine
   are P(j ∈ G_u)/P(j ∈ F_u) with
       P(j ∈ G_u) = 1 − exp(−λ_u π_j),   λ_u chosen so that Σ_j P(j ∈ G_u) = g_u,
       P(j ∈ F_u) = (1 − P(j ∈ G_u)) · F_u/(m − g_u).
   The popularity distribution π comes from one of two sources:
   * ``"auxiliary"``: column counts of `Observations.auxiliary`, i.e. raw profiles of users
     disjoint from the attacked population. This is a documented auxiliary-knowledge
     assumption (docs/architecture.md, "Trust boundaries").
   * ``"observed"``: the server's own column fill counts c_j. These are debiased for the
     uniform fakes, E[c_j] = G_j + Σ_u q_u − q̄·G_j with q_u = F_u/(m − g_u), and computed
     leave-one-out so that a cell does not count itself. No side knowledge is needed.
   ``"none"`` uses the counts g_u/F_u alone.

The score is a log odds, so ties are rare; only its order matters for the ROC AUC.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np

from privrec.adversary.attacks.base import Attack, AttackOutput, OutputKind, per_user_from_flat
from privrec.adversary.attacks.rpt_bayes import (
    CellPrior,
    PosteriorSettings,
    count_only_prior,
)
from privrec.adversary.attacks.rpt_matrix import (
    DisguisedMatrix,
    Kernels,
    disguised_matrix,
)
from privrec.adversary.observations import Observations
from privrec.shared.errors import ValidationError
from privrec.shared.types import FloatArray

Popularity = Literal["auto", "auxiliary", "observed", "none"]
_POPULARITY = ("auto", "auxiliary", "observed", "none")


def _inclusion_rates(pi: FloatArray, g: FloatArray) -> FloatArray:
    """λ_u with Σ_j (1 − exp(−λ_u π_j)) = g_u, by interpolation on a tabulated grid."""
    m = pi.size
    # Linear interpolation in log λ on 2,048 points: relative error ≈ 1e-4 in the odds.
    lam = np.geomspace(1e-3, 50.0 / pi.min(), 2048)
    h = np.empty(lam.size)
    for s in range(0, lam.size, 128):  # tabulate in blocks to bound memory
        h[s : s + 128] = -np.expm1(-np.outer(lam[s : s + 128], pi)).sum(axis=1)
    return np.exp(np.interp(np.clip(g, h[0], min(h[-1], m - 1e-6)), h, np.log(lam)))


def popularity_odds(
    dm: DisguisedMatrix,
    g: FloatArray,
    f_fake: FloatArray,
    pi: FloatArray,
    pi_cell: FloatArray | None = None,
) -> FloatArray:
    """log P(j ∈ G_u)/P(j ∈ F_u) for every filled cell (see the module docstring).

    Args:
        dm: the disguised matrix.
        g: float array (n,), current genuine counts g_u.
        f_fake: float array (n,), current fake counts F_u.
        pi: float array (m,), genuine item distribution (positive, sums to 1).
        pi_cell: float array (nnz,), the item probability to use at each filled cell
            (e.g. leave-one-out); defaults to `pi` at the cell's item.
    """
    m = dm.n_items
    rows = dm.rows
    lam = _inclusion_rates(pi, g)
    pc = pi[dm.matrix.indices] if pi_cell is None else pi_cell
    p = np.clip(-np.expm1(-lam[rows] * pc), 1e-12, 1.0 - 1e-9)
    q = np.maximum(f_fake, 1e-300) / np.maximum(m - g, 1.0)
    return np.asarray(np.log(p) - np.log1p(-p) - np.log(q)[rows], dtype=np.float64)


@dataclasses.dataclass(frozen=True)
class AuxiliaryPopularity:
    """Item popularity from the auxiliary users' raw profiles (counts + `pseudo_count`)."""

    counts: FloatArray
    pseudo_count: float = 1.0

    def __call__(self, dm: DisguisedMatrix, g: FloatArray, f_fake: FloatArray) -> FloatArray:
        """Log-odds genuine vs fake of each filled cell, popularity from the auxiliary users."""
        c = self.counts + self.pseudo_count
        return popularity_odds(dm, g, f_fake, c / c.sum())


@dataclasses.dataclass(frozen=True)
class ObservedPopularity:
    """Item popularity from the disguised matrix's own column counts, debiased for fakes."""

    pseudo_count: float = 1.0

    def __call__(self, dm: DisguisedMatrix, g: FloatArray, f_fake: FloatArray) -> FloatArray:
        """Log-odds genuine vs fake of each filled cell, popularity from the matrix itself."""
        m = dm.n_items
        c = np.bincount(dm.matrix.indices, minlength=m).astype(np.float64)
        q = f_fake / np.maximum(m - g, 1.0)  # each empty cell of u is a fake w.p. q_u
        q_bar = float(f_fake.sum() / np.maximum(m - g, 1.0).sum())
        scale = 1.0 / max(1.0 - q_bar, 1e-6)
        genuine = np.maximum(c - q.sum(), 0.0) * scale + self.pseudo_count
        z = genuine.sum()
        # Leave one out: the cell's own fill is removed from its column count.
        cols = dm.matrix.indices
        loo = np.maximum(c[cols] - 1.0 - (q.sum() - q[dm.rows]), 0.0) * scale + self.pseudo_count
        return popularity_odds(dm, g, f_fake, genuine / z, loo / z)


class FakeDetection(PosteriorSettings, Attack):
    """Score each filled cell of an RPT release by the posterior log odds that it is genuine.

    Args:
        popularity: item-popularity evidence. ``"auto"`` uses ``"auxiliary"`` when
            `observations.auxiliary` is present and ``"observed"`` otherwise (module docstring).
        max_rank: cap on the number of low-rank components.
        n_iter: EM iterations of `fit_rpt_posterior`.
        n_sigma: grid points of the per-user σ posterior.
        method: "fast" (compiled, pruned E-step; the default) or "reference" (numpy), equal
            to 1e-8 (`fit_rpt_posterior`).

    References:
        Bilge 2013, §2.2.1 (fakes) and §3.1.1 (guessing the genuine list).
        Huang, Du, Chen, SIGMOD 2005 (BE-DR) and Kargupta et al., ICDM 2003 (spectral
        filtering), for the value model.
    """

    name = "rpt_fake_detection"
    knowledge = (
        "disguised profiles + public σ_max, β_max + the RPT protocol; optionally item "
        "popularity from auxiliary raw profiles of disjoint users"
    )
    applies_to = ("rpt",)

    def __init__(
        self,
        popularity: Popularity = "auto",
        max_rank: int = 20,
        n_iter: int = 8,
        n_sigma: int = 24,
        method: Kernels = "fast",
    ) -> None:
        if popularity not in _POPULARITY:
            raise ValueError(f"`popularity` must be one of {_POPULARITY}, got {popularity!r}")
        self._set_posterior(max_rank, n_iter, n_sigma, method)
        self.popularity = popularity

    def _prior(self, observations: Observations, dm: DisguisedMatrix) -> tuple[CellPrior, str]:
        base = "disguised profiles + public σ_max, β_max + the RPT protocol"
        mode = self.popularity
        if mode == "auto":
            mode = "auxiliary" if observations.auxiliary is not None else "observed"
        if mode == "none":
            return count_only_prior, base
        if mode == "observed":
            return ObservedPopularity(), base + " + observed column fill counts"
        aux = observations.auxiliary
        if aux is None:
            raise ValidationError("auxiliary", "popularity='auxiliary' needs an auxiliary set")
        if aux.n_items != dm.n_items:
            raise ValidationError(
                "auxiliary.ratings", f"has {aux.n_items} items, the run has {dm.n_items}"
            )
        counts = np.bincount(aux.ratings.indices, minlength=dm.n_items).astype(np.float64)
        return (
            AuxiliaryPopularity(counts),
            base + f" + auxiliary item popularity ({aux.n_users} raw profiles, {aux.name})",
        )

    def _fit(self, observations: Observations) -> AttackOutput:
        dm = disguised_matrix(observations)
        prior, knowledge = self._prior(observations, dm)
        post = self._posterior(dm, prior)
        return AttackOutput(
            attack=self.name,
            kind=OutputKind.GENUINE_SCORE,
            knowledge=knowledge,
            per_user=per_user_from_flat(
                dm.user_ids, dm.matrix.indptr, dm.matrix.indices, post.log_odds
            ),
            diagnostics={
                "rank": float(post.rank),
                "tau2": post.tau2,
                "mean_genuine_fraction_hat": float(np.mean(post.genuine / dm.filled)),
                "iterations": float(post.iterations),
            },
        )


__all__ = ["AuxiliaryPopularity", "FakeDetection", "ObservedPopularity", "popularity_odds"]
