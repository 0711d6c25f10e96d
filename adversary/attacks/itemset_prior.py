"""Item priors of Balu's attacks, from the declared auxiliary set (§3.5.1–3.5.2).

Balu §3.5.1: "the adversary has access to some raw profiles of users to estimate the item priors
(i.e., popularities of items)"; those training users are never attacked. The thesis does not
give the prior's functional form (extraction §3.6, §8.4); ours:

* **Popularity** (the baseline's score, §3.5.2): π_j = the fraction of auxiliary users whose
  profile holds item j (every rated item counts, as Table 3.1's c_avg = 106 implies).
* **Set prior of the joint decoder**: items enter a profile independently,
  P[P] ∝ Π_{j∈P} q_j Π_{j∉P} (1 − q_j), i.e. prior log-odds β_j = logit q_j per item. On the
  candidate set C of a user the q_j are the auxiliary frequencies (Jeffreys-smoothed,
  (count + ½)/(n_aux + 1)) tilted by one common shift of their log-odds so that
  Σ_{j∈C} q_j = ĉ: the prior's expected profile size is the size estimated from the release.
  The **flat** prior is the same with every item equally likely: q_j = ĉ/|C|. Both priors
  therefore carry the same size information and differ only in which items they favour, which
  is what Balu's "with prior" / "no prior" comparison isolates.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit, logit

from privrec.shared.data.dataset import RatingData
from privrec.shared.errors import ValidationError
from privrec.shared.types import FloatArray, IntArray


def item_counts(auxiliary: RatingData, n_items: int) -> IntArray:
    """How many auxiliary users hold each item, int64 (N,).

    Raises:
        ValidationError: the auxiliary set has another catalogue size.
    """
    if auxiliary.n_items != n_items:
        raise ValidationError(
            "auxiliary.ratings", f"has {auxiliary.n_items} items, the run has {n_items}"
        )
    counts: IntArray = np.bincount(auxiliary.ratings.tocsr().indices, minlength=n_items).astype(
        np.int64
    )
    return counts


def popularity(auxiliary: RatingData, n_items: int) -> FloatArray:
    """π_j, the fraction of auxiliary users whose profile holds item j, float64 (N,)."""
    out: FloatArray = item_counts(auxiliary, n_items) / max(auxiliary.n_users, 1)
    return out


def mean_profile_size(auxiliary: RatingData) -> float:
    """The auxiliary users' mean number of items per profile."""
    return float(auxiliary.ratings.nnz) / max(auxiliary.n_users, 1)


def smoothed_log_odds(auxiliary: RatingData, n_items: int) -> FloatArray:
    """logit((count_j + ½)/(n_aux + 1)): the popularity's log-odds, finite for every item."""
    q = (item_counts(auxiliary, n_items) + 0.5) / (auxiliary.n_users + 1.0)
    out: FloatArray = logit(q)
    return out


def tilted_log_odds(base: FloatArray, size: float) -> FloatArray:
    """β = base + b with the one shift b for which Σ_j sigmoid(β_j) = `size`.

    `size` is clamped to [½, n − ½] (n = len(base)) so that the shift exists.

    Args:
        base: float64 (n,), log-odds of the candidates (all equal for the flat prior).
        size: the expected number of items in the set.
    """
    n = base.size
    if n == 0:
        return base.copy()
    target = min(max(float(size), 0.5), n - 0.5)
    if np.ptp(base) == 0.0:  # flat: closed form
        out: FloatArray = np.full(n, float(logit(target / n)))
        return out

    def excess(b: float) -> float:
        return float(expit(base + b).sum()) - target

    lo, hi = -1.0, 1.0
    while excess(lo) > 0.0:
        lo *= 2.0
    while excess(hi) < 0.0:
        hi *= 2.0
    shift = brentq(excess, lo, hi, xtol=1e-12, rtol=1e-12)
    tilted: FloatArray = base + shift
    return tilted


__all__ = [
    "item_counts",
    "mean_profile_size",
    "popularity",
    "smoothed_log_odds",
    "tilted_log_odds",
]
