"""The compiled kernels of Balu's Gibbs sampler over item sets (numba).

`adversary.attacks.gibbs` states the sampler (slot coding, neighbourhood (3.34), transition
(3.35), the set prior and the likelihoods) and runs it through `blip_marginals` and
`jlt_marginals`; here are the per-chain loops those call, one thread per chain (`prange`): a
xoshiro256** stream per chain, the BLIP chain with per-bit reference counts and an inverted
index bit → candidates, the JLT chain with the codebook's Gram matrix and multiplicatively kept
weights, and a branch-free vectorised exp. They are private to the sampler: their arguments are
flat CSR arrays that the entry points build and check.

References:
    R. Balu, PhD thesis, Univ. Rennes 1, 2016, §3.4.2, Eqs. (3.30)–(3.35).
    D. Blackman, S. Vigna, "Scrambled linear pseudorandom number generators", 2021 (xoshiro).
"""

from __future__ import annotations

import math

import numba
import numpy as np
import numpy.typing as npt

from privrec.shared.types import FloatArray, IntArray

UInt64Array = npt.NDArray[np.uint64]

EMPTY = -1


# ------------------------------------------------------------------ xoshiro256** (per chain)
@numba.njit(cache=True, inline="always")
def _rotl(x: np.uint64, k: int) -> np.uint64:  # pragma: no cover - numba
    return (x << np.uint64(k)) | (x >> np.uint64(64 - k))


@numba.njit(cache=True)
def _next_uniform(s: UInt64Array) -> float:  # pragma: no cover - numba
    """One uniform double in [0, 1) from xoshiro256** state `s` (advanced in place)."""
    result = _rotl(s[1] * np.uint64(5), 7) * np.uint64(9)
    t = s[1] << np.uint64(17)
    s[2] ^= s[0]
    s[3] ^= s[1]
    s[1] ^= s[2]
    s[0] ^= s[3]
    s[2] ^= t
    s[3] = _rotl(s[3], 45)
    return float(result >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@numba.njit(cache=True)
def uniform_stream(state: UInt64Array, n: int) -> FloatArray:  # pragma: no cover - numba
    """The first `n` uniforms of the chain stream seeded with `state` (a copy is advanced)."""
    s = state.copy()
    out = np.empty(n)
    for i in range(n):
        out[i] = _next_uniform(s)
    return out


def chain_state(seed: np.random.SeedSequence) -> UInt64Array:
    """The 256-bit xoshiro state of one chain (never all zero)."""
    state: UInt64Array = np.asarray(seed.generate_state(4, np.uint64), dtype=np.uint64)
    if not state.any():
        state[0] = np.uint64(1)
    return state


# ------------------------------------------------------------------ shared sampling pieces
@numba.njit(cache=True)
def _draw(cum: FloatArray, n: int, u: float) -> int:  # pragma: no cover - numba
    """Index k < n with cum[k-1] <= u·cum[n-1] < cum[k] (cum: inclusive cumulative weights)."""
    x = u * cum[n - 1]
    lo, hi = 0, n
    while lo < hi:  # first k with cum[k] > x
        mid = (lo + hi) // 2
        if cum[mid] > x:
            hi = mid
        else:
            lo = mid + 1
    if lo >= n:  # u·total rounded up to total: take the last option of positive weight
        lo = n - 1
        while lo > 0 and cum[lo] == cum[lo - 1]:
            lo -= 1
    return lo


@numba.njit(cache=True)
def _close(
    occ: IntArray, since: IntArray, j: int, t_out: int, first: int, last: int
) -> None:  # pragma: no cover - numba
    """Item j was in the state after steps since[j] … t_out − 1: count the steps in
    [first, last] (the Monte Carlo window of (3.33))."""
    lo = max(since[j], first)
    hi = min(t_out - 1, last)
    if hi >= lo:
        occ[j] += hi - lo + 1


# ------------------------------------------------------------------ BLIP chain
@numba.njit(cache=True)
def _blip_chain(
    pos_ptr: IntArray,
    pos_idx: IntArray,
    sign: npt.NDArray[np.int8],
    gain_exp: FloatArray,
    prior_exp: FloatArray,
    empty_weight: float,
    lam: float,
    log_prior: FloatArray,
    n_hashes: int,
    c_max: int,
    init: IntArray,
    burn_in: int,
    samples: int,
    state: UInt64Array,
    occ: IntArray,
) -> int:  # pragma: no cover - numba
    """One BLIP chain; fills `occ` (steps each candidate spent in the window); returns moves.

    Weights: "slot i empty" weighs `empty_weight`·(c_max − s) and "slot i = j" weighs
    w_j = e^{λ(g_j − K)}·e^{β_j − max β} (both ×(c_max − s) relative to the module
    docstring's form, which leaves the distribution unchanged). w_j is kept up to date when g_j
    or j's presence changes, so a step is one running sum over the candidates and a binary
    search.

    Args:
        pos_ptr, pos_idx: CSR of the candidates' distinct codeword positions X_j.
        sign: int8 (L,), s_ℓ = +1 where b̃(ℓ) = 1 else −1.
        gain_exp: (2K + 1,), e^{λ(g − K)} for gain g ∈ [−K, K] (shifted so the max is 1).
        prior_exp: (n_c,), e^{β_j − max β}.
        empty_weight: weight of "slot empty" on the same shifted scale, e^{−(λK + max β)}.
        lam, log_prior: λ and β_j themselves (for the underflow fallback only).
        n_hashes: K.
        c_max: number of slots.
        init: candidate indices of the initial set (distinct, at most c_max).
        burn_in, samples: T and M.
        state: this chain's xoshiro state (advanced in place).
        occ: int64 (n_c,), zeroed; receives the occupancy counts.
    """
    n_c = pos_ptr.size - 1
    n_bits = sign.size
    # inverted index bit -> candidates whose codeword sets it
    cov_cnt = np.zeros(n_bits + 1, np.int64)
    for q in range(pos_idx.size):
        cov_cnt[pos_idx[q] + 1] += 1
    cov_ptr = np.cumsum(cov_cnt)
    cov_idx = np.empty(pos_idx.size, np.int64)
    fill = cov_ptr[:-1].copy()
    for j in range(n_c):
        for q in range(pos_ptr[j], pos_ptr[j + 1]):
            b = pos_idx[q]
            cov_idx[fill[b]] = j
            fill[b] += 1
    cnt = np.zeros(n_bits, np.int32)
    gain = np.zeros(n_c, np.int64)
    for j in range(n_c):
        g = 0
        for q in range(pos_ptr[j], pos_ptr[j + 1]):
            g += sign[pos_idx[q]]
        gain[j] = g
    present = np.zeros(n_c, np.bool_)
    since = np.zeros(n_c, np.int64)
    slots = np.full(c_max, EMPTY, np.int64)
    w = np.empty(n_c)
    cum = np.empty(n_c + 1)
    first, last = burn_in + 1, burn_in + samples
    size = 0
    for k in range(init.size):
        j = init[k]
        slots[k] = j
        present[j] = True
        size += 1
        for q in range(pos_ptr[j], pos_ptr[j + 1]):
            b = pos_idx[q]
            if cnt[b] == 0:
                for r in range(cov_ptr[b], cov_ptr[b + 1]):
                    gain[cov_idx[r]] -= sign[b]
            cnt[b] += 1
    for j in range(n_c):
        w[j] = 0.0 if present[j] else gain_exp[gain[j] + n_hashes] * prior_exp[j]
    moves = 0
    for t in range(1, last + 1):
        i = int(_next_uniform(state) * c_max)
        if i >= c_max:
            i = c_max - 1
        u = _next_uniform(state)
        a = slots[i]
        if a != EMPTY:  # take a out: S₋ = P \ {a}
            present[a] = False
            size -= 1
            _close(occ, since, a, t, first, last)
            for q in range(pos_ptr[a], pos_ptr[a + 1]):
                b = pos_idx[q]
                cnt[b] -= 1
                if cnt[b] == 0:
                    for r in range(cov_ptr[b], cov_ptr[b + 1]):
                        k = cov_idx[r]
                        gain[k] += sign[b]
                        if not present[k]:
                            w[k] = gain_exp[gain[k] + n_hashes] * prior_exp[k]
            w[a] = gain_exp[gain[a] + n_hashes] * prior_exp[a]
        acc = empty_weight * (c_max - size)
        cum[0] = acc
        for j in range(n_c):
            acc += w[j]
            cum[j + 1] = acc
        if acc <= 0.0:
            # Every weight underflowed on the fixed shift (λK + max β > 745, i.e. ε beyond
            # ~700): the best option outweighs the others by e^700, so take it.
            best, best_lw = EMPTY, 0.0  # the empty option's log weight
            log_free = math.log(c_max - size)
            for j in range(n_c):
                if not present[j]:
                    lw = lam * gain[j] + log_prior[j] - log_free
                    if lw > best_lw:
                        best, best_lw = j, lw
            pick = best + 1
        else:
            pick = _draw(cum, n_c + 1, u)
        choice = pick - 1
        if choice != a:
            moves += 1
        slots[i] = choice
        if choice != EMPTY:
            present[choice] = True
            w[choice] = 0.0
            since[choice] = t
            size += 1
            for q in range(pos_ptr[choice], pos_ptr[choice + 1]):
                b = pos_idx[q]
                if cnt[b] == 0:
                    for r in range(cov_ptr[b], cov_ptr[b + 1]):
                        k = cov_idx[r]
                        gain[k] -= sign[b]
                        if not present[k]:
                            w[k] = gain_exp[gain[k] + n_hashes] * prior_exp[k]
                cnt[b] += 1
    for j in range(n_c):
        if present[j]:
            _close(occ, since, j, last + 1, first, last)
    return moves


@numba.njit(cache=True, parallel=True)
def blip_chains(
    cand_ptr: IntArray,
    pos_ptr: IntArray,
    pos_idx: IntArray,
    signs: npt.NDArray[np.int8],
    gain_exp: FloatArray,
    prior_exp: FloatArray,
    empty_weight: FloatArray,
    lam: float,
    log_prior: FloatArray,
    n_hashes: int,
    c_max: IntArray,
    init_ptr: IntArray,
    init: IntArray,
    burn_in: int,
    samples: int,
    states: UInt64Array,
    occ: IntArray,
    moves: IntArray,
) -> None:  # pragma: no cover - numba
    """Chain u over candidates cand_ptr[u]:cand_ptr[u+1] of the flat arrays, for every u."""
    for u in numba.prange(cand_ptr.size - 1):
        c0, c1 = cand_ptr[u], cand_ptr[u + 1]
        # pos_ptr concatenates one CSR row pointer per user, n_c + 1 entries each (already
        # offset into pos_idx): user u's starts at c0 + u and ends at c1 + u
        local_ptr = pos_ptr[c0 + u : c1 + u + 1] - pos_ptr[c0 + u]
        local_idx = pos_idx[pos_ptr[c0 + u] : pos_ptr[c1 + u]]
        moves[u] = _blip_chain(
            local_ptr,
            local_idx,
            signs[u],
            gain_exp[u],
            prior_exp[c0:c1],
            empty_weight[u],
            lam,
            log_prior[c0:c1],
            n_hashes,
            c_max[u],
            init[init_ptr[u] : init_ptr[u + 1]],
            burn_in,
            samples,
            states[u],
            occ[c0:c1],
        )


# ------------------------------------------------------------------ JLT chain
_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_ROUND = 6755399441055744.0  # 1.5·2^52: adding and subtracting it rounds to an integer
EXP_FLOOR = -700.0
"""Log weights below the largest by more than this count as e^-700 (≈ 10⁻³⁰⁴ of it)."""


@numba.njit(cache=True)
def fast_exp(x: FloatArray, out: FloatArray, scale_bits: IntArray) -> None:  # pragma: no cover
    """out = exp(max(x, −700)) for x ≤ 0, to ~10⁻¹⁴ relative: Cody–Waite reduction
    x = k·ln 2 + r, |r| ≤ ln2/2, a degree-11 Taylor polynomial for e^r, and 2^k built from its
    bits; branch-free, so the loops vectorise (libm's exp does not, and is ~3× slower here)."""
    for j in range(x.size):
        v = max(x[j], EXP_FLOOR)
        k = (v * _LOG2E + _ROUND) - _ROUND
        r = (v - k * _LN2_HI) - k * _LN2_LO
        out[j] = 1.0 + r * (
            1.0
            + r
            * (
                0.5
                + r
                * (
                    1.0 / 6.0
                    + r
                    * (
                        1.0 / 24.0
                        + r
                        * (
                            1.0 / 120.0
                            + r
                            * (
                                1.0 / 720.0
                                + r
                                * (
                                    1.0 / 5040.0
                                    + r
                                    * (
                                        1.0 / 40320.0
                                        + r
                                        * (
                                            1.0 / 362880.0
                                            + r * (1.0 / 3628800.0 + r * (1.0 / 39916800.0))
                                        )
                                    )
                                )
                            )
                        )
                    )
                )
            )
        )
        scale_bits[j] = (np.int64(k) + 1023) << 52
    scale = scale_bits.view(np.float64)
    for j in range(x.size):
        out[j] *= scale[j]


MULT_LIMIT = 30.0
"""JLT chains whose log-weight changes h stay within ±this keep their weights multiplicatively."""
REFRESH = 1024
"""Steps between exact recomputations of multiplicatively kept weights."""


@numba.njit(cache=True)
def _jlt_refresh(
    lw: FloatArray, w: FloatArray, shifted: FloatArray, bits: IntArray
) -> float:  # pragma: no cover - numba
    """w = exp(lw − shift) with shift = max lw (every candidate, present or not); returns it."""
    shift = float(lw[0])
    for j in range(lw.size):
        shift = max(shift, float(lw[j]))
    for j in range(lw.size):
        shifted[j] = lw[j] - shift
    fast_exp(shifted, w, bits)
    return shift


@numba.njit(cache=True)
def _jlt_chain(
    gram: FloatArray,
    cand: IntArray,
    u0: FloatArray,
    inv_two_var: float,
    log_prior: FloatArray,
    c_max: int,
    init: IntArray,
    burn_in: int,
    samples: int,
    state: UInt64Array,
    occ: IntArray,
) -> int:  # pragma: no cover - numba
    """One JLT chain; fills `occ`; returns the number of moves.

    The log weight of "slot i = j" relative to "slot i empty" is
    lw_j = (2 r·X_j − ‖X_j‖²)/(2σ²) + β_j − ln(c_max − s); lw_j + ln(c_max − s) is kept up to date
    (one row h_a of the candidates' scaled Gram matrix per item a leaving or joining). Two ways
    to turn it into weights, the same distribution:

    * when every |h| ≤ `MULT_LIMIT` (σ not small), the weights e^{lw_j − shift} themselves are
      kept, multiplied by e^{±h_a} (precomputed) when a leaves or joins, and recomputed exactly
      every `REFRESH` steps (or when their sum leaves [10⁻²⁵⁰, 10²⁵⁰]): no exp per step;
    * otherwise every step exponentiates lw shifted by its maximum (`fast_exp`).

    Args:
        gram: (N, N) Gram matrix X Xᵀ of the public codebook.
        cand: (n_c,) global item ids of the candidates.
        u0: (n_c,) ỹ·X_j of each candidate.
        inv_two_var: 1/(2σ²).
        log_prior: (n_c,) β_j.
        c_max, init, burn_in, samples, state, occ: as `_blip_chain`.
    """
    n_c = cand.size
    # h[a, j] = 2 G[a, j]/(2σ²): the change of j's log weight when a leaves the set
    h = np.empty((n_c, n_c))
    h_max = 0.0
    for a in range(n_c):
        for m in range(n_c):
            h[a, m] = 2.0 * gram[cand[a], cand[m]] * inv_two_var
            h_max = max(h_max, abs(h[a, m]))
    mult = h_max <= MULT_LIMIT
    up = np.empty((n_c, n_c) if mult else (0, 0))
    down = np.empty((n_c, n_c) if mult else (0, 0))
    if mult:
        for a in range(n_c):
            for m in range(n_c):
                up[a, m] = math.exp(h[a, m])
                down[a, m] = math.exp(-h[a, m])
    lw = np.empty(n_c)
    for j in range(n_c):
        g = cand[j]
        lw[j] = (2.0 * u0[j] - gram[g, g]) * inv_two_var + log_prior[j]
    present = np.zeros(n_c, np.bool_)
    since = np.zeros(n_c, np.int64)
    slots = np.full(c_max, EMPTY, np.int64)
    shifted = np.empty(n_c)
    w = np.empty(n_c)
    bits = np.empty(n_c, np.int64)
    cum = np.empty(n_c + 1)
    first, last = burn_in + 1, burn_in + samples
    size = 0
    for k in range(init.size):
        j = init[k]
        slots[k] = j
        present[j] = True
        size += 1
        for m in range(n_c):
            lw[m] -= h[j, m]
    shift = _jlt_refresh(lw, w, shifted, bits) if mult else 0.0
    moves = 0
    for t in range(1, last + 1):
        i = int(_next_uniform(state) * c_max)
        if i >= c_max:
            i = c_max - 1
        v = _next_uniform(state)
        a = slots[i]
        if a != EMPTY:
            present[a] = False
            size -= 1
            _close(occ, since, a, t, first, last)
            for m in range(n_c):
                lw[m] += h[a, m]
            if mult:
                for m in range(n_c):
                    w[m] *= up[a, m]
        log_free = math.log(c_max - size)
        acc = 0.0
        if mult:
            if t % REFRESH == 0:
                shift = _jlt_refresh(lw, w, shifted, bits)
            acc = math.exp(log_free - shift)
            cum[0] = acc
            for j in range(n_c):
                if not present[j]:
                    acc += w[j]
                cum[j + 1] = acc
            if not 1e-250 < acc < 1e250:  # drifted out of range: recompute, then as below
                shift = _jlt_refresh(lw, w, shifted, bits)
                acc = 0.0
        if acc == 0.0:
            top = log_free  # "empty" weighs c_max − s where "add j" weighs e^{lw_j}
            for j in range(n_c):
                if not present[j] and lw[j] > top:
                    top = lw[j]
            for j in range(n_c):
                shifted[j] = EXP_FLOOR if present[j] else lw[j] - top
            ws = cum[1:]  # the exact weights, written straight into the cumulative array
            fast_exp(shifted, ws, bits)
            acc = math.exp(log_free - top)
            cum[0] = acc
            for j in range(n_c):
                if not present[j]:
                    acc += ws[j]
                cum[j + 1] = acc
        choice = _draw(cum, n_c + 1, v) - 1
        if choice != a:
            moves += 1
        slots[i] = choice
        if choice != EMPTY:
            present[choice] = True
            since[choice] = t
            size += 1
            for m in range(n_c):
                lw[m] -= h[choice, m]
            if mult:
                for m in range(n_c):
                    w[m] *= down[choice, m]
    for j in range(n_c):
        if present[j]:
            _close(occ, since, j, last + 1, first, last)
    return moves


@numba.njit(cache=True, parallel=True)
def jlt_chains(
    gram: FloatArray,
    cand_ptr: IntArray,
    cand: IntArray,
    u0: FloatArray,
    inv_two_var: float,
    log_prior: FloatArray,
    c_max: IntArray,
    init_ptr: IntArray,
    init: IntArray,
    burn_in: int,
    samples: int,
    states: UInt64Array,
    occ: IntArray,
    moves: IntArray,
) -> None:  # pragma: no cover - numba
    """Chain u over candidates cand_ptr[u]:cand_ptr[u+1] of the flat arrays, for every u
    (`gibbs.jlt_marginals` builds and checks the arrays)."""
    for u in numba.prange(cand_ptr.size - 1):
        c0, c1 = cand_ptr[u], cand_ptr[u + 1]
        moves[u] = _jlt_chain(
            gram,
            cand[c0:c1],
            u0[c0:c1],
            inv_two_var,
            log_prior[c0:c1],
            c_max[u],
            init[init_ptr[u] : init_ptr[u + 1]],
            burn_in,
            samples,
            states[u],
            occ[c0:c1],
        )


__all__ = [
    "EMPTY",
    "EXP_FLOOR",
    "MULT_LIMIT",
    "REFRESH",
    "UInt64Array",
    "blip_chains",
    "chain_state",
    "fast_exp",
    "jlt_chains",
    "uniform_stream",
]
