"""PMD's greedy pair swaps (Xin & Jaakkola, extraction §A6 [D]), compiled by numba.

A module of its own so that importing the mechanisms does not import numba: only
`PrivateDiscrete.release` needs the kernel (`shared.mechanisms.second_order`).
"""

from __future__ import annotations

import numba
import numpy as np

from privrec.shared.types import FloatArray, IntArray


@numba.njit(cache=True)
def greedy_swaps(
    perm: IntArray, values: FloatArray, mu: FloatArray, b: FloatArray, pairs: IntArray
) -> int:  # pragma: no cover - numba
    """Greedy pair swaps on candidate value indices `perm` (K, m), in place; returns #accepted.

    `pairs[t, i, r] = (p, q)` is the candidate pair of try r at coordinate i in pass t.
    """
    n_cand, m = perm.shape
    a_sq = np.zeros(n_cand)
    a_b = np.zeros(n_cand)
    for j in range(n_cand):
        for i in range(m):
            a = values[perm[j, i]] - mu[i]
            a_sq[j] += a * a
            a_b[j] += a * b[i]
    n_passes, _, n_tries, _ = pairs.shape
    accepted = 0
    for t in range(n_passes):
        for i in range(m):
            for r in range(n_tries):
                p = pairs[t, i, r, 0]
                q = pairs[t, i, r, 1]
                ap = values[perm[p, i]] - mu[i]
                aq = values[perm[q, i]] - mu[i]
                d_sq = aq * aq - ap * ap
                d_b = (aq - ap) * b[i]
                sp_new = a_sq[p] + d_sq
                sq_new = a_sq[q] - d_sq
                bp_new = a_b[p] + d_b
                bq_new = a_b[q] - d_b
                change = (
                    sp_new * sp_new
                    - a_sq[p] * a_sq[p]
                    + sq_new * sq_new
                    - a_sq[q] * a_sq[q]
                    - 2.0 * (bp_new * bp_new - a_b[p] * a_b[p] + bq_new * bq_new - a_b[q] * a_b[q])
                )
                if change < 0.0:
                    tmp = perm[p, i]
                    perm[p, i] = perm[q, i]
                    perm[q, i] = tmp
                    a_sq[p] = sp_new
                    a_sq[q] = sq_new
                    a_b[p] = bp_new
                    a_b[q] = bq_new
                    accepted += 1
    return accepted


__all__ = ["greedy_swaps"]
