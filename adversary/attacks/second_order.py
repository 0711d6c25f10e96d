"""Reconstruction of private users' ratings from Xin & Jaakkola's second-order releases.

What the server observes (Xin & Jaakkola 2014, Sec. 4; extraction §A3, §A6–§A7): the public users'
ratings, shared openly, from which it fits the public model (µ, V); and, from each private user,
ONE dense m-vector M(r) computed from her rating vector r completed locally with Eq. (4):

* PMD (Sec. 4, Eq. (8)): one of K candidates x ∈ S^m, every coordinate uniform on S;
* PMC (Theorem 4.2): u = a·h·sign(r − µ), a = ±1 a fair coin, h per user or shared;
* the Sec. 5 baselines: Laplace clip(r) + Lap(range/ε) per element, and "exact second order"
  a·(r − µ), a = ±1.

Def. 4.1 promises only that each coordinate ALONE says nothing (first-order deniability). The
attack reads the coordinates jointly, with the public model, to estimate the private user's
ratings. Everything it uses is public: the public users' ratings, the run config (mechanism,
its public parameters, the model name and `model_params`) and the protocol.

1. **Public model.** Rebuild (µ, V) exactly as the server does: `fit_public_model` on the
   public users stacked in user-id order, with k, λ′ and the EM rounds resolved by the
   server's model class from the published `model_params` (`public_model`), and PMC's
   shared h from the mechanism's own `public_binding` (`estimate_shared_h`). Bind a mechanism
   instance to it: the attacker now holds the very mechanism the private users ran.
2. **Calibration on the public users.** Their ratings are known, so the attacker runs the
   mechanism on them (complete + release, fixed seeds `rng_for(seed, "adversary", name,
   "calibration", user id)`) and learns how a release relates to the ratings. It is
   cross-fitted (`calibrate`): public user i in fold i mod K completes and releases under the
   public model refitted without her fold, so she is out of sample as a private user is.
   Centred release x°: x − µ for PMD and Laplace (the server's own (x − µ)(x − µ)ᵀ convention),
   x itself for PMC and exact. The map from an aligned release x̃ to r − µ is linear:

       r̂ − µ = Σ_l α_l q_l (q_lᵀ x̃) + β (x̃ − Q Qᵀ x̃),

   Q = (q_1 … q_k) an orthonormal basis of span(V). The k + 1 coefficients come from least
   squares of y − µ on the public users' RATED cells (the quantity the adversary wants and the
   referee scores; the completion elsewhere is µ + V u anyway). The α_l shrink each
   principal direction by its signal-to-noise ratio (for Gaussian noise this is the
   Bayes/Wiener estimate of the user's factor; for Laplace noise it is the best LINEAR one);
   averaging over m coordinates is what lets the low-rank part through a per-element ε. β
   weighs the off-model part, which only coordinate j itself carries. For exact second order
   the fit is α = β = 1 (r̂ = µ + x̃), for PMC the coefficients absorb 1/h.
3. **The global sign.** PMC and exact multiply by a hidden fair coin a. PMD has a hidden sign
   too: Eq. (8)'s objective depends on the candidate only through ‖a‖² and (a·b)², so the K
   candidates split into ones aligned with +(r − µ) and ones aligned with −(r − µ), and one is
   sent at random. The public users' releases are aligned with their true sign
   (sign(x°·(r − µ)), known to the attacker) before the map is fitted, and a private user's
   sign ŝ is chosen by a rule, x̃ = ŝ·x°:

   * ``grid`` (exact only): on her rated items µ + a·x° IS her rating, on the rating grid G
     (the distinct public rating values, when there are few); with the wrong sign it is
     2µ − y, generically off the grid. ŝ = the sign putting more coordinates on G; ties go
     to the next rule.
   * ``frequency``: naive Bayes on per-item sign frequencies: p_j = P(aligned x°_j ≥ 0) over
     the public users (add-one smoothed), ŝ maximises Σ_j log p_j^[ŝx°_j ≥ 0](1 − p_j)^[ŝx°_j < 0].
     It picks up the skew of ratings around the item mean (median ≠ mean) and, above all,
     coordinates whose sign is fixed: PMC sets sign(0) := +1, and r_j − µ_j = 0 exactly
     wherever V_j = 0 (items no public user rated, or one did, or all rated alike) and the
     user did not rate j, so those coordinates carry +a·h, the coin in clear.
   * ``plus``: ŝ = +1, what the attack does when the rules above do not beat a coin.

   The rule is scored on the cross-fitted public users (frequencies from the other users of
   the same fold, leave-one-out, each user's release drawn with its own coin) and adopted only
   if its accuracy exceeds 1/2 by `sign_z` binomial standard errors (z = 2: a rule no better
   than a coin is adopted 2.3 % of the time); otherwise ŝ = +1 for everyone and the
   diagnostics say so (``sign_rule`` = 0). Under the paper's symmetric low-rank model (u and
   −u equally likely, no exact zeros) no rule can beat a coin, which is what the paper states:
   the server "can reconstruct sign(r′) up to an overall randomly chosen sign" (Sec. 4); on
   synthetic rank-5 data that is what happens. On MovieLens-100K the frequency rule recovers
   PMC's coin for every user, through the zero coordinates above. The referee scores signs and
   RMSE also up to one global sign per user (`sim.referee_attacks`).
4. **Output.** r̂ = µ + map(ŝ x°) over all m items, clipped to the public rating scale, for
   every private user (`AttackOutput` kind ``"rating_hat"``).

Choices the paper leaves open (it describes no attack beyond the sign remark), made here:
the linear map's form (k subspace coefficients + 1 residual coefficient) and its target cells
(public users' rated cells); K = 5 cross-fitting folds; centring PMD by µ rather than by the
mean of S (the two gave the same error within 1 % on synthetic data); the sign rules and the
2-standard-error adoption test; clipping r̂ to the scale. `private_weight` (the server's M-step
weight) is not needed: the attack uses the model the private users completed with.

Weak points: the fold models are fitted on (K − 1)/K of the public users, so they are a little
worse than the full model the private users had, and the map a little conservative; a wrong
global sign costs more than knowing nothing (r̂ − µ points the wrong way), so when the sign is
a coin the plain RMSE is worse than the µ baseline while the sign pattern still leaks; the map
is linear (for Laplace noise the Bayes estimate is not), and ignores which items a user rated
(exact second order reveals that too: only rated coordinates land on the grid).

References:
    Y. Xin, T. Jaakkola, "Controlling privacy in recommender systems", NIPS 2014, Sec. 4
    (Def. 4.1, Eqs. (4), (8), (9), Theorem 4.2 and the remark on the global sign) and Sec. 5
    (the Laplace and exact second-order baselines).
"""

from __future__ import annotations

import dataclasses
import logging
import math

import numpy as np
import scipy.sparse as sp

from privrec.adversary.attacks.base import Attack, AttackOutput, OutputKind, UserEstimate
from privrec.adversary.attacks.public_tier import PublicTier, rebuild_public_tier
from privrec.adversary.observations import Observations
from privrec.shared.errors import ValidationError
from privrec.shared.mechanisms.base import DensePayload, Profile
from privrec.shared.seeding import rng_for
from privrec.shared.types import FloatArray, IndexArray, IntArray

logger = logging.getLogger(__name__)

SIGN_AMBIGUOUS = frozenset({"pmd", "pmc", "exact_second_order"})
"""Mechanisms whose release carries a hidden global sign (see the module docstring, step 3)."""

CENTRED_BY_MU = frozenset({"pmd", "laplace_second_order"})
"""Mechanisms whose release lives on the rating scale; x° = x − µ. The others are centred."""

SIGN_PLUS, SIGN_FREQUENCY, SIGN_GRID = 0, 1, 2
"""Codes of the sign rule in the diagnostics (``sign_rule``)."""

_MAX_GRID = 100
"""Public ratings count as lying on a grid when they take at most this many distinct values
(and each value occurs 10 times on average)."""


def centred_release(mechanism: str, values: FloatArray, mu: FloatArray) -> FloatArray:
    """x°: the release minus µ for PMD and Laplace, the release itself for PMC and exact."""
    return values - mu if mechanism in CENTRED_BY_MU else values


def orthonormal_basis(V: FloatArray) -> FloatArray:
    """Q: orthonormal columns spanning V (directions with a zero singular value dropped)."""
    u, s, _ = np.linalg.svd(V, full_matrices=False)
    if s[0] <= 0:
        return np.ascontiguousarray(u[:, :1])
    return np.ascontiguousarray(u[:, s > s[0] * 1e-10])


def map_features(
    aligned: FloatArray, basis: FloatArray, rows: IndexArray, cols: IndexArray
) -> FloatArray:
    """The k + 1 regressors of the linear map at cells (rows, cols) (module docstring, step 2).

    Column l < k is q_l[j]·(q_lᵀ x̃), column k the off-model part x̃_j − (Q Qᵀ x̃)_j. Each
    is invariant to the sign of q_l, so coefficients fitted in one basis carry over to
    another basis of nearly the same subspace (the cross-fitted models' and the full one).
    """
    proj = aligned @ basis
    sub = basis[cols] * proj[rows]
    res = aligned[rows, cols] - sub.sum(axis=1)
    out: FloatArray = np.column_stack([sub, res])
    return out


@dataclasses.dataclass(frozen=True)
class Calibration:
    """Simulated releases of the public users, each under a model fitted WITHOUT her.

    Attributes:
        centred: x° of each public user's release, relative to the µ she completed with, (n, m).
        coins: her release's true global sign, sign(x°·(r − µ)), (n,); +1 for Laplace.
        mu: the µ each user completed with, (n, m) (her fold's model).
        folds: fold of each user, (n,).
        design: map regressors at the users' rated cells, aligned with the true sign, (nnz, k+1).
        target: y − µ at those cells, (nnz,).
        n_folds: the number of folds used (1 = in-sample, the full model).
    """

    centred: FloatArray
    coins: FloatArray
    mu: FloatArray
    folds: IntArray
    design: FloatArray
    target: FloatArray
    n_folds: int


def calibrate(tier: PublicTier, mechanism: str, seed: int, key: str, n_folds: int) -> Calibration:
    """Run the mechanism on every public user (complete + release), cross-fitted.

    Public user i in fold f = i mod K completes and releases under (µ_f, V_f), the public model
    refitted on the other folds (same rank, ridge and EM rounds; PMC keeps the run's shared h,
    which is what the private users got). She then relates to (µ_f, V_f) as a private user
    relates to (µ, V): out of sample. In-sample calibration (K = 1, or too few public users for
    `rank` after holding a fold out) makes the map optimistic and biases the sign-rule score:
    deviations from a mean that includes her own ratings are anti-correlated with hers.
    Draws come from ``rng_for(seed, "adversary", key, "calibration", user id)``.
    """
    ratings = tier.ratings
    n, m = ratings.shape
    k = n_folds if n - math.ceil(n / max(n_folds, 1)) >= tier.rank and n_folds > 1 else 1
    folds = np.arange(n, dtype=np.int64) % k
    centred, mus = np.empty((n, m)), np.empty((n, m))
    coins = np.ones(n)
    design, target = [], []
    for f in range(k):
        test = np.flatnonzero(folds == f)
        if k == 1:
            mu_f, V_f, mech = tier.mu, tier.V, tier.mechanism
        else:
            mu_f, V_f = tier.refit(ratings[folds != f])
            mech = tier.mechanism_for(mu_f, V_f)
        sub = ratings[test]
        x0, comp = np.empty((test.size, m)), np.empty((test.size, m))
        for t, i in enumerate(test):
            profile = Profile(
                sub.indices[sub.indptr[t] : sub.indptr[t + 1]].astype(np.int64),
                sub.data[sub.indptr[t] : sub.indptr[t + 1]].astype(np.float64),
                m,
            )
            rng = rng_for(seed, "adversary", key, "calibration", tier.user_ids[i])
            payload = mech.release(profile, rng)
            assert isinstance(payload, DensePayload)  # every second-order release is dense
            x0[t] = centred_release(mechanism, np.asarray(payload.values, dtype=np.float64), mu_f)
            comp[t] = mech.centred(profile)
        if mechanism in SIGN_AMBIGUOUS:
            coins[test] = _sgn(np.sum(x0 * comp, axis=1))
        centred[test], mus[test] = x0, mu_f
        rows = np.repeat(np.arange(test.size), np.diff(sub.indptr))
        feats = map_features(coins[test, None] * x0, orthonormal_basis(V_f), rows, sub.indices)
        missing = tier.rank + 1 - feats.shape[1]  # a direction with a zero singular value
        if missing > 0:
            feats = np.column_stack(
                [feats[:, :-1], np.zeros((feats.shape[0], missing)), feats[:, -1]]
            )
        design.append(feats)
        target.append(sub.data - mu_f[sub.indices])
    return Calibration(centred, coins, mus, folds, np.vstack(design), np.concatenate(target), k)


# ======================================================================== the global sign
def _sgn(a: FloatArray) -> FloatArray:
    """sign with sign(0) := +1 (as PMC does)."""
    return np.where(a >= 0.0, 1.0, -1.0)


def rating_grid(ratings: sp.csr_matrix) -> FloatArray | None:
    """G, the distinct public rating values, or None when they do not look like a grid."""
    grid = np.unique(ratings.data)
    if grid.size == 0 or grid.size > min(_MAX_GRID, ratings.nnz / 10.0):
        return None
    return grid


def grid_votes(centred: FloatArray, mu: FloatArray, grid: FloatArray) -> FloatArray:
    """#coordinates with µ + x° on G minus #coordinates with µ − x° on G, per row (exact only)."""
    tol = 1e-6 * max(1.0, float(np.abs(grid).max()))

    def on_grid(v: FloatArray) -> FloatArray:
        pos = (
            np.clip(np.searchsorted(grid, v), 1, grid.size - 1)
            if grid.size > 1
            else (np.zeros(v.shape, dtype=np.int64))
        )
        near = np.minimum(np.abs(v - grid[pos]), np.abs(v - grid[np.maximum(pos - 1, 0)]))
        counts: FloatArray = np.sum(near <= tol, axis=-1).astype(np.float64)
        return counts

    return on_grid(mu + centred) - on_grid(mu - centred)


def _log_odds(n_pos: FloatArray, n: int) -> FloatArray:
    p = (n_pos + 1.0) / (n + 2.0)
    odds: FloatArray = np.log(p) - np.log1p(-p)
    return odds


@dataclasses.dataclass(frozen=True)
class SignModel:
    """The rule that picks each private user's global sign (module docstring, step 3).

    Attributes:
        rule: SIGN_PLUS, SIGN_FREQUENCY or SIGN_GRID (grid, ties broken by frequency).
        log_odds: float array of shape (m,), log p_j/(1 − p_j) of "aligned x°_j ≥ 0".
        grid: G for the grid rule, or None.
        accuracy_public: leave-one-out accuracy of the best rule on the public users.
        threshold: the accuracy it had to exceed, 1/2 + z·(1/2)/√n_public.
    """

    rule: int
    log_odds: FloatArray
    grid: FloatArray | None
    accuracy_public: float
    threshold: float

    def choose(self, centred: FloatArray, mu: FloatArray) -> FloatArray:
        """ŝ ∈ {±1} for each row of `centred` (shape (n, m))."""
        if self.rule == SIGN_PLUS:
            return np.ones(centred.shape[0])
        return _decide(centred, mu, self.log_odds[None, :], self.grid)


def _decide(
    centred: FloatArray, mu: FloatArray, log_odds: FloatArray, grid: FloatArray | None
) -> FloatArray:
    freq = np.sum(_sgn(centred) * log_odds, axis=1)
    if grid is None:
        return _sgn(freq)
    votes = grid_votes(centred, mu, grid)
    return np.where(votes != 0.0, np.sign(votes), _sgn(freq))


def fit_sign_model(
    mechanism: str, cal: Calibration, ratings: sp.csr_matrix, sign_z: float
) -> SignModel:
    """Choose the sign rule and score it on the public users (module docstring, step 3).

    The frequencies applied to private users pool every public user's aligned release. The
    score of user i uses only the other users of her fold (leave-one-out within the fold):
    they completed with the same µ_f, which none of them helped to fit, so they are
    independent of her, as the public users are of a private one.

    Args:
        mechanism: the run's mechanism name.
        cal: the cross-fitted calibration set.
        ratings: the public ratings (for the grid).
        sign_z: adoption margin in binomial standard errors.
    """
    n, m = cal.centred.shape
    if mechanism not in SIGN_AMBIGUOUS:
        return SignModel(SIGN_PLUS, np.zeros(m), None, 1.0, 0.0)
    aligned_pos = (cal.coins[:, None] * cal.centred) >= 0.0
    grid = rating_grid(ratings) if mechanism == "exact_second_order" else None
    hits = 0.0
    for f in range(cal.n_folds):
        test = cal.folds == f
        pos = aligned_pos[test]
        loo = _log_odds(pos.sum(axis=0)[None, :] - pos, int(test.sum()) - 1)
        hits += float(
            np.sum(_decide(cal.centred[test], cal.mu[test], loo, grid) == cal.coins[test])
        )
    accuracy = hits / n
    threshold = 0.5 + sign_z * 0.5 / math.sqrt(n)
    if accuracy > threshold:
        rule = SIGN_GRID if grid is not None else SIGN_FREQUENCY
    else:
        rule = SIGN_PLUS
    return SignModel(
        rule, _log_odds(aligned_pos.sum(axis=0).astype(np.float64), n), grid, accuracy, threshold
    )


# ======================================================================== the linear map
@dataclasses.dataclass(frozen=True)
class ReleaseMap:
    """r̂ − µ = Q diag(α) Qᵀ x̃ + β (x̃ − Q Qᵀ x̃) (module docstring, step 2).

    Attributes:
        basis: Q, float array of shape (m, k) with orthonormal columns spanning V.
        subspace_coef: α, shape (k,).
        residual_coef: β.
        calibration_rmse: RMSE of the map on the public users' rated cells (cross-fitted, so
            an honest preview of the error on private users when the sign is right).
        calibration_rmse_mu: the same for r̂ = µ.
    """

    basis: FloatArray
    subspace_coef: FloatArray
    residual_coef: float
    calibration_rmse: float
    calibration_rmse_mu: float

    def apply(self, aligned: FloatArray) -> FloatArray:
        """The estimate of r − µ for each row of `aligned` (shape (n, m))."""
        proj = aligned @ self.basis
        inside = proj @ self.basis.T
        out: FloatArray = (proj * self.subspace_coef) @ self.basis.T + self.residual_coef * (
            aligned - inside
        )
        return out


def fit_release_map(cal: Calibration, V: FloatArray) -> ReleaseMap:
    """Least squares of y − µ on the map regressors at the public users' rated cells.

    Args:
        cal: the calibration set (regressors built in each fold's basis).
        V: the full public model's factor, shape (m, k), whose basis the map is applied in.
    """
    basis = orthonormal_basis(V)
    design = cal.design
    if design.shape[1] != basis.shape[1] + 1:
        # A fold model lost a direction (zero singular value) that the full one has, or the
        # reverse; fit in the common leading directions only.
        k = min(design.shape[1], basis.shape[1] + 1) - 1
        design = np.column_stack([design[:, :k], design[:, -1]])
        basis = basis[:, :k]
    coef: FloatArray = np.linalg.lstsq(design, cal.target, rcond=None)[0].astype(np.float64)
    fitted = design @ coef
    return ReleaseMap(
        basis,
        coef[:-1].copy(),
        float(coef[-1]),
        float(np.sqrt(np.mean((fitted - cal.target) ** 2))),
        float(np.sqrt(np.mean(cal.target**2))),
    )


# ======================================================================== the attack
class SecondOrderReconstruction(Attack):
    """Ratings of private users from one second-order release each (module docstring).

    Args:
        seed: seed of the calibration releases simulated on the public users.
        n_folds: K of the cross-fitted calibration (1 = in-sample, on the full model).
        sign_z: a sign rule is adopted only if its accuracy on the public users exceeds 1/2 by
            this many binomial standard errors (else ŝ = +1).

    References:
        Y. Xin, T. Jaakkola, NIPS 2014, Sec. 4 (Def. 4.1, Eq. (8), Theorem 4.2) and Sec. 5.
    """

    name = "second_order_reconstruction"
    knowledge = (
        "second-order releases + public users' shared ratings + run config "
        "(mechanism, public params, model params) + the protocol"
    )
    applies_to = ("pmd", "pmc", "laplace_second_order", "exact_second_order")

    def __init__(self, seed: int = 0, n_folds: int = 5, sign_z: float = 2.0) -> None:
        for key, val, low in (("seed", seed, 0), ("n_folds", n_folds, 1)):
            if not (isinstance(val, int) and not isinstance(val, bool) and val >= low):
                raise ValueError(f"`{key}` must be an int >= {low}, got {val!r}")
        if not (isinstance(sign_z, int | float) and math.isfinite(sign_z) and sign_z >= 0):
            raise ValueError(f"`sign_z` must be a finite number >= 0, got {sign_z!r}")
        self.seed, self.n_folds, self.sign_z = seed, n_folds, float(sign_z)

    @staticmethod
    def _private_releases(
        observations: Observations, tier: PublicTier
    ) -> tuple[list[str], FloatArray]:
        if not observations.profiles:
            raise ValidationError("profiles", "no private releases observed")
        m = observations.n_items
        uids, rows = [], []
        for uid, payload in observations.profiles.items():
            try:
                tier.mechanism.validate(payload, m)
            except ValidationError as exc:
                raise ValidationError(f"profiles[{uid!r}]", str(exc)) from exc
            assert isinstance(payload, DensePayload)  # validate() checked the wire shape
            uids.append(uid)
            rows.append(np.asarray(payload.values, dtype=np.float64))
        return uids, np.vstack(rows)

    def _fit(self, observations: Observations) -> AttackOutput:
        mechanism = observations.run_config.mechanism_name
        tier = rebuild_public_tier(observations)
        uids, private = self._private_releases(observations, tier)
        cal = calibrate(tier, mechanism, self.seed, self.name, self.n_folds)
        signs = fit_sign_model(mechanism, cal, tier.ratings, self.sign_z)
        release_map = fit_release_map(cal, tier.V)

        x0 = centred_release(mechanism, private, tier.mu)
        s_hat = signs.choose(x0, tier.mu)
        r_hat = tier.mu + release_map.apply(s_hat[:, None] * x0)
        r_hat = np.clip(r_hat, *observations.run_config.rating_scale)
        items = np.arange(observations.n_items, dtype=np.int64)
        per_user = {uid: UserEstimate(items.copy(), r_hat[u].copy()) for u, uid in enumerate(uids)}
        diagnostics = {
            "n_public": float(len(tier.user_ids)),
            "n_private": float(len(uids)),
            "rank": float(release_map.basis.shape[1]),
            "calibration_folds": float(cal.n_folds),
            "subspace_coef_mean": float(np.mean(release_map.subspace_coef)),
            "residual_coef": release_map.residual_coef,
            "calibration_rmse": release_map.calibration_rmse,
            "calibration_rmse_mu": release_map.calibration_rmse_mu,
            "sign_rule": float(signs.rule),
            "share_plus_sign": float(np.mean(s_hat > 0)),
        }
        if mechanism in SIGN_AMBIGUOUS:
            diagnostics |= {
                "sign_rule_accuracy_public": signs.accuracy_public,
                "sign_rule_threshold": signs.threshold,
            }
        if tier.shared_h is not None:
            diagnostics["shared_h"] = tier.shared_h
        logger.info(
            "%s on %s: %d public, %d private users, sign rule %d (public accuracy %.3f)",
            self.name,
            mechanism,
            len(tier.user_ids),
            len(uids),
            signs.rule,
            signs.accuracy_public,
        )
        return AttackOutput(
            attack=self.name,
            kind=OutputKind.RATING_HAT,
            knowledge=self.knowledge,
            per_user=per_user,
            diagnostics=diagnostics,
        )


__all__ = [
    "Calibration",
    "ReleaseMap",
    "SecondOrderReconstruction",
    "SignModel",
    "calibrate",
    "centred_release",
    "fit_release_map",
    "fit_sign_model",
    "map_features",
    "orthonormal_basis",
]
