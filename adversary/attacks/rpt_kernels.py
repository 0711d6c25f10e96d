"""Compiled kernels of the RPT attacks: the fused E-step of `fit_rpt_posterior` (issue 13,
target 3).

`e_step` runs both passes of the E-step of `rpt_bayes.fit_rpt_posterior` over the (σ, noise
shape) grid for all hypotheses of one user at once (vectorised loops over her cells per
hypothesis), with the per-cell terms kept from pass 1 for pass 2. Hypotheses without posterior
weight are pruned (see `e_step`): the only departure from the reference, bounded by `PRUNE`.
`mixture_log_weights` gives the cells' log prior weights, bit for bit numpy's ``logaddexp``.
It computes what the numpy reference path computes, in the same summation order, so the two
paths agree to rounding (``tests/unit/adversary/test_attacks_rpt_kernels.py`` checks it); the
filled-cell sums of `rpt_matrix` are compiled in `rpt_linalg`.

Users are shared out among numba's threads (``prange``; ``NUMBA_NUM_THREADS``, by default one
per core); each user's figures are written by one thread and every sum keeps its serial order,
so the results are the same bit for bit on any number of threads (tested with one and three).

The special functions follow scipy's definitions: log Φ (`rpt_vecmath.log_ndtr`, scipy's
``log_ndtr``), numpy's ``logaddexp``; in the cell loops they are `rpt_vecmath`'s vectorisable
exp, log and erfc (within 2 ulp, 2 ulp and 2e-15 of libm).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from privrec.adversary.attacks.rpt_linalg import CHUNKS, chunk_rows
from privrec.adversary.attacks.rpt_vecmath import log_diff_ndtr, verfc_pos, vexp, vlog
from privrec.shared.types import FloatArray, IndexArray

PRUNE = 1e-13
"""Pass-1 pruning threshold: a (σ, shape) hypothesis is evaluated in an EM iteration only if it
is at an end of the σ grid, or its posterior weight in the previous iteration, or that of a
neighbour on the σ grid in this one, exceeded it (see `e_step`)."""

PASS2_MIN = 1e-10
"""Pass 2 skips hypotheses with posterior weight ≤ this (the reference path does the same)."""

_LOG_2PI = math.log(2.0 * math.pi)
_SQRT3 = math.sqrt(3.0)
_SQRT1_2 = math.sqrt(0.5)
_TINY = 1e-300
_LOG_TINY = math.log(_TINY)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_LOG2 = math.log(2.0)
_EPS = 2.220446049250313e-16


_FAST = {"contract"}
"""The one fast-math flag of the E-step kernels: a·b + c may become an FMA (one rounding
instead of two; `rpt_vecmath` is exact under it). No reassociation: every sum keeps its order
or, where stated, a fixed order of four partial sums."""


@numba.njit(cache=True, inline="always", error_model="numpy", fastmath=_FAST)
def _vmix(lg: float, lf: float) -> tuple[float, float, float]:  # pragma: no cover - numba
    """(log(eˡᵍ + eˡᶠ), eˡᵍ/(eˡᵍ + eˡᶠ), eˡᶠ/(eˡᵍ + eˡᶠ)) with one exp and one log, without
    branches or libm calls (vectorised in the cell loops).

    numpy's logaddexp, max + log(1 + e^(−|lg − lf|)); the shares are 1/(1 + e) and e/(1 + e)
    from the same e, which equal the reference's exp(lg − mix) and exp(lf − mix) to rounding.
    NaN shares and −∞ where both terms are −∞ (as the reference).
    """
    top = lg if lg >= lf else lf
    e = vexp(-abs(lg - lf))
    big = 1.0 / (1.0 + e)
    small = e * big
    lmix = top + vlog(1.0 + e)
    gen = big if lg >= lf else small
    fake = small if lg >= lf else big
    dead = top == -math.inf
    return (-math.inf if dead else lmix), (math.nan if dead else gen), (math.nan if dead else fake)


@numba.njit(cache=True, inline="always")
def _sum4(buf: FloatArray, n: int) -> float:  # pragma: no cover - numba
    """Σ buf[0:n] in four interleaved partial sums (a fixed order; ≈ 1 cycle per term)."""
    s0 = s1 = s2 = s3 = 0.0
    k = 0
    while k + 4 <= n:
        s0 += buf[k]
        s1 += buf[k + 1]
        s2 += buf[k + 2]
        s3 += buf[k + 3]
        k += 4
    while k < n:
        s0 += buf[k]
        k += 1
    return (s0 + s1) + (s2 + s3)


@numba.njit(cache=True, error_model="numpy", fastmath=_FAST)
def _eval_gauss(
    h: int,
    lo: int,
    hi: int,
    y: FloatArray,
    mu: FloatArray,
    tau2: FloatArray,
    lp_g: FloatArray,
    lp_f: FloatArray,
    sigma: float,
    scratch: FloatArray,
    buf: FloatArray,
) -> float:  # pragma: no cover - numba
    """Σ over cells lo..hi−1 of log(ρ L_g + (1 − ρ) L_f) at the Gaussian hypothesis σ
    (rpt_bayes._cell_terms with the per-hypothesis constants hoisted); keeps per cell the
    genuine and fake shares ρL_g/mix, (1 − ρ)L_f/mix in `scratch[0:2, h]`. One branch-free
    loop over the cells (vectorised)."""
    s2 = sigma * sigma
    lf0 = -0.5 * (_LOG_2PI + math.log(s2))
    half_inv_s2 = 0.5 / s2
    n = hi - lo
    # two loops (log L_g, then the mixture): each vectorises with fewer live registers than
    # one fused loop (measured: about 1.4× faster)
    for k in range(n):
        c = lo + k
        v = tau2[c] + s2
        r = y[c] - mu[c]
        buf[k] = -0.5 * (_LOG_2PI + vlog(v)) - r * r / (2.0 * v) + lp_g[c]
    for k in range(n):
        c = lo + k
        yc = y[c]
        lf = lf0 - yc * yc * half_inv_s2 + lp_f[c]
        lmix, gen, fake = _vmix(buf[k], lf)
        scratch[0, h, k] = gen
        scratch[1, h, k] = fake
        buf[k] = lmix
    return _sum4(buf, n)


@numba.njit(cache=True, error_model="numpy", fastmath=_FAST)
def _eval_uniform(
    h: int,
    lo: int,
    hi: int,
    y: FloatArray,
    mu: FloatArray,
    inv_tau: FloatArray,
    lp_g: FloatArray,
    lp_f: FloatArray,
    sigma: float,
    scratch: FloatArray,
    buf: FloatArray,
) -> float:  # pragma: no cover - numba
    """`_eval_gauss` for the uniform hypothesis σ: also keeps log(Φ(b) − Φ(a)) per cell in
    `scratch[2, h]` for the posterior mean (pass 2, `_pass2`).

    Φ(b) − Φ(a) from e_a = erfc(|a|/√2), e_b = erfc(|b|/√2) (`rpt_vecmath.verfc_pos`):
    (e_b − e_a)/2 in the lower tail (b ≤ 0), (e_a − e_b)/2 in the upper (a ≥ 0), 1 − (e_a + e_b)/2
    across 0: the differences `_log_diff_ndtr` takes, without its branches. Cells beyond its
    erfc range (b ≤ −30 or a ≥ 30, where it switches to log Φ) are counted and redone by
    `_log_diff_ndtr` after the loop.
    """
    alpha = _SQRT3 * sigma
    log2a = math.log(2.0 * alpha)
    n = hi - lo
    rare = 0
    # two loops (Φ(b) − Φ(a), then the logs and the mixture), as in `_eval_gauss`
    for k in range(n):
        c = lo + k
        yc = y[c]
        m = mu[c]
        it = inv_tau[c]
        a = (yc - alpha - m) * it
        b = (yc + alpha - m) * it
        ea = verfc_pos(abs(a) * _SQRT1_2)
        eb = verfc_pos(abs(b) * _SQRT1_2)
        mid = 1.0 - 0.5 * (ea + eb)
        d = 0.5 * (eb - ea) if b <= 0.0 else (0.5 * (ea - eb) if a >= 0.0 else mid)
        buf[k] = d if d > _TINY else _TINY
        rare += 1 if (b <= -30.0 or a >= 30.0) else 0
    for k in range(n):
        c = lo + k
        log_d = vlog(buf[k])
        lg = log_d - log2a + lp_g[c]
        lf = (-log2a if abs(y[c]) <= alpha else -math.inf) + lp_f[c]
        lmix, gen, fake = _vmix(lg, lf)
        scratch[0, h, k] = gen
        scratch[1, h, k] = fake
        scratch[2, h, k] = log_d
        buf[k] = lmix
    if rare:
        for k in range(n):
            c = lo + k
            yc, m, it = y[c], mu[c], inv_tau[c]
            a = (yc - alpha - m) * it
            b = (yc + alpha - m) * it
            if not (b <= -30.0 or a >= 30.0):
                continue
            log_d = log_diff_ndtr(a, b)
            lg = log_d - log2a + lp_g[c]
            lf = (-log2a if abs(yc) <= alpha else -math.inf) + lp_f[c]
            lmix, gen, fake = _vmix(lg, lf)
            scratch[0, h, k] = gen
            scratch[1, h, k] = fake
            scratch[2, h, k] = log_d
            buf[k] = lmix
    return _sum4(buf, n)


@numba.njit(cache=True, error_model="numpy", fastmath=_FAST)
def _bound_uniform(
    lo: int,
    hi: int,
    y: FloatArray,
    mu: FloatArray,
    inv_tau: FloatArray,
    lp_g: FloatArray,
    lp_f: FloatArray,
    rho_g: FloatArray,
    rho_f: FloatArray,
    sigma: float,
    buf: FloatArray,
) -> float:  # pragma: no cover - numba
    """An upper bound of `_eval_uniform`'s sum at σ, at a third of its cost (no erfc).

    If [a, b] lies on one side of 0, at distance m = max(a, −b) > 0: Φ(b) − Φ(a) = ∫_a^b φ ≤
    (b − a)·φ(m), and ≤ Φ(−m) = φ(m)·R(m) ≤ φ(m)·4/(3m + √(m² + 8)) (Sampford's bound on Mills'
    ratio R, Ann. Math. Stat. 24, 1953; within 13 % of R, so the bound stays tight far in a
    tail). If a ≤ 0 ≤ b: Φ(b) − Φ(a) = (Φ(b) − ½) + (½ − Φ(a)) ≤ min(b·φ(0), ½) + min(−a·φ(0), ½).
    Floored at 1e-300 as `_eval_uniform` floors it; the fake term is exact; the mixture is
    increasing in both terms. `rho_g`, `rho_f` are exp(lp_g), exp(lp_f).
    """
    alpha = _SQRT3 * sigma
    log2a = math.log(2.0 * alpha)
    n = hi - lo
    for k in range(n):
        c = lo + k
        yc = y[c]
        m = mu[c]
        it = inv_tau[c]
        a = (yc - alpha - m) * it
        b = (yc + alpha - m) * it
        dist = a if a > -b else -b
        outside = dist > 0.0
        dist = dist if outside else 0.0
        width = b - a
        mills = 4.0 / (3.0 * dist + math.sqrt(dist * dist + 8.0))
        span = mills if mills < width else width
        # across 0: each half is at most its width·φ(0) and at most ½
        up = b * _INV_SQRT_2PI
        down = -a * _INV_SQRT_2PI
        across = (up if up < 0.5 else 0.5) + (down if down < 0.5 else 0.5)
        d = span * vexp(-0.5 * dist * dist) * _INV_SQRT_2PI if outside else across
        d = d if d < 1.0 else 1.0
        d = d if d > _TINY else _TINY
        # the mixture in linear terms, ρ·d + (1 − ρ)·[|y′| ≤ α] (one log instead of two and an
        # exp); where a fake is possible but (1 − ρ) < 1e-290, max(A, B) + log 2 ≥ log(eᴬ + eᴮ)
        f = rho_f[c] if abs(yc) <= alpha else 0.0
        lin = f > 1e-290
        lg = vlog(rho_g[c] * d + f if lin else d)
        lg = lg if lin else lg + lp_g[c]
        lf = lp_f[c] if f > 0.0 else -math.inf
        lg = lg if (lin or f == 0.0) else (lg if lg > lf else lf) + _LOG2
        buf[k] = lg - log2a
    return _sum4(buf, n)


@numba.njit(cache=True, error_model="numpy", fastmath=_FAST)
def _pass2(
    wh: float,
    h: int,
    lo: int,
    hi: int,
    y: FloatArray,
    mu: FloatArray,
    tau2: FloatArray,
    tau: FloatArray,
    sigma: float,
    uniform: bool,
    scratch: FloatArray,
    p_gen: FloatArray,
    p_fake: FloatArray,
    z_num: FloatArray,
    buf: FloatArray,
) -> None:  # pragma: no cover - numba
    """Pass 2 of one hypothesis with weight wh over cells lo..hi−1 (see `e_step`): one
    branch-free loop per noise shape."""
    if not uniform:
        s2 = sigma * sigma
        for k in range(hi - lo):
            c = lo + k
            gen_h = wh * scratch[0, h, k]
            p_gen[c] += gen_h
            p_fake[c] += wh * scratch[1, h, k]
            m = mu[c]
            z_num[c] += gen_h * (m + tau2[c] / (tau2[c] + s2) * (y[c] - m))
        return
    alpha = _SQRT3 * sigma
    n = hi - lo
    for k in range(n):  # E[z | y′, genuine] first (one vectorised loop), then the sums
        c = lo + k
        m, t = mu[c], tau[c]
        a = (y[c] - alpha - m) / t
        b = (y[c] + alpha - m) / t
        log_d = scratch[2, h, k]
        log_phi_a = -0.5 * (a * a + _LOG_2PI)
        log_phi_b = -0.5 * (b * b + _LOG_2PI)
        buf[k] = m + t * (vexp(log_phi_a - log_d) - vexp(log_phi_b - log_d))
    for k in range(n):
        c = lo + k
        gen_h = wh * scratch[0, h, k]
        p_gen[c] += gen_h
        p_fake[c] += wh * scratch[1, h, k]
        z_num[c] += gen_h * buf[k]


@numba.njit(cache=True, inline="always")
def _eval_hyp(
    h: int,
    n_s: int,
    lo: int,
    hi: int,
    y: FloatArray,
    mu: FloatArray,
    tau2: FloatArray,
    inv_tau: FloatArray,
    lp_g: FloatArray,
    lp_f: FloatArray,
    grid: FloatArray,
    scratch: FloatArray,
    buf: FloatArray,
) -> float:  # pragma: no cover - numba
    """ll of hypothesis h: Gaussian for h < n_σ, uniform above."""
    if h < n_s:
        return _eval_gauss(h, lo, hi, y, mu, tau2, lp_g, lp_f, grid[h], scratch, buf)
    return _eval_uniform(h, lo, hi, y, mu, inv_tau, lp_g, lp_f, grid[h - n_s], scratch, buf)


@numba.njit(cache=True)
def _user_e_step(
    u: int,
    indptr: IndexArray,
    y: FloatArray,
    mu: FloatArray,
    tau2: FloatArray,
    tau: FloatArray,
    inv_tau: FloatArray,
    lp_g: FloatArray,
    lp_f: FloatArray,
    rho_g: FloatArray,
    rho_f: FloatArray,
    grid: FloatArray,
    prev_post: FloatArray,
    first: bool,
    prune: float,
    post: FloatArray,
    p_gen: FloatArray,
    p_fake: FloatArray,
    z_num: FloatArray,
    scratch: FloatArray,
    buf: FloatArray,
) -> int:  # pragma: no cover - numba
    """`e_step` for user u (τ = √τ², 1/τ given per cell); returns the number of hypotheses
    evaluated."""
    n_s = grid.size
    n_h = 2 * n_s
    lo, hi = indptr[u], indptr[u + 1]
    ll = np.full(n_h, -np.inf)
    done = np.zeros(n_h, dtype=np.bool_)
    todo = np.zeros(n_h, dtype=np.bool_)
    bound = np.full(n_h, np.inf)  # upper bounds of ll for the uniform hypotheses to check
    if first:
        todo[:n_s] = True
        bound[n_s:] = -np.inf
    else:
        for s in range(2):
            a, b, best = -1, -1, 0
            for i in range(n_s):
                w = prev_post[u, s * n_s + i]
                if w > prune:
                    if a < 0:
                        a = i
                    b = i
                if w > prev_post[u, s * n_s + best]:
                    best = i
            if a < 0:
                a, b = best, best
            for i in range(max(a - 1, 0), min(b + 1, n_s - 1) + 1):
                todo[s * n_s + i] = True
            if s == 0:  # sentinels at both ends of the Gaussian shape's σ range
                todo[0] = True
                todo[n_s - 1] = True
            else:  # the uniform shape: every other σ is checked against a bound
                for i in range(n_s):
                    if not todo[n_s + i]:
                        bound[n_s + i] = -np.inf
    evaluated = 0
    for h in range(n_h):
        if todo[h]:
            ll[h] = _eval_hyp(h, n_s, lo, hi, y, mu, tau2, inv_tau, lp_g, lp_f, grid, scratch, buf)
            done[h] = True
            evaluated += 1
    # Uniform hypotheses outside the window: their weight is at most exp(bound − lse) with lse
    # over the hypotheses evaluated so far (a lower bound of the final one); those that the
    # bound cannot rule out are evaluated, largest bound first, and lse updated.
    for h in range(n_s, n_h):
        if bound[h] == -np.inf:
            bound[h] = _bound_uniform(
                lo, hi, y, mu, inv_tau, lp_g, lp_f, rho_g, rho_f, grid[h - n_s], buf
            )
    skipped = np.zeros(n_h, dtype=np.bool_)
    lse = _log_sum_exp(ll)
    log_prune = math.log(prune) if prune > 0.0 else -np.inf
    while True:
        top, pick = -np.inf, -1
        for h in range(n_s, n_h):
            if bound[h] < np.inf and not done[h] and not skipped[h] and bound[h] >= top:
                top, pick = bound[h], h
        if pick < 0:
            break
        if top - lse <= log_prune:  # this and every remaining one: weight ≤ prune
            for h in range(n_s, n_h):
                if bound[h] < np.inf and not done[h]:
                    skipped[h] = True
            break
        ll[pick] = _eval_hyp(
            pick, n_s, lo, hi, y, mu, tau2, inv_tau, lp_g, lp_f, grid, scratch, buf
        )
        done[pick] = True
        evaluated += 1
        lse = _log_sum_exp(ll)
    while not first:
        # flood fill: every evaluated hypothesis with weight > prune gets its σ neighbours
        # (not those a bound ruled out: lse only grows, so their bound still holds)
        lse = _log_sum_exp(ll)
        grew = False
        for h in range(n_h):
            if not done[h] or math.exp(ll[h] - lse) <= prune:
                continue
            i = h % n_s
            for nb in (h - 1, h + 1):
                if 0 <= (i + nb - h) < n_s and not done[nb] and not skipped[nb]:
                    ll[nb] = _eval_hyp(
                        nb, n_s, lo, hi, y, mu, tau2, inv_tau, lp_g, lp_f, grid, scratch, buf
                    )
                    done[nb] = True
                    evaluated += 1
                    grew = True
        if not grew:
            break
    lse = _log_sum_exp(ll)
    for h in range(n_h):
        post[u, h] = math.exp(ll[h] - lse) if done[h] else 0.0
    # pass 2, hypotheses in the reference's order
    for h in range(n_h):
        wh = post[u, h]
        if not (done[h] and wh > PASS2_MIN):
            continue
        _pass2(
            wh, h, lo, hi, y, mu, tau2, tau, grid[h % n_s], h >= n_s, scratch,
            p_gen, p_fake, z_num, buf,
        )  # fmt: skip
    return evaluated


@numba.njit(cache=True, inline="always")
def _log_sum_exp(ll: FloatArray) -> float:  # pragma: no cover - numba
    """log Σ exp(ll), shifted by the max (scipy's logsumexp); −inf entries add nothing."""
    top = -np.inf
    for v in ll:
        top = max(top, v)
    total = 0.0
    for v in ll:
        total += math.exp(v - top)
    return top + math.log(total)


@numba.njit(cache=True, inline="always")
def _log1p_exp(t: float) -> float:  # pragma: no cover - numba
    """log(1 + eᵗ), as numpy's ``logaddexp(0.0, t)`` computes it (bit for bit)."""
    if t == 0.0:
        return _LOG2
    if t > 0.0:
        return t + math.log1p(math.exp(-t))
    if t <= 0.0:
        return math.log1p(math.exp(t))
    return t  # nan


@numba.njit(cache=True, parallel=True)
def mixture_log_weights(log_odds: FloatArray) -> tuple[FloatArray, FloatArray]:  # pragma: no cover
    """(log ρ, log(1 − ρ)) per cell from the prior log odds log(ρ/(1 − ρ)): what the E-step's
    numpy reference computes as ``-logaddexp(0, -lo)`` and ``-logaddexp(0, lo)``, equal bit
    for bit, in one parallel pass."""
    lp_g = np.empty_like(log_odds)
    lp_f = np.empty_like(log_odds)
    for c in numba.prange(log_odds.size):
        lp_g[c] = -_log1p_exp(-log_odds[c])
        lp_f[c] = -_log1p_exp(log_odds[c])
    return lp_g, lp_f


@numba.njit(cache=True, parallel=True)
def e_step(
    indptr: IndexArray,
    y: FloatArray,
    mu: FloatArray,
    tau2: FloatArray,
    lp_g: FloatArray,
    lp_f: FloatArray,
    grid: FloatArray,
    prev_post: FloatArray,
    first: bool,
    prune: float,
    post: FloatArray,
    p_gen: FloatArray,
    p_fake: FloatArray,
    z_num: FloatArray,
) -> int:  # pragma: no cover - numba
    """Both E-step passes of `fit_rpt_posterior` for every user; returns the evaluations done.

    Hypotheses h = 0..H−1 are (grid[i], Gaussian) for h = i and (grid[i], uniform) for
    h = n_σ + i, with a uniform prior. Pass 1: ll_uh = Σ_{c ∈ u} log(ρ_c L_g + (1 − ρ_c) L_f),
    post_uh ∝ exp(ll_uh). Pass 2: for hypotheses with post_uh > `PASS2_MIN`, per cell
    p_gen += post·ρL_g/mix, p_fake += post·(1 − ρ)L_f/mix, z_num += post·ρL_g/mix·E[z | y′].

    Pruning: in the first iteration every Gaussian hypothesis is evaluated; after it, per user
    and noise shape, the contiguous σ window spanning the hypotheses with `prev_post` >
    `prune` (or the previous best one if none) plus one neighbour each side, and for the
    Gaussian shape both ends of the σ grid. Every other uniform hypothesis gets an upper bound
    of its log likelihood (`_bound_uniform`, no erfc) and is evaluated, largest bound first,
    unless bound − lse ≤ log `prune`, lse over the hypotheses evaluated so far (≤ the final one,
    so a skipped hypothesis has weight ≤ `prune`: the uniform shape's posterior is jagged at
    small σ and heuristic rules missed modes there, on a 10,000-user run and on ML-100K). Then,
    repeatedly, every evaluated hypothesis whose weight (normalised over the evaluated ones)
    exceeds `prune` gets its σ neighbours evaluated, unless a bound ruled them out. A Gaussian
    hypothesis with weight > `prune` is missed only if it is neither a sentinel nor connected
    to an evaluated heavy hypothesis through weights > `prune`.

    The cell loops are branch-free and use `rpt_vecmath` (vectorised by LLVM); fast-math
    "contract" only.
    Users are shared out among numba's threads in contiguous chunks (`CHUNKS`), each with its
    own scratch; a user's outputs are written by one thread only, so the result does not
    depend on the number of threads. Outputs `post` (n, H), `p_gen`, `p_fake`, `z_num` (nnz,)
    are written in place (the latter three must be zero on entry).
    """
    n = indptr.size - 1
    max_f = 1
    for u in range(n):
        max_f = max(max_f, indptr[u + 1] - indptr[u])
    tau = np.sqrt(tau2)
    inv_tau = 1.0 / tau
    rho_g = np.exp(lp_g)
    rho_f = np.exp(lp_f)
    n_chunks = min(n, CHUNKS)
    evaluated = 0
    for c in numba.prange(n_chunks):
        scratch = np.zeros((3, 2 * grid.size, max_f))
        buf = np.empty(max_f)
        lo, hi = chunk_rows(c, n_chunks, n)
        done = 0
        for u in range(lo, hi):
            done += _user_e_step(
                u, indptr, y, mu, tau2, tau, inv_tau, lp_g, lp_f, rho_g, rho_f, grid, prev_post,
                first, prune, post, p_gen, p_fake, z_num, scratch, buf,
            )  # fmt: skip
        evaluated += done
    return evaluated


__all__ = [
    "PASS2_MIN",
    "PRUNE",
    "e_step",
    "mixture_log_weights",
]
