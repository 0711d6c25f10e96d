"""The referee's scores of reconstructed ratings (Xin & Jaakkola's second-order releases).

Rating reconstruction (`OutputKind.RATING_HAT`, Xin & Jaakkola's second-order releases,
`adversary.attacks.second_order`): on each user's truly rated items, RMSE and MAE of r̂ against
her rating, beside the free baseline r̂ = µ, the public item means. µ is recomputed HERE from
the public users' openly shared ratings (`public`, i.e. `Observations.public`) with the
server's own estimator (`completion.public_item_means`), not taken from the attack: the
baseline must not depend on what the attack reports, and µ is the same m-vector for every
user, so it does not belong in a per-user estimate. Also: sign accuracy, the fraction of
rated cells with sign(r̂ − µ) = sign(r − µ) (sign(0) := +1, as PMC), beside a coin (1/2)
and the µ baseline's constant "+"; the same maximised over one global sign flip per user
("up to global sign", the leakage the paper states for PMC), beside its chance level
E[max(X, n − X)]/n, X ~ Bin(n, 1/2), and the µ baseline's max(share +, share −); and
`rmse_best_global_sign`, the RMSE when for each user the better of r̂ and its mirror
2µ − r̂ is kept (what the attack would reach if it learned that one bit; an oracle figure).
The ``*_permuted`` figures score each user's truth against ANOTHER user's estimate (the next
in id order): the level an attack reaches with estimates unrelated to the user. It is the
fair reference for the global-sign figures, which the structure all users share (item
effects, low-rank sign patterns) lifts above the binomial chance.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

import numpy as np
import scipy.stats

from privrec.adversary.attacks.base import AttackOutput
from privrec.shared.mechanisms.base import Payload
from privrec.shared.mechanisms.completion import public_item_means, public_ratings_matrix
from privrec.shared.types import FloatArray, IntArray
from privrec.sim.referee_cells import TruthProfiles, user_pairs


def sign(a: FloatArray) -> FloatArray:
    """±1 elementwise, +1 at zero (PMC's convention)."""
    return np.where(a >= 0.0, 1.0, -1.0)


@functools.cache
def max_flip_chance(n: int) -> float:
    """E[max(X, n − X)] for X ~ Bin(n, 1/2): agreements of a coin-sign vector after the flip
    (an expected count; divide by the cells for an accuracy)."""
    x = np.arange(n + 1)
    return float(np.sum(np.maximum(x, n - x) * scipy.stats.binom.pmf(x, n, 0.5)))


_Cells = tuple[IntArray, FloatArray, IntArray, FloatArray]
"""(estimate indices, estimate values, true items sorted, their true ratings)."""


def _rating_metrics(cells: list[_Cells], mu: FloatArray) -> dict[str, float]:
    """RMSE, MAE and sign metrics of r̂ on the true cells the estimates cover (pooled)."""
    err, err_mu, err_best = [], [], []
    agree = agree_mu = agree_g = agree_g_mu = chance_g = 0.0
    n_true = n_users = 0
    for idx, val, items, ratings in cells:
        n_true += items.size
        hit = np.isin(items, idx, assume_unique=True)
        g = int(hit.sum())
        if not g:
            continue
        n_users += 1
        y, m_j = ratings[hit], mu[items[hit]]
        r_hat = val[np.searchsorted(idx, items[hit])]
        e = r_hat - y
        e_mirror = (2.0 * m_j - r_hat) - y
        err.append(e)
        err_mu.append(m_j - y)
        err_best.append(e if e @ e <= e_mirror @ e_mirror else e_mirror)
        true_sign = sign(y - m_j)
        a = float(np.sum(sign(r_hat - m_j) == true_sign))
        plus = float(np.sum(true_sign > 0))
        agree += a
        agree_mu += plus
        agree_g += max(a, g - a)
        agree_g_mu += max(plus, g - plus)
        chance_g += max_flip_chance(g)
    if not err:
        raise ValueError("no estimate falls on a rated cell")
    e, e_mu, e_best = np.concatenate(err), np.concatenate(err_mu), np.concatenate(err_best)
    n = float(e.size)
    return {
        "rmse": float(np.sqrt(np.mean(e**2))),
        "mae": float(np.mean(np.abs(e))),
        "rmse_mu": float(np.sqrt(np.mean(e_mu**2))),
        "mae_mu": float(np.mean(np.abs(e_mu))),
        "rmse_best_global_sign": float(np.sqrt(np.mean(e_best**2))),
        "sign_accuracy": agree / n,
        "sign_accuracy_mu": agree_mu / n,
        "sign_accuracy_chance": 0.5,
        "sign_accuracy_global": agree_g / n,
        "sign_accuracy_global_mu": agree_g_mu / n,
        "sign_accuracy_global_chance": chance_g / n,
        "n_cells": n,
        "n_users": float(n_users),
        "coverage": n / max(n_true, 1),
    }


def score_rating_hat(
    output: AttackOutput, truth: TruthProfiles, public: Mapping[str, Payload] | None
) -> dict[str, float]:
    """The rating reconstruction's figures (module docstring).

    Args:
        output: a ``rating_hat`` output.
        truth: user id → (items, ratings) each user released.
        public: the public users' shared ratings (`Observations.public`), for µ.

    Raises:
        ValueError: no `public`, a true item outside the catalogue, or no estimate on a rated
            cell.
    """
    if not public:
        raise ValueError(
            f"scoring {output.attack!r} (kind 'rating_hat') needs `public`, the "
            "public users' shared ratings (Observations.public), for the µ "
            "baseline and the signs"
        )
    mu = public_item_means(public_ratings_matrix(public))
    cells: list[_Cells] = []
    for uid, idx, val, items, ratings in user_pairs(output, truth):
        if items.size and (items[0] < 0 or items[-1] >= mu.size):
            raise ValueError(f"truth[{uid!r}] has an item outside [0, n_items = {mu.size})")
        cells.append((idx, val, items, ratings))
    try:
        out = _rating_metrics(cells, mu)
    except ValueError as exc:
        raise ValueError(f"attack {output.attack!r}: {exc}") from None
    out["rmse_reduction"] = (
        1.0 - out["rmse"] / out["rmse_mu"] if out["rmse_mu"] > 0 else float("nan")
    )
    if len(cells) > 1:
        # Each user's truth against the NEXT user's estimate: what the attack scores when its
        # output carries nothing about the user. Unlike the binomial chance, it keeps the
        # structure shared by all users (item effects, a low-rank sign pattern that one global
        # flip can align with anybody's), so it is the fair reference for the "global" figures.
        shifted = [
            (cells[(u + 1) % len(cells)][0], cells[(u + 1) % len(cells)][1], items, ratings)
            for u, (_, _, items, ratings) in enumerate(cells)
        ]
        try:
            perm = _rating_metrics(shifted, mu)
        except ValueError:
            perm = {}
        for key in ("rmse", "rmse_best_global_sign", "sign_accuracy", "sign_accuracy_global"):
            if key in perm:
                out[f"{key}_permuted"] = perm[key]
    return out


__all__ = ["max_flip_chance", "score_rating_hat", "sign"]
