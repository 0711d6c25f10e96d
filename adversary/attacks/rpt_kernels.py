"""Compiled kernels of the RPT attacks: the fused E-step of `fit_rpt_posterior` and the
filled-cell sums of `rpt_matrix` (issue 13, target 3).

Every kernel computes what a numpy expression of the reference path computes, in the same
summation order, so that the two paths agree to rounding (the tests in
``tests/unit/adversary/test_attacks_rpt_kernels.py`` check it):

* `e_step`: both passes of the E-step of `rpt_bayes.fit_rpt_posterior` over the (σ, noise
  shape) grid for all hypotheses of one user at once (vectorised loops over her cells per
  hypothesis), with the per-cell terms kept from pass 1 for pass 2. Hypotheses without
  posterior weight are pruned (see `e_step`): the only departure from the reference, bounded
  by `PRUNE`.
* `rows_times_dense`, `cols_times_dense`: A·D and Aᵀ·D for a CSR matrix A, as scipy's sparse
  × dense products sum them; with the upper triangles of E[b bᵀ] (`upper_second_moments`,
  `mirror_triangles`) they give Σ w (b bᵀ + C) (`rpt_matrix.precision_part`);
  `chol_posteriors`: the k × k posteriors by Cholesky (`rpt_matrix.posterior_from_sums`).
* `quad_forms`: x_cᵀ S_c x_c per cell without gathering a k × k matrix per cell
  (`rpt_matrix.quad_form`).
* `row_dots`: a_{u_c}ᵀ b_{j_c} per filled cell (also `rpt_matrix.cell_variances`).
* `upper_second_moments`, `triangle_rows`, `mixture_log_weights`: the triangles of E[b bᵀ],
  the rows of `rpt_matrix.cell_variances`'s dot products and the cells' log prior weights,
  bit for bit the numpy expressions they replace.

Every kernel that loops over users, items or cells runs them on numba's threads (``prange``;
``NUMBA_NUM_THREADS``, by default one per core). Each output row or cell is written by one
thread and every sum keeps its serial order, so the results are the same bit for bit on any
number of threads (tested with one and three).

The special functions follow scipy's definitions: log Φ via erfc with the asymptotic series
below −20 (as scipy's ``log_ndtr``), numpy's ``logaddexp``; in the cell loops they are
`rpt_vecmath`'s vectorisable exp, log and erfc (within 2 ulp, 2 ulp and 2e-15 of libm).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from privrec.adversary.attacks.rpt_vecmath import verfc_pos, vexp, vlog
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


@numba.njit(cache=True)
def log_ndtr(a: float) -> float:  # pragma: no cover - numba
    """log Φ(a), stable in both tails: log1p(−Φ(−a)) above −1, log Φ(a) down to −20, and
    scipy's asymptotic series (scipy.special.log_ndtr) below."""
    if a > -1.0:  # Φ(a) near 1: log1p keeps the relative accuracy of the small log
        return math.log1p(-0.5 * math.erfc(a * _SQRT1_2))
    if a > -20.0:
        return math.log(0.5 * math.erfc(-a * _SQRT1_2))
    # Asymptotic series log Φ(a) = log φ(a)/(−a) + log Σ_i (−1)ⁱ (2i − 1)!! / a²ⁱ.
    log_lhs = -0.5 * a * a - math.log(-a) - 0.5 * _LOG_2PI
    last, rhs, num, den, cons, sign, i = 0.0, 1.0, 1.0, 1.0, 1.0 / (a * a), 1.0, 0
    while abs(last - rhs) > _EPS:
        i += 1
        last = rhs
        sign = -sign
        den *= cons
        num *= 2 * i - 1
        rhs += sign * num * den
    return log_lhs + math.log(rhs)


@numba.njit(cache=True)
def _log_diff_ndtr(a: float, b: float) -> float:  # pragma: no cover - numba
    """log(Φ(b) − Φ(a)) for a < b (rpt_bayes._log_diff_ndtr, one cell).

    Where both Φ values are representable (b > −30, or a < 30 in the upper tail) the
    difference of erfc values is taken directly; b − a ≥ 2√3·σ_min/τ keeps the cancellation to
    a few bits there. Further out, the reference's log-space formula.
    """
    if b <= 0.0:
        if b > -30.0:
            d = 0.5 * (math.erfc(-b * _SQRT1_2) - math.erfc(-a * _SQRT1_2))
            return math.log(max(d, _TINY))
        la, lb = log_ndtr(a), log_ndtr(b)
        return lb + math.log1p(-math.exp(min(la - lb, -1e-12)))
    if a >= 0.0:
        if a < 30.0:
            d = 0.5 * (math.erfc(a * _SQRT1_2) - math.erfc(b * _SQRT1_2))
            return math.log(max(d, _TINY))
        la, lb = log_ndtr(-a), log_ndtr(-b)
        return la + math.log1p(-math.exp(min(lb - la, -1e-12)))
    d = 0.5 * math.erfc(-b * _SQRT1_2) - 0.5 * math.erfc(-a * _SQRT1_2)
    return math.log(max(d, _TINY))


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
            log_d = _log_diff_ndtr(a, b)
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


@numba.njit(cache=True, inline="always")
def _chunk(c: int, n_chunks: int, n: int) -> tuple[int, int]:  # pragma: no cover - numba
    """Rows [lo, hi) of chunk c when n rows are cut into n_chunks contiguous chunks."""
    return c * n // n_chunks, (c + 1) * n // n_chunks


_CHUNKS = 256
"""Parallel loops hand out rows in this many contiguous chunks (each with its own scratch),
so that no two threads write the same output row and the sums keep their serial order."""


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
    Users are shared out among numba's threads in contiguous chunks (`_CHUNKS`), each with its
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
    n_chunks = min(n, _CHUNKS)
    evaluated = 0
    for c in numba.prange(n_chunks):
        scratch = np.zeros((3, 2 * grid.size, max_f))
        buf = np.empty(max_f)
        lo, hi = _chunk(c, n_chunks, n)
        done = 0
        for u in range(lo, hi):
            done += _user_e_step(
                u, indptr, y, mu, tau2, tau, inv_tau, lp_g, lp_f, rho_g, rho_f, grid, prev_post,
                first, prune, post, p_gen, p_fake, z_num, scratch, buf,
            )  # fmt: skip
        evaluated += done
    return evaluated


@numba.njit(cache=True, parallel=True)
def rows_times_dense(
    indptr: IndexArray, indices: IndexArray, w: FloatArray, dense: FloatArray
) -> FloatArray:  # pragma: no cover - numba
    """A·D for the CSR matrix A = (w, indices, indptr) and a dense D: row p sums w_pq D_q over
    the row's stored entries in their CSR order, one contiguous AXPY per entry, as scipy's
    csr × dense product does (bit for bit; rows shared out among threads)."""
    p = indptr.size - 1
    t = dense.shape[1]
    out = np.zeros((p, t))
    for r in numba.prange(p):
        for idx in range(indptr[r], indptr[r + 1]):
            wq = w[idx]
            q = indices[idx]
            for s in range(t):
                out[r, s] += wq * dense[q, s]
    return out


@numba.njit(cache=True, parallel=True)
def cols_times_dense(
    indptr: IndexArray, indices: IndexArray, w: FloatArray, dense: FloatArray, p: int, parts: int
) -> FloatArray:  # pragma: no cover - numba
    """Aᵀ·D for the CSR matrix A = (w, indices, indptr) (n × p) and a dense D (n × t): row r
    sums w_qr D_q over the stored entries (q, r), q ascending, the order the CSR of Aᵀ (and
    scipy's csc × dense product) gives, bit for bit. Each D_q is read once and scattered into
    the rows it touches. In parallel, each of `parts` parts (one per thread) owns a range of
    the p rows and scatters only the entries that fall in it (every part walks the indices;
    the adds, t per entry, are shared out), so each row's sum keeps its order."""
    t = dense.shape[1]
    out = np.zeros((p, t))
    for part in numba.prange(parts):
        lo, hi = _chunk(part, parts, p)
        for q in range(indptr.size - 1):
            for idx in range(indptr[q], indptr[q + 1]):
                r = indices[idx]
                if lo <= r < hi:
                    wq = w[idx]
                    for s in range(t):
                        out[r, s] += wq * dense[q, s]
    return out


@numba.njit(cache=True, parallel=True)
def upper_second_moments(b: FloatArray, cov: FloatArray) -> FloatArray:  # pragma: no cover - numba
    """Row q: the upper triangle (row-major, k(k+1)/2 entries) of b_q b_qᵀ + cov[q], the
    second moment E[b bᵀ] that `rpt_matrix.precision_part` sums; `cov` of length 0 means no
    covariance. Each entry is b_qi·b_qj (+ cov[q, i, j]) in that order, as numpy's
    ``b[:, iu] * b[:, ju] + cov[:, iu, ju]`` computes it, written C-contiguous."""
    q, k = b.shape
    out = np.empty((q, k * (k + 1) // 2))
    with_cov = cov.shape[0] > 0
    for r in numba.prange(q):
        s = 0
        for i in range(k):
            for j in range(i, k):
                v = b[r, i] * b[r, j]
                if with_cov:
                    v += cov[r, i, j]
                out[r, s] = v
                s += 1
    return out


@numba.njit(cache=True, parallel=True)
def triangle_rows(
    cov: FloatArray, vec: FloatArray, cov_first: bool
) -> FloatArray:  # pragma: no cover - numba
    """Per row r, tri(cov[r]) and tri′(vec[r] vec[r]ᵀ) side by side (`cov_first` sets the
    order; a part given with length 0 is left out): tri is the upper triangle, row-major,
    tri′ the same with the off-diagonal doubled, (v_i·v_j)·2, as numpy computes it. With these
    rows, xᵀSx + yᵀTy is one dot product (`rpt_matrix.cell_variances`)."""
    k = cov.shape[1] if cov.shape[0] > 0 else vec.shape[1]
    t = k * (k + 1) // 2
    has_cov, has_vec = cov.shape[0] > 0, vec.shape[0] > 0
    p = cov.shape[0] if has_cov else vec.shape[0]
    out = np.empty((p, t * (int(has_cov) + int(has_vec))))
    cov_at = 0 if cov_first or not has_vec else t
    vec_at = 0 if not cov_first or not has_cov else t
    for r in numba.prange(p):
        s = 0
        for i in range(k):
            for j in range(i, k):
                if has_cov:
                    out[r, cov_at + s] = cov[r, i, j]
                if has_vec:
                    out[r, vec_at + s] = vec[r, i] * vec[r, j] * (1.0 if i == j else 2.0)
                s += 1
    return out


@numba.njit(cache=True, parallel=True)
def mirror_triangles(tri: FloatArray, k: int) -> FloatArray:  # pragma: no cover - numba
    """The full symmetric k × k matrices whose upper triangles (row-major) are the rows of
    `tri`."""
    p = tri.shape[0]
    out = np.empty((p, k, k))
    for r in numba.prange(p):
        s = 0
        for i in range(k):
            for j in range(i, k):
                out[r, i, j] = tri[r, s]
                out[r, j, i] = tri[r, s]
                s += 1
    return out


@numba.njit(cache=True, parallel=True)
def chol_posteriors(
    sums: FloatArray, rhs: FloatArray, prior_prec: FloatArray
) -> tuple[FloatArray, FloatArray]:  # pragma: no cover - numba
    """(P⁻¹ rhs, P⁻¹) per row, P = sums[r] + diag(prior_prec) (`rpt_matrix.posterior_from_sums`).

    P is symmetric positive definite (a sum of w·E[b bᵀ] ⪰ 0 plus a positive diagonal), so
    P = L Lᵀ (Cholesky), P⁻¹ = L⁻ᵀ L⁻¹: about k³/2 multiply-adds instead of LU's 4k³/3 and no
    per-matrix LAPACK call. A row whose Cholesky meets a non-positive pivot (not positive
    definite in floating point) falls back to np.linalg.inv, as the reference.
    """
    p, k = rhs.shape
    cov = np.empty((p, k, k))
    mean = np.empty((p, k))
    n_chunks = min(p, _CHUNKS)
    for c in numba.prange(n_chunks):
        lo = np.empty((k, k))
        inv = np.empty((k, k))
        first, last = _chunk(c, n_chunks, p)
        for r in range(first, last):
            if not _chol_inverse(sums[r], prior_prec, lo, inv, cov[r]):
                full = sums[r].copy()
                for i in range(k):
                    full[i, i] += prior_prec[i]
                cov[r] = np.linalg.inv(full)
            for i in range(k):
                acc = 0.0
                for j in range(k):
                    acc += cov[r, i, j] * rhs[r, j]
                mean[r, i] = acc
    return mean, cov


@numba.njit(cache=True)
def _chol_inverse(
    sums: FloatArray, prior_prec: FloatArray, lo: FloatArray, inv: FloatArray, cov: FloatArray
) -> bool:  # pragma: no cover - numba
    """cov = (sums + diag(prior_prec))⁻¹ by Cholesky (`lo`, `inv`: k × k scratch); False,
    with `cov` untouched, when a pivot is not positive."""
    k = prior_prec.size
    for i in range(k):
        for j in range(i + 1):
            acc = sums[i, j] + (prior_prec[i] if i == j else 0.0)
            for m in range(j):
                acc -= lo[i, m] * lo[j, m]
            if i == j:
                if not acc > 0.0:
                    return False
                lo[i, i] = math.sqrt(acc)
            else:
                lo[i, j] = acc / lo[j, j]
    # inv = L⁻¹ (lower triangular), by forward substitution column by column
    for j in range(k):
        for i in range(k):
            inv[i, j] = 0.0
        inv[j, j] = 1.0 / lo[j, j]
        for i in range(j + 1, k):
            acc = 0.0
            for m in range(j, i):
                acc -= lo[i, m] * inv[m, j]
            inv[i, j] = acc / lo[i, i]
    # P⁻¹ = L⁻ᵀ L⁻¹: (i, j) = Σ_{m ≥ max(i, j)} inv[m, i] inv[m, j]
    for i in range(k):
        for j in range(i + 1):
            acc = 0.0
            for m in range(i, k):
                acc += inv[m, i] * inv[m, j]
            cov[i, j] = acc
            cov[j, i] = acc
    return True


@numba.njit(cache=True, fastmath={"reassoc", "contract"}, parallel=True)
def quad_forms(
    vecs: FloatArray, vec_idx: IndexArray, covs: FloatArray, cov_idx: IndexArray
) -> FloatArray:  # pragma: no cover - numba
    """x_cᵀ S_c x_c with x_c = vecs[vec_idx[c]], S_c = covs[cov_idx[c]] (symmetric).

    Σ_i x_i (S_i · x): each row product is a dot product that LLVM vectorises when allowed to
    reassociate it (fast-math "reassoc" in this kernel only), so the sum's order differs from
    the reference's (S x)·x by rounding.
    """
    n = vec_idx.size
    k = vecs.shape[1]
    out = np.empty(n)
    for c in numba.prange(n):
        x = vecs[vec_idx[c]]
        s = covs[cov_idx[c]]
        total = 0.0
        for i in range(k):
            row = 0.0
            for j in range(k):
                row += s[i, j] * x[j]
            total += row * x[i]
        out[c] = total
    return out


@numba.njit(cache=True, fastmath={"reassoc", "contract"}, parallel=True)
def row_dots(
    a: FloatArray, a_idx: IndexArray, b: FloatArray, b_idx: IndexArray
) -> FloatArray:  # pragma: no cover - numba
    """a[a_idx[c]] · b[b_idx[c]] for every c (each dot product vectorised: fast-math
    "reassoc" in this kernel only, so its order differs from numpy's by rounding)."""
    n = a_idx.size
    k = a.shape[1]
    out = np.empty(n)
    for c in numba.prange(n):
        i = a_idx[c]
        j = b_idx[c]
        total = 0.0
        for s in range(k):
            total += a[i, s] * b[j, s]
        out[c] = total
    return out


def as_index(x: IndexArray) -> IndexArray:
    """int64 contiguous indices (numba compiles one specialisation)."""
    return np.ascontiguousarray(x, dtype=np.int64)


__all__ = [
    "PASS2_MIN",
    "PRUNE",
    "as_index",
    "chol_posteriors",
    "cols_times_dense",
    "e_step",
    "log_ndtr",
    "mirror_triangles",
    "mixture_log_weights",
    "quad_forms",
    "row_dots",
    "rows_times_dense",
    "triangle_rows",
    "upper_second_moments",
]
