"""Neighbour rules over a candidate pool: the shared prediction step of the clustered kNN schemes.

Every user-based scheme of Bilge averages neighbours' deviations with their weights (Eq 2.2,
Eq 2.6). What the thesis leaves open is *which* neighbours (extraction §3.0, §7.4). All three
readings are offered here, each expressed through the one vectorised step
`server.models.knn.neighbour_average` (top-k positive weights among the raters of q):

* ``"raters"`` — for each target item q, the k users of largest positive weight among the
  candidates who filled q. The rule of privrec's `PPCF`/`PearsonKNN` (docs/decisions/clustering.md,
  "kNN models"); a clustered model with c = 1 and this rule is exactly PPCF.
* ``"top-k"`` — the thesis's text: "the nearest k users ... are chosen as neighbors. Finally, a
  prediction is produced as a weighted average of those neighbors having a rating on q"
  (Bilge §6.2; §7.3.1 "marks the nearest N of them as neighbors"). The k candidates of largest
  positive weight are chosen once per query, then each item averages those of them who filled
  it. Fewer neighbours contribute per item.
* ``"absolute"`` — Herlocker's absolute-weight variant: the k raters of q of largest |w|,
  averaged as Σ w·d / Σ |w|, so negatively correlated users count with their sign. Not in the
  thesis; offered because the thesis's Σ w denominator with negative weights is unbounded and
  MATLAB implementations commonly use |w| (docs/decisions/clustering.md measures what it changes).

References:
    Bilge, A. PhD thesis, Anadolu University, 2013, Eq 2.2, Eq 2.6, §6.2, §7.3.1.
    Herlocker, J. et al. "An algorithmic framework for performing collaborative filtering",
    SIGIR 1999.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from privrec.server.models.base import UInt32Array
from privrec.server.models.knn import neighbour_average
from privrec.shared.types import BoolArray, FloatArray, IntArray

NEIGHBOUR_RULES = ("raters", "top-k", "absolute")
"""The neighbour rules (module docstring)."""


def check_rule(rule: str) -> str:
    """`rule` if it names a neighbour rule, else ValueError naming `neighbours`."""
    if rule not in NEIGHBOUR_RULES:
        raise ValueError(f"`neighbours` must be one of {NEIGHBOUR_RULES}, got {rule!r}")
    return rule


def top_k_mask(weights: FloatArray, allowed: BoolArray, k: int) -> BoolArray:
    """The k allowed rows of largest positive weight (ties: smaller row first)."""
    cand = np.flatnonzero(allowed & (weights > 0.0))
    if cand.size > k:
        cand = cand[np.lexsort((cand, -weights[cand]))[:k]]
    mask = np.zeros(weights.size, dtype=bool)
    mask[cand] = True
    return mask


def neighbour_scores(
    dev: sp.csc_matrix,
    weights: FloatArray,
    items: IntArray,
    k: int,
    allowed: BoolArray,
    rule: str,
) -> tuple[FloatArray, UInt32Array]:
    """The weighted average of neighbours' deviations for each item, under `rule`.

    Args:
        dev: CSC (n_users, n_items) of deviations (z′ for PPCF, v − v̄ for Pearson).
        weights: float array of shape (n_users,), every row's weight (only `allowed` rows
            matter).
        items: int array of shape (t,), the items to score.
        k: the neighbourhood size.
        allowed: bool array of shape (n_users,), the candidate pool.
        rule: one of `NEIGHBOUR_RULES`.

    Returns:
        (averages, counts) as `neighbour_average`: 0 and count 0 where no neighbour exists.
    """
    if check_rule(rule) == "raters":
        return neighbour_average(dev, weights, items, k, allowed)
    if rule == "top-k":
        return neighbour_average(dev, weights, items, k, top_k_mask(weights, allowed, k))
    # "absolute": rank raters by |w| and average Σ w·d / Σ|w|, i.e. Σ|w|·(sign(w)·d) / Σ|w| on
    # the requested columns with each row's deviations signed by its weight.
    cols = dev[:, items].tocsc()
    cols.data = cols.data * np.sign(weights[cols.indices])
    return neighbour_average(
        cols, np.abs(weights), np.arange(items.size, dtype=np.int64), k, allowed
    )


__all__ = ["NEIGHBOUR_RULES", "check_rule", "neighbour_scores", "top_k_mask"]
