"""RPT: ratings recovered after guessing each user's mean and deviation.

RPT releases disguised z-scores (Bilge Procedure 1); a user keeps her mean v̄_u and deviation
σ_u, so that the server's answers mean nothing on the rating scale until she de-normalises
them herself (Bilge Eq 2.5; §3.1.2 last paragraph: "the server never sees them"). The z-score
attacks (`rpt_bayes`) stop at ẑ. This attack goes on to ratings,

    r̂_uj = clip(v̂_u + ŝ_u·ẑ_uj, r_min, r_max)        at every filled cell,

guessing v̂_u and ŝ_u from what the disguised profile says about the user, calibrated on
auxiliary users whose true ratings the adversary holds (the stated side knowledge
`[adversary] outside_users`, users outside the run; Balu §3.5.1 gives the adversary the same
kind of "training users"):

1. The adversary releases each auxiliary profile with RPT itself (the public σ_max, β_max, its
   own generators ``rng_for(seed, "adversary", name, "calibration", id)``), stacks those rows
   under the observed ones and fits the joint RPT posterior on all (`rpt_bayes.fit_rpt_posterior`):
   ẑ and the genuine probability γ per filled cell, for the auxiliary users exactly as for the
   attacked ones.
2. Per user, features of what was released: t_u, the γ-weighted mean over her filled cells of
   the auxiliary item means µ_j (people who watch well-liked films rate higher: her mean
   follows the items she chose); c_u, the γ-weighted slope of µ_j on ẑ_uj (does she agree with
   the crowd); and log Σ_j γ_uj (her estimated number of ratings). The auxiliary users' own
   features use leave-one-out item means (their own ratings out of µ_j).
3. Ridge regressions, fitted on the auxiliary users, of v̄_u on the features and of the
   deviation that best maps ẑ to her ratings, s*_u = Σ_j (r_uj − v̄_u)ẑ_uj / Σ_j ẑ_uj² over her
   genuine cells (the posterior mean ẑ is shrunk towards 0; s* undoes the shrinkage as σ_u
   alone would not).
4. r̂ from the predicted v̂_u and ŝ_u.

Without an auxiliary set the guess is the know-nothing one, v̂ = the middle of the public
rating scale and ŝ = a quarter of its range (a user whose ratings span the scale), and the
output's `knowledge` says so.

Choices where the thesis is silent (it gives no attack): the features, ridge λ = 1, item means
shrunk to the global mean with 5 pseudo-ratings, clipping to the scale.

References:
    A. Bilge, PhD thesis, Anadolu University, 2013, Procedure 1, Eq 2.5, §3.1.2.
    Z. Huang, W. Du, B. Chen, "Deriving private information from randomized data",
    SIGMOD 2005 (the z-score posterior this attack starts from).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from privrec.adversary.attacks.base import Attack, AttackOutput, OutputKind, per_user_from_flat
from privrec.adversary.attacks.rpt_bayes import RptPosterior, fit_rpt_posterior
from privrec.adversary.attacks.rpt_matrix import DisguisedMatrix, disguised_matrix
from privrec.adversary.observations import Observations
from privrec.shared.data.dataset import RatingData
from privrec.shared.mechanisms.base import Profile
from privrec.shared.mechanisms.rpt import RandomizedPerturbation
from privrec.shared.seeding import rng_for
from privrec.shared.types import FloatArray, IntArray

_PSEUDO = 5.0


def with_calibration_rows(
    dm: DisguisedMatrix, auxiliary: RatingData, seed: int, key: str
) -> DisguisedMatrix:
    """`dm` with the auxiliary users' profiles, released by the adversary with RPT, appended
    as rows (ids "aux:<id>")."""
    mech = RandomizedPerturbation(dm.sigma_max, dm.beta_max)
    aux = auxiliary.ratings.tocsr()
    if aux.shape[1] != dm.n_items:
        raise ValueError(f"auxiliary has {aux.shape[1]} items, the run {dm.n_items}")
    ids, idx, val = [], [], []
    for r in range(aux.shape[0]):
        items = aux.indices[aux.indptr[r] : aux.indptr[r + 1]].astype(np.int64)
        ratings = aux.data[aux.indptr[r] : aux.indptr[r + 1]].astype(np.float64)
        order = np.argsort(items)
        uid = str(int(auxiliary.user_ids[r]))
        rel = mech.release(
            Profile(items[order], ratings[order], dm.n_items),
            rng_for(seed, "adversary", key, "calibration", uid),
        )
        ids.append(f"aux:{uid}")
        idx.append(rel.indices)
        val.append(rel.values)
    extra = sp.csr_matrix(
        (
            np.concatenate(val),
            np.concatenate(idx),
            np.concatenate([[0], np.cumsum([i.size for i in idx])]).astype(np.int64),
        ),
        shape=(len(ids), dm.n_items),
    )
    return DisguisedMatrix(
        dm.user_ids + ids, sp.vstack([dm.matrix, extra]).tocsr(), dm.sigma_max, dm.beta_max
    )


def _weighted_features(
    rows: IntArray, gamma: FloatArray, z: FloatArray, mu_cell: FloatArray, n: int
) -> FloatArray:
    """[1, t_u, c_u, log Σγ] per row (module docstring, step 2)."""
    w = np.bincount(rows, gamma, minlength=n)
    wsafe = np.maximum(w, 1e-9)
    t = np.bincount(rows, gamma * mu_cell, minlength=n) / wsafe
    zbar = np.bincount(rows, gamma * z, minlength=n) / wsafe
    dz = z - zbar[rows]
    dmu = mu_cell - t[rows]
    cov = np.bincount(rows, gamma * dz * dmu, minlength=n)
    var = np.bincount(rows, gamma * dz * dz, minlength=n)
    c = cov / np.maximum(var, 1e-9)
    out: FloatArray = np.column_stack([np.ones(n), t, c, np.log(np.maximum(w, 1.0))])
    return out


def _ridge(x: FloatArray, y: FloatArray, lam: float) -> FloatArray:
    """Ridge coefficients (the intercept, column 0, unpenalised); features standardised."""
    mean, sd = x.mean(axis=0), x.std(axis=0)
    sd[0], mean[0] = 1.0, 0.0
    sd[sd == 0] = 1.0
    xs = (x - mean) / sd
    pen = np.full(x.shape[1], lam)
    pen[0] = 0.0
    beta = np.linalg.solve(xs.T @ xs + np.diag(pen), xs.T @ y)
    # back to the raw features
    raw: FloatArray = np.asarray(beta / sd, dtype=np.float64)
    raw[0] = beta[0] - float(np.sum(beta[1:] * mean[1:] / sd[1:]))
    return raw


class RptRatingRecovery(Attack):
    """Ratings from RPT releases after guessing each user's mean and deviation (module
    docstring).

    Args:
        max_rank: basis components of the z-score posterior.
        n_iter: its EM iterations.
        seed: seed of the adversary's own calibration releases.
        ridge: λ of the two calibration regressions.
    """

    name = "rpt_rating_recovery"
    knowledge = (
        "disguised profiles + public σ_max, β_max, rating scale + raw profiles of users "
        "outside the run (auxiliary, for calibration)"
    )
    applies_to = ("rpt",)

    def __init__(self, max_rank: int = 20, n_iter: int = 8, seed: int = 0, ridge: float = 1.0):
        for key, val, low in (("max_rank", max_rank, 1), ("n_iter", n_iter, 1), ("seed", seed, 0)):
            if not (isinstance(val, int) and not isinstance(val, bool) and val >= low):
                raise ValueError(f"`{key}` must be an int >= {low}, got {val!r}")
        if not (isinstance(ridge, int | float) and math.isfinite(ridge) and ridge >= 0):
            raise ValueError(f"`ridge` must be a finite number >= 0, got {ridge!r}")
        self.max_rank, self.n_iter, self.seed, self.ridge = max_rank, n_iter, seed, float(ridge)

    def _fit(self, observations: Observations) -> AttackOutput:
        dm = disguised_matrix(observations)
        lo, hi = observations.run_config.rating_scale
        aux = observations.auxiliary
        n_obs = dm.n_users
        full = with_calibration_rows(dm, aux, self.seed, self.name) if aux is not None else dm
        post = fit_rpt_posterior(full, max_rank=self.max_rank, n_iter=self.n_iter)
        rows, cols = full.rows, full.matrix.indices
        obs_cells = rows < n_obs
        if aux is None:
            mean_hat = np.full(n_obs, 0.5 * (lo + hi))
            dev_hat = np.full(n_obs, 0.25 * (hi - lo))
            diagnostics = {"calibration_users": 0.0}
            knowledge = (
                "disguised profiles + public σ_max, β_max, rating scale (no auxiliary set: "
                "mean and deviation guessed from the scale)"
            )
        else:
            mean_hat, dev_hat, diagnostics = self._calibrate(full, post, aux, n_obs)
            knowledge = self.knowledge
        z = post.z_hat[obs_cells]
        r_hat = np.clip(mean_hat[rows[obs_cells]] + dev_hat[rows[obs_cells]] * z, lo, hi)
        indptr = dm.matrix.indptr
        return AttackOutput(
            attack=self.name,
            kind=OutputKind.DENORMALISED_HAT,
            knowledge=knowledge,
            per_user=per_user_from_flat(
                dm.user_ids,
                indptr.astype(np.int64),
                cols[obs_cells].astype(np.int64),
                r_hat,
            ),
            diagnostics=diagnostics
            | {
                "mean_hat_mean": float(np.mean(mean_hat)),
                "deviation_hat_mean": float(np.mean(dev_hat)),
                "rank": float(post.rank),
            },
        )

    def _calibrate(
        self, full: DisguisedMatrix, post: RptPosterior, aux: RatingData, n_obs: int
    ) -> tuple[FloatArray, FloatArray, dict[str, float]]:
        """v̂ and ŝ of the observed rows, regressions fitted on the auxiliary rows."""
        rows, cols = full.rows, full.matrix.indices
        z_hat = post.z_hat
        gamma = 1.0 / (1.0 + np.exp(-np.clip(post.log_odds, -50, 50)))
        a = aux.ratings.tocsr()
        m = full.n_items
        sums = np.bincount(a.indices, a.data, minlength=m)
        counts = np.bincount(a.indices, minlength=m).astype(np.float64)
        g = float(a.data.mean())
        mu = (sums + _PSEUDO * g) / (counts + _PSEUDO)
        # each auxiliary user's true rating at her filled cells (NaN at her fakes)
        a_rows = np.repeat(np.arange(a.shape[0]), np.diff(a.indptr)) + n_obs
        keys = a_rows.astype(np.int64) * m + a.indices
        order = np.argsort(keys)
        keys, vals = keys[order], a.data[order]
        cell_keys = rows.astype(np.int64) * m + cols
        pos = np.minimum(np.searchsorted(keys, cell_keys), keys.size - 1)
        truth = np.where(keys[pos] == cell_keys, vals[pos], np.nan)
        mu_cell = mu[cols].copy()
        genuine_aux = ~np.isnan(truth)
        # leave-one-out item means for the auxiliary users' own cells
        loo = (sums[cols] - np.nan_to_num(truth) + _PSEUDO * g) / (
            counts[cols] - genuine_aux + _PSEUDO
        )
        mu_cell[genuine_aux] = loo[genuine_aux]
        feats = _weighted_features(rows, gamma, z_hat, mu_cell, full.n_users)
        aux_rows = np.arange(n_obs, full.n_users)
        # targets on the auxiliary users
        r_sum = np.bincount(rows[genuine_aux], truth[genuine_aux], minlength=full.n_users)
        r_cnt = np.bincount(rows[genuine_aux], minlength=full.n_users).astype(np.float64)
        mean_true = r_sum / np.maximum(r_cnt, 1.0)
        dev_c = (truth - mean_true[rows]) * z_hat
        num = np.bincount(rows[genuine_aux], dev_c[genuine_aux], minlength=full.n_users)
        den = np.bincount(rows[genuine_aux], z_hat[genuine_aux] ** 2, minlength=full.n_users)
        s_star = num / np.maximum(den, 1e-9)
        ok = aux_rows[r_cnt[aux_rows] >= 2]
        b_mean = _ridge(feats[ok], mean_true[ok], self.ridge)
        b_dev = _ridge(feats[ok], s_star[ok], self.ridge)
        obs = np.arange(n_obs)
        mean_hat = feats[obs] @ b_mean
        dev_hat = np.maximum(feats[obs] @ b_dev, 0.0)
        fitted_mean = feats[ok] @ b_mean
        diagnostics = {
            "calibration_users": float(ok.size),
            "calibration_mean_rmse": float(np.sqrt(np.mean((fitted_mean - mean_true[ok]) ** 2))),
            "calibration_mean_sd": float(np.std(mean_true[ok])),
        }
        return mean_hat, dev_hat, diagnostics


__all__ = ["RptRatingRecovery", "with_calibration_rows"]
