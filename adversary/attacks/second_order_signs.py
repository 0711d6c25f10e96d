"""What Xin & Jaakkola's releases admit to: sign(r − µ), up to one global sign per user.

The paper states the leak of its continuous mechanism itself: the server, knowing the
algorithm, "can reconstruct sign(r′) up to an overall randomly chosen sign" (Sec. 4, after
Theorem 4.2; r′ = r − µ, µ the public item means). PMC sends u = a·h·sign(r′) with a fair coin
a; PMD's candidates are aligned with ±(r − µ) (Eq. (8) is sign-blind, `second_order`'s step 3);
the exact-second-order reference a·(r − µ) hands the signs over outright; the Laplace baseline
has no global sign but per-element noise. This attack recovers exactly that: per private user
and item, an estimate of sign(r_j − µ_j), and with it which of her items she rates above her
own mean.

Two estimates, both from the release alone plus the public tier (`public_tier`):

* ``direct``: sign(x°_j), the coordinate's own sign (x° = x − µ for PMD and Laplace, x for PMC
  and exact: `second_order.centred_release`). Exact for PMC and exact second order.
* ``map``: the sign of the linear reconstruction r̂ − µ of `second_order` (cross-fitted on
  the public users): it pools all m coordinates through the public model's subspace, which
  helps where single coordinates are noisy (PMD, Laplace).

Which one is used is decided on the cross-fitted public users (the same calibration releases
`second_order_reconstruction` simulates, `second_order.calibrate`): the one whose signs agree
more often with sign(y − µ) at their rated cells, up to each user's global sign. The global
sign itself is chosen by `second_order.fit_sign_model` (a coin unless a rule beats one on the
public users). The output value at item j is the chosen estimate (its sign is ŝ_j after the
global sign, its magnitude a confidence), for all m items (kind ``"sign_hat"``).

The referee scores the signs on each user's rated items, with the attack's global sign and up
to one global sign per user, and the "above her own mean" ordering (ROC AUC of the values
against [r_j > r̄_u]); run on an exact-second-order release the attack gives the ceiling,
which the sweep (`bench/attack_sweeps.py second-order`) prints beside PMC, PMD and Laplace.

References:
    Y. Xin, T. Jaakkola, "Controlling privacy in recommender systems", NIPS 2014, Sec. 4
    (Theorem 4.2 and the remark on the global sign) and Sec. 5 (baselines).
"""

from __future__ import annotations

import numpy as np

from privrec.adversary.attacks.base import Attack, AttackOutput, OutputKind, UserEstimate
from privrec.adversary.attacks.public_tier import rebuild_public_tier
from privrec.adversary.attacks.second_order import (
    SecondOrderReconstruction,
    calibrate,
    centred_release,
    fit_release_map,
    fit_sign_model,
)
from privrec.adversary.observations import Observations
from privrec.shared.types import FloatArray

DIRECT, MAP = 0, 1
"""Codes of the chosen estimate in the diagnostics (``estimate``)."""


def _global_agreement(est: FloatArray, truth_sign: FloatArray, rows: np.ndarray) -> float:
    """Share of cells whose sign agrees, each row flipped to its better global sign."""
    agree = (np.where(est >= 0, 1.0, -1.0) == truth_sign).astype(np.float64)
    n = int(rows.max()) + 1 if rows.size else 0
    a = np.bincount(rows, agree, minlength=n)
    c = np.bincount(rows, minlength=n)
    return float(np.sum(np.maximum(a, c - a)) / max(c.sum(), 1))


class SecondOrderSigns(Attack):
    """sign(r − µ) of every private user up to her global sign (module docstring).

    Args:
        seed: seed of the calibration releases simulated on the public users.
        n_folds: K of the cross-fitted calibration.
        sign_z: adoption margin of a global-sign rule (`second_order.fit_sign_model`).
    """

    name = "second_order_signs"
    knowledge = SecondOrderReconstruction.knowledge
    applies_to = SecondOrderReconstruction.applies_to

    def __init__(self, seed: int = 0, n_folds: int = 5, sign_z: float = 2.0) -> None:
        # the same parameters and checks as the reconstruction this attack builds on
        base = SecondOrderReconstruction(seed, n_folds, sign_z)
        self.seed, self.n_folds, self.sign_z = base.seed, base.n_folds, base.sign_z

    def _fit(self, observations: Observations) -> AttackOutput:
        mechanism = observations.run_config.mechanism_name
        tier = rebuild_public_tier(observations)
        uids, private = SecondOrderReconstruction._private_releases(observations, tier)
        cal = calibrate(tier, mechanism, self.seed, self.name, self.n_folds)
        signs = fit_sign_model(mechanism, cal, tier.ratings, self.sign_z)
        release_map = fit_release_map(cal, tier.V)

        # choose the estimate on the public users' rated cells (up to each one's global sign)
        r = tier.ratings.tocsr()
        rows = np.repeat(np.arange(r.shape[0]), np.diff(r.indptr))
        truth_sign = np.where(r.data - cal.mu[rows, r.indices] >= 0, 1.0, -1.0)
        aligned = cal.coins[:, None] * cal.centred
        direct_pub = aligned[rows, r.indices]
        map_pub = release_map.apply(aligned)[rows, r.indices]
        acc_direct = _global_agreement(direct_pub, truth_sign, rows)
        acc_map = _global_agreement(map_pub, truth_sign, rows)
        use = MAP if acc_map > acc_direct else DIRECT

        x0 = centred_release(mechanism, private, tier.mu)
        s_hat = signs.choose(x0, tier.mu)
        oriented = s_hat[:, None] * x0
        values = release_map.apply(oriented) if use == MAP else oriented
        items = np.arange(observations.n_items, dtype=np.int64)
        per_user = {
            uid: UserEstimate(items.copy(), np.asarray(values[u], dtype=np.float64).copy())
            for u, uid in enumerate(uids)
        }
        return AttackOutput(
            attack=self.name,
            kind=OutputKind.SIGN_HAT,
            knowledge=self.knowledge,
            per_user=per_user,
            diagnostics={
                "estimate": float(use),
                "public_sign_agreement_direct": acc_direct,
                "public_sign_agreement_map": acc_map,
                "sign_rule": float(signs.rule),
                "share_plus_sign": float(np.mean(s_hat > 0)),
                "n_public": float(len(tier.user_ids)),
                "n_private": float(len(uids)),
            },
        )


__all__ = ["SecondOrderSigns"]
