"""Many users' z-scores in one compiled pass: `zscore` row by row, bit for bit.

The referee recomputes every user's z-scores from the truth it holds to score reconstruction
attacks (`sim.referee_attacks`); at 100,000 users a `zscore` call per user was seconds of
Python. The kernel here sums in numpy's own order, so nothing it feeds changes. A module of
its own, away from `shared.zscores`, which clients import: a node must start without numba
(tests/unit/test_startup_imports.py).
"""

from __future__ import annotations

import numba
import numpy as np
import numpy.typing as npt

from privrec.shared.types import FloatArray


def zscores_by_row(lengths: npt.ArrayLike, ratings: npt.ArrayLike) -> FloatArray:
    """`shared.zscores.zscore(row).z` of consecutive rows of `ratings` (row i has
    `lengths[i]` entries), concatenated: the referee's truth for many users in one pass.

    Equal to `zscore` row by row bit for bit: the sums are numpy's own pairwise summation
    (`_pairwise_sum`, the order `np.add.reduce` adds a contiguous float64 array in), so the
    mean, the ddof = 1 deviation and every z-score round exactly as numpy rounds them.
    """
    lens = np.asarray(lengths, dtype=np.int64)
    r = np.ascontiguousarray(ratings, dtype=np.float64)
    if lens.ndim != 1 or (lens < 0).any() or int(lens.sum()) != r.size:
        raise ValueError(
            f"`lengths` must be non-negative and sum to the {r.size} ratings, got {lens.sum()}"
        )
    out = np.empty_like(r)
    _zscores_by_row(lens, r, out)
    return out


@numba.njit(cache=True)
def _pairwise_sum(a: FloatArray, lo: int, n: int) -> float:  # pragma: no cover - compiled
    """Σ a[lo : lo + n] added as numpy adds it (numpy/_core/src/umath/loops_utils.h.src,
    `pairwise_sum`): up to 128 terms one block (`_block_sum`); above, the two halves (cut at
    a multiple of 8) apart, left + right. numpy recurses; this walks the same tree with an
    explicit stack (numba cannot cache a recursive function)."""
    if n <= 128:
        return _block_sum(a, lo, n)
    f_lo = np.empty(64, np.int64)  # a frame per level: its range, stage, and left half's sum
    f_n = np.empty(64, np.int64)
    f_stage = np.empty(64, np.int64)
    f_left = np.empty(64)
    depth, ret = 0, 0.0  # ret: the sum the last finished child returned
    f_lo[0], f_n[0], f_stage[0] = lo, n, 0
    while True:
        half = f_n[depth] // 2
        half -= half % 8
        if f_stage[depth] == 0:  # the left half next
            f_stage[depth] = 1
            child_lo, child_n = f_lo[depth], half
        elif f_stage[depth] == 1:  # the left half is in ret: the right half next
            f_left[depth] = ret
            f_stage[depth] = 2
            child_lo, child_n = f_lo[depth] + half, f_n[depth] - half
        else:  # both done
            ret = f_left[depth] + ret
            if depth == 0:
                return float(ret)
            depth -= 1
            continue
        if child_n <= 128:
            ret = _block_sum(a, child_lo, child_n)
        else:
            depth += 1
            f_lo[depth], f_n[depth], f_stage[depth] = child_lo, child_n, 0


@numba.njit(cache=True)
def _block_sum(a: FloatArray, lo: int, n: int) -> float:  # pragma: no cover - compiled
    """numpy's pairwise sum of at most 128 terms: below 8 one by one; else eight interleaved
    partial sums combined pairwise, then the remainder one by one."""
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[lo + i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    while i < n - n % 8:
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return float(res)


@numba.njit(cache=True)
def _zscores_by_row(lens: np.ndarray, r: FloatArray, out: FloatArray) -> None:  # pragma: no cover
    """`zscore` of each row: mean = Σr/n, std = √(Σ(r − mean)²/(n − 1)), both sums pairwise."""
    sq = np.empty(int(lens.max()) if lens.size else 0)
    lo = 0
    for n in lens:
        mean = 0.0 + _pairwise_sum(r, lo, n)  # numpy reduces from 0.0: a −0.0 sum is 0.0
        mean = mean / n if n else 0.0
        std = 0.0
        if n > 1:
            for j in range(n):
                d = r[lo + j] - mean
                sq[j] = d * d
            std = np.sqrt((0.0 + _pairwise_sum(sq, 0, n)) / (n - 1))
        for j in range(n):
            out[lo + j] = (r[lo + j] - mean) / std if std > 0.0 else 0.0
        lo += n


__all__ = ["zscores_by_row"]
