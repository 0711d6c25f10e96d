"""Undoing RRT: each group's flip inferred from population statistics, then the true bits.

What the server observes (Bilge 2013, §2.2.2, Procedure 2; `shared.mechanisms.rrt`): for every
user u her rated items exactly, each with a bit b_uj = t_uj ⊕ f_{u,g(j)}, where t_uj = [r_uj >
threshold] is her true like and f_{u,g} ~ Bernoulli(1 − θ) flips all of group g (the M
contiguous item groups, ⌊jM/m⌋) at once. θ, M, the threshold and the grouping are public. Each
bit alone is right with probability θ; Bilge gives no other measure (extraction §2.3).

The attack uses what a whole group says together. Likes are not coin flips: some items are
liked by almost everybody, some users like almost everything. Model the true bits as

    P(t_uj = 1) = σ(α_u + β_j)                                   (user and item effects)

and treat the flips as missing data (EM, Dempster–Laird–Rubin 1977):

* E-step: for each (user, group) with released cells, the posterior of the flip,
  P(f = 1 | b) = (1 − θ)L₁ / (θL₀ + (1 − θ)L₁), L₀ = Π_j P(t_uj = b_uj), L₁ = Π_j P(t_uj = 1 −
  b_uj) over her cells in the group; the expected true bit is E[t_uj] = b_uj ⊕ flip, in
  expectation.
* M-step: α and β by Newton steps on the logistic log-likelihood of the expected bits, with
  Gaussian priors α_u ~ N(0, τ_u²), β_j ~ N(β⁰_j, τ_i²) (τ_u = τ_i = 2, a choice), β⁰ from the
  de-biased item like rates. The observed rate o_j of 1s at item j has
  E[o_j] = θp_j + (1 − θ)(1 − p_j), so p_j = (o_j − 1 + θ)/(2θ − 1) (Warner 1965), clipped to
  [0.02, 0.98]; β⁰_j = logit(p_j), shrunk to the global rate with 2 pseudo-observations.

The output for every released cell is E[t_uj | everything observed] (kind ``"bit_hat"``); the
referee thresholds it at ½ for the recovered bit, reads a group's inferred flip from whether the
recovered bits disagree with the released ones, and compares both with θ, the rate at which the
released bits are right as they stand (`sim.referee_attacks`).

The power grows with the number of rated items per group (evidence per flip), so it falls as M
grows (M = m leaves one cell per group: nothing but the item and user rates, a weak prior) and
as θ nears ½ (flips are frequent, the prior odds θ/(1 − θ) weak, and the item rates themselves
harder to de-bias).

Choices where the thesis is silent: the logistic user + item model (no low-rank taste term),
the priors, 15 EM iterations, initial flips at their prior θ.

References:
    A. Bilge, PhD thesis, Anadolu University, 2013, §2.2.2, Procedure 2.
    S. L. Warner, "Randomized response: a survey technique for eliminating evasive answer
    bias", JASA 60(309), 1965.
    A. P. Dempster, N. M. Laird, D. B. Rubin, "Maximum likelihood from incomplete data via the
    EM algorithm", JRSS B 39(1), 1977.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.special as sc

from privrec.adversary.attacks.base import Attack, AttackOutput, per_user_from_flat
from privrec.adversary.observations import Observations
from privrec.shared.errors import ValidationError
from privrec.shared.mechanisms.base import SparsePayload
from privrec.shared.mechanisms.rrt import group_of
from privrec.shared.types import FloatArray, IntArray

_CLIP = 0.02


@dataclasses.dataclass(frozen=True)
class RrtView:
    """The released RRT bits of every observed user, flattened in user-id order.

    Attributes:
        user_ids: row order.
        indptr: int64 (n + 1,), CSR row pointers into `items`/`bits`.
        items: int64 (nnz,), released (rated) items.
        bits: float64 (nnz,), released bits (0/1).
        theta, n_groups, threshold: the public parameters.
        n_items: m.
    """

    user_ids: list[str]
    indptr: IntArray
    items: IntArray
    bits: FloatArray
    theta: float
    n_groups: int
    threshold: float
    n_items: int

    @property
    def rows(self) -> IntArray:
        return np.repeat(np.arange(len(self.user_ids)), np.diff(self.indptr)).astype(np.int64)

    @property
    def groups(self) -> IntArray:
        """Key u·M + g of each cell's (user, group)."""
        g = group_of(self.items, self.n_items, self.n_groups)
        out: IntArray = self.rows * self.n_groups + g
        return out


def rrt_view(observations: Observations) -> RrtView:
    """Stack the observed RRT releases.

    Raises:
        ValidationError: bad public parameters or a malformed release (naming the user).
    """
    params = observations.public_params
    try:
        theta = float(params["theta"])
        n_groups = int(params["n_groups"])
        threshold = float(params["threshold"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValidationError(
            "public_params", f"need theta, n_groups and threshold, got {params!r}"
        ) from exc
    if not 0.5 <= theta <= 1.0:
        raise ValidationError("public_params.theta", f"must be in [0.5, 1], got {theta!r}")
    m = observations.n_items
    if not 1 <= n_groups <= m:
        raise ValidationError("public_params.n_groups", f"must be in [1, {m}], got {n_groups!r}")
    uids, idx, val = [], [], []
    for uid, payload in observations.profiles.items():
        field = f"profiles[{uid!r}]"
        if not isinstance(payload, SparsePayload) or payload.dim != m:
            raise ValidationError(field, "expected a SparsePayload of the run's n_items")
        i = np.asarray(payload.indices, dtype=np.int64)
        v = np.asarray(payload.values, dtype=np.float64)
        if i.shape != v.shape or (i.size and (i[0] < 0 or i[-1] >= m or np.any(np.diff(i) <= 0))):
            raise ValidationError(f"{field}.indices", "must be strictly increasing in [0, m)")
        if not np.all((v == 0.0) | (v == 1.0)):
            raise ValidationError(f"{field}.values", "must be 0 or 1")
        uids.append(uid)
        idx.append(i)
        val.append(v)
    if not uids:
        raise ValidationError("profiles", "no profile releases observed")
    indptr = np.concatenate([[0], np.cumsum([i.size for i in idx])]).astype(np.int64)
    return RrtView(
        uids, indptr, np.concatenate(idx), np.concatenate(val), theta, n_groups, threshold, m
    )


def debiased_item_rates(view: RrtView) -> FloatArray:
    """p_j = (o_j − 1 + θ)/(2θ − 1) from the observed rate o_j of 1s (Warner 1965), shrunk to
    the global rate with 2 pseudo-observations and clipped to [0.02, 0.98]."""
    m, theta = view.n_items, view.theta
    counts = np.bincount(view.items, minlength=m).astype(np.float64)
    ones = np.bincount(view.items, weights=view.bits, minlength=m)
    overall = float(view.bits.mean()) if view.bits.size else 0.5
    obs = (ones + 2.0 * overall) / (counts + 2.0)
    # at θ = ½ the bits carry nothing about the items
    p = (obs - 1.0 + theta) / (2.0 * theta - 1.0) if theta > 0.5 + 1e-9 else np.full(m, 0.5)
    out: FloatArray = np.clip(p, _CLIP, 1.0 - _CLIP)
    return out


@dataclasses.dataclass(frozen=True)
class FlipPosterior:
    """The fitted model.

    Attributes:
        p_true: float64 (nnz,), E[t_uj] per released cell.
        p_flip: float64 (nnz,), the posterior flip probability of each cell's group.
        user_effect: α, (n,).
        item_effect: β, (m,).
        iterations: EM iterations run.
    """

    p_true: FloatArray
    p_flip: FloatArray
    user_effect: FloatArray
    item_effect: FloatArray
    iterations: int


def fit_flip_posterior(
    view: RrtView, n_iter: int = 15, user_prior: float = 2.0, item_prior: float = 2.0
) -> FlipPosterior:
    """EM over the group flips with the logistic user + item model (module docstring)."""
    n, m = len(view.user_ids), view.n_items
    rows, cols, b = view.rows, view.items, view.bits
    keys = view.groups
    n_keys = n * view.n_groups
    beta0 = sc.logit(debiased_item_rates(view))
    alpha, beta = np.zeros(n), beta0.copy()
    log_prior = np.log(view.theta / (1.0 - view.theta)) if view.theta < 1.0 else np.inf
    p_flip = np.full(b.size, 1.0 - view.theta)
    y = b.copy()
    for _ in range(n_iter):
        s = alpha[rows] + beta[cols]
        # log P(t = b) and log P(t = 1 − b) per cell
        log_same = np.where(b > 0.5, sc.log_expit(s), sc.log_expit(-s))
        log_diff = np.where(b > 0.5, sc.log_expit(-s), sc.log_expit(s))
        l0 = np.bincount(keys, weights=log_same, minlength=n_keys)
        l1 = np.bincount(keys, weights=log_diff, minlength=n_keys)
        # log odds of "not flipped" for each (user, group)
        odds = log_prior + l0 - l1
        p_flip = sc.expit(-odds)[keys] if np.isfinite(log_prior) else np.zeros(b.size)
        y = b * (1.0 - p_flip) + (1.0 - b) * p_flip
        # M-step: one Newton step on each side of the logistic model with soft labels y
        for _ in range(2):
            pr = sc.expit(alpha[rows] + beta[cols])
            w = pr * (1.0 - pr)
            grad_a = np.bincount(rows, weights=y - pr, minlength=n) - alpha / user_prior**2
            hess_a = np.bincount(rows, weights=w, minlength=n) + 1.0 / user_prior**2
            alpha = alpha + grad_a / hess_a
            pr = sc.expit(alpha[rows] + beta[cols])
            w = pr * (1.0 - pr)
            grad_b = np.bincount(cols, weights=y - pr, minlength=m) - (beta - beta0) / item_prior**2
            hess_b = np.bincount(cols, weights=w, minlength=m) + 1.0 / item_prior**2
            beta = beta + grad_b / hess_b
    return FlipPosterior(y, p_flip, alpha, beta, n_iter)


class RrtFlipInference(Attack):
    """Infer every group's flip from population statistics and recover the true bits
    (module docstring).

    Args:
        n_iter: EM iterations.
        user_prior: τ_u, prior sd of the user effects.
        item_prior: τ_i, prior sd of the item effects around their de-biased rates.

    References:
        Bilge 2013, §2.2.2 (RRT); Warner 1965 (de-biasing randomized response).
    """

    name = "rrt_flip_inference"
    knowledge = "RRT releases + public θ, M, threshold and grouping"
    applies_to = ("rrt",)

    def __init__(self, n_iter: int = 15, user_prior: float = 2.0, item_prior: float = 2.0) -> None:
        if not (isinstance(n_iter, int) and not isinstance(n_iter, bool) and n_iter >= 1):
            raise ValueError(f"`n_iter` must be an int >= 1, got {n_iter!r}")
        for key, val in (("user_prior", user_prior), ("item_prior", item_prior)):
            if not (isinstance(val, int | float) and np.isfinite(val) and val > 0):
                raise ValueError(f"`{key}` must be a finite number > 0, got {val!r}")
        self.n_iter = n_iter
        self.user_prior, self.item_prior = float(user_prior), float(item_prior)

    def _fit(self, observations: Observations) -> AttackOutput:
        view = rrt_view(observations)
        post = fit_flip_posterior(view, self.n_iter, self.user_prior, self.item_prior)
        flipped = (post.p_flip > 0.5).astype(np.float64)
        return AttackOutput(
            attack=self.name,
            kind="bit_hat",
            knowledge=self.knowledge,
            per_user=per_user_from_flat(view.user_ids, view.indptr, view.items, post.p_true),
            diagnostics={
                "iterations": float(post.iterations),
                "theta": view.theta,
                "n_groups": float(view.n_groups),
                "share_cells_in_flipped_groups": float(flipped.mean()),
                "user_effect_sd": float(np.std(post.user_effect)),
                "item_effect_sd": float(np.std(post.item_effect)),
            },
        )


__all__ = [
    "FlipPosterior",
    "RrtFlipInference",
    "RrtView",
    "debiased_item_rates",
    "fit_flip_posterior",
    "rrt_view",
]
