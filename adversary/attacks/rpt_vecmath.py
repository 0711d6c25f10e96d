"""exp, log and erfc that LLVM can vectorise, for the RPT attack kernels (issue 13, target 3).

numba calls libm for ``math.exp``/``math.log``/``math.erfc`` one scalar at a time (9, 9 and
26 ns per call on this machine) and, without an SVML-patched llvmlite (the wheels of llvmlite
0.50 are not: ``numba -s`` reports "SVML Operational: False" even with Intel's libsvml
installed), a loop that calls them is never vectorised. The functions here are straight-line
arithmetic and bit manipulation (no calls, no branches), so a loop over cells that uses them
runs four lanes at a time on AVX2. Each is inlined into its caller.

Accuracy (checked by ``tests/unit/adversary/test_attacks_rpt_vecmath.py`` against libm and,
for erfc, scipy, over their whole domains; the bounds below are the ones the tests hold):

* `vexp`: Cody–Waite reduction x = k·ln 2 + r, |r| ≤ ln2/2, with ln 2 split so that k·ln2_hi
  is exact, and the Taylor polynomial of eʳ to degree 13 (remainder below 5e-18); within 2 ulp
  of libm on [−708.39, 709.4]. Below −708.39 it returns 0 (the true value is below 2.3e-308, a
  subnormal), so e^(−∞) = 0; the domain ends at 709.4 (k ≤ 1023).
* `vlog`: positive normal finite x = 2ᵏ·m, m ∈ [√½, √2) from the bits, log m = 2 atanh(s),
  s = (m − 1)/(m + 1), |s| ≤ 0.1716, by its Taylor series to s²³ (remainder below 2e-20·|s|);
  within 2 ulp of libm. Zero, negative, subnormal, inf or NaN input is outside its domain (the
  kernels only pass values floored at 1e-300 or of the form 1 + e, e ∈ [0, 1]).
* `verfc`: erfc(x) = e^(−x²)·Y(t)/(1 + 2x) for x ≥ 0 with Y(t) = (1 + 2x)·e^(x²)·erfc(x),
  t = (x − 3)/(x + 3) ∈ [−1, 1), a Chebyshev series of 28 terms (the form of Shepherd &
  Laframboise, Math. Comp. 36, 1981; coefficients computed here with mpmath at 50 digits, the
  first omitted ones below 6e-18) evaluated in monomial form by Estrin's scheme (a tree, so
  the two erfc of a cell do not wait on a 27-step recurrence), e^(−x²) with x² split exactly
  (Dekker) so that its rounding does not grow with x²; erfc(−x) = 2 − erfc(x). Within 1e-15
  relative of mpmath on [−6, 26.5] (the range where erfc(x) is a normal number; scipy's own
  erfc is off by up to 6e-14 at the far end) and 0 above 26.62 (erfc < 1.1e-309 there).
"""

from __future__ import annotations

import math
import struct
from decimal import Decimal, getcontext

import numba
import numpy as np


def _ln2_split() -> tuple[float, float]:
    """ln 2 = hi + lo with hi's low 32 mantissa bits zero (k·hi is exact for |k| < 2²¹)."""
    getcontext().prec = 50
    ln2 = Decimal("0.6931471805599453094172321214581765680755")
    bits = struct.unpack("<q", struct.pack("<d", float(ln2)))[0]
    hi: float = struct.unpack("<d", struct.pack("<q", bits & ~((1 << 32) - 1)))[0]
    return hi, float(ln2 - Decimal(hi))


_LN2_HI, _LN2_LO = _ln2_split()
_LOG2E = 1.4426950408889634
_ROUND = 6755399441055744.0  # 1.5·2⁵²: adding it rounds to an integer held in the low bits
_ROUND_BITS = 0x4338000000000000  # its bit pattern
_EXP_MIN = -708.39  # e^x < 2.3e-308 (subnormal) below: returned as 0
_EXP_MAX = 709.4
_SQRT1_2_BITS = 0x3FE6A09E667F3BCD  # √½: mantissas ≥ √½ stay in [√½, √2)
_MANT = 0x000FFFFFFFFFFFFF
_EXP_ONE = 0x3FF0000000000000
_TWO52 = 4503599627370496.0
_TWO52_BITS = 0x4330000000000000
_HI26 = ~((1 << 27) - 1)  # keeps the sign, exponent and top 25 mantissa bits

# Y(t) = (1 + 2x)·e^(x²)·erfc(x), x = 3(1 + t)/(1 − t), as Σ_i P_i tⁱ: the monomial form of
# its 28-term Chebyshev series on [−1, 1] (converted exactly at 50 digits, then rounded;
# Σ|P_i| = 1.78 against Y ≥ 1.1, so evaluating it in double loses nothing to cancellation).
_ERFC_POLY = (
    1.2530080582697296,
    -0.1356211061245812,
    -0.04756229435345109,
    0.1296451587027629,
    -0.11927366341528023,
    0.06830802734391057,
    -0.023770514919506852,
    0.0025293918169509407,
    0.0018886903716907627,
    -0.0007798322781262303,
    -0.00010515990108729849,
    0.00012509937456456623,
    4.949988662264347e-06,
    -2.0100605325083817e-05,
    -7.33143259743597e-07,
    3.472390115145775e-06,
    3.603910925712771e-07,
    -6.163869055512103e-07,
    -1.4683175494120584e-07,
    1.0126845607238986e-07,
    4.6950946691614734e-08,
    -1.2581767405545219e-08,
    -1.1734464137789657e-08,
    4.4817555029519333e-10,
    2.0626322959832455e-09,
    2.1675048969615204e-10,
    -1.881936630944858e-10,
    -3.722451327004375e-11,
)
_P0 = _ERFC_POLY[0]
_P1 = _ERFC_POLY[1]
_P2 = _ERFC_POLY[2]
_P3 = _ERFC_POLY[3]
_P4 = _ERFC_POLY[4]
_P5 = _ERFC_POLY[5]
_P6 = _ERFC_POLY[6]
_P7 = _ERFC_POLY[7]
_P8 = _ERFC_POLY[8]
_P9 = _ERFC_POLY[9]
_P10 = _ERFC_POLY[10]
_P11 = _ERFC_POLY[11]
_P12 = _ERFC_POLY[12]
_P13 = _ERFC_POLY[13]
_P14 = _ERFC_POLY[14]
_P15 = _ERFC_POLY[15]
_P16 = _ERFC_POLY[16]
_P17 = _ERFC_POLY[17]
_P18 = _ERFC_POLY[18]
_P19 = _ERFC_POLY[19]
_P20 = _ERFC_POLY[20]
_P21 = _ERFC_POLY[21]
_P22 = _ERFC_POLY[22]
_P23 = _ERFC_POLY[23]
_P24 = _ERFC_POLY[24]
_P25 = _ERFC_POLY[25]
_P26 = _ERFC_POLY[26]
_P27 = _ERFC_POLY[27]
_ERFC_K = 3.0
_ERFC_MAX = 26.7  # clamp: e^(−x²) is returned as 0 above 26.62 (erfc < 1.1e-309, subnormal)


@numba.njit(cache=True, inline="always")
def _as_float(bits: int) -> float:  # pragma: no cover - numba
    """The float64 whose bit pattern is `bits`."""
    return float(np.int64(bits).view(np.float64))


@numba.njit(cache=True, inline="always")
def _as_bits(x: float) -> int:  # pragma: no cover - numba
    """The bit pattern of the float64 `x`, as an int64."""
    return int(np.float64(x).view(np.int64))


@numba.njit(cache=True, inline="always")
def vexp(x: float) -> float:  # pragma: no cover - numba
    """eˣ (module docstring: 2 ulp on [−708.39, 709.4], 0 below, −∞ → 0)."""
    xc = x if x > _EXP_MIN else _EXP_MIN
    xc = xc if xc < _EXP_MAX else _EXP_MAX
    t = xc * _LOG2E + _ROUND
    kf = t - _ROUND
    r = (xc - kf * _LN2_HI) - kf * _LN2_LO
    p = 1.0 / 6227020800.0
    p = p * r + 1.0 / 479001600.0
    p = p * r + 1.0 / 39916800.0
    p = p * r + 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    p = p * r + 1.0
    scale = _as_float((_as_bits(t) - _ROUND_BITS + 1023) << 52)
    out = p * scale
    return out if x > _EXP_MIN else 0.0


@numba.njit(cache=True, inline="always")
def vlog(x: float) -> float:  # pragma: no cover - numba
    """log x for positive normal finite x (module docstring: 2 ulp)."""
    ix = _as_bits(x) + (_EXP_ONE - _SQRT1_2_BITS)
    # exponent of x·√2 (as a float, exactly, without an int → float conversion)
    kf = _as_float(_TWO52_BITS | (ix >> 52)) - (_TWO52 + 1023.0)
    m = _as_float((ix & _MANT) + _SQRT1_2_BITS)  # x / 2ᵏ ∈ [√½, √2)
    f = m - 1.0
    s = f / (2.0 + f)
    z = s * s
    p = 1.0 / 23.0
    p = p * z + 1.0 / 21.0
    p = p * z + 1.0 / 19.0
    p = p * z + 1.0 / 17.0
    p = p * z + 1.0 / 15.0
    p = p * z + 1.0 / 13.0
    p = p * z + 1.0 / 11.0
    p = p * z + 1.0 / 9.0
    p = p * z + 1.0 / 7.0
    p = p * z + 1.0 / 5.0
    p = p * z + 1.0 / 3.0
    # log m = 2s + 2s·z·p, with 2s = f − s·f computed as f − s·f (no cancellation: s·f ≤ f/5)
    log_m = (f - s * f) + 2.0 * s * z * p
    return kf * _LN2_HI + (log_m + kf * _LN2_LO)


@numba.njit(cache=True, inline="always")
def verfc_pos(x: float) -> float:  # pragma: no cover - numba
    """erfc(x) for 0 ≤ x (module docstring); 0 above 26.62 (erfc is a subnormal there)."""
    xc = x if x < _ERFC_MAX else _ERFC_MAX
    # one division for both quotients: r = 1/((x + 3)(1 + 2x))
    den = 1.0 + 2.0 * xc
    r = 1.0 / ((xc + _ERFC_K) * den)
    t = (xc - _ERFC_K) * den * r
    # Estrin's scheme (a tree of depth 5 instead of a chain of 27 multiply-adds)
    t2 = t * t
    t4 = t2 * t2
    t8 = t4 * t4
    t16 = t8 * t8
    e0 = _P0 + _P1 * t
    e1 = _P2 + _P3 * t
    e2 = _P4 + _P5 * t
    e3 = _P6 + _P7 * t
    e4 = _P8 + _P9 * t
    e5 = _P10 + _P11 * t
    e6 = _P12 + _P13 * t
    e7 = _P14 + _P15 * t
    e8 = _P16 + _P17 * t
    e9 = _P18 + _P19 * t
    e10 = _P20 + _P21 * t
    e11 = _P22 + _P23 * t
    e12 = _P24 + _P25 * t
    e13 = _P26 + _P27 * t
    f0 = e0 + e1 * t2
    f1 = e2 + e3 * t2
    f2 = e4 + e5 * t2
    f3 = e6 + e7 * t2
    f4 = e8 + e9 * t2
    f5 = e10 + e11 * t2
    f6 = e12 + e13 * t2
    g0 = f0 + f1 * t4
    g1 = f2 + f3 * t4
    g2 = f4 + f5 * t4
    h0 = g0 + g1 * t8
    h1 = g2 + f6 * t8
    y = h0 + h1 * t16
    # e^(−x²) with x² = p + err exactly (Dekker's product of a 26-bit split of x, taken from
    # the bits so that it stays exact when the caller lets LLVM contract a·b + c to an FMA)
    p = xc * xc
    hi = _as_float(_as_bits(xc) & _HI26)
    lo = xc - hi
    err = ((hi * hi - p) + 2.0 * hi * lo) + lo * lo
    g = vexp(-p) * (1.0 - err)
    return g * y * ((xc + _ERFC_K) * r)


@numba.njit(cache=True, inline="always")
def verfc(x: float) -> float:  # pragma: no cover - numba
    """erfc(x) for finite x (module docstring)."""
    e = verfc_pos(abs(x))
    return 2.0 - e if x < 0.0 else e


@numba.njit(cache=True, error_model="numpy", fastmath={"contract"})
def apply(kind: int, x: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - numba
    """out[i] = f(x[i]) for f = (vexp, vlog, verfc)[kind]: a vectorised loop (tests, bench)."""
    if kind == 0:
        for i in range(x.size):
            out[i] = vexp(x[i])
    elif kind == 1:
        for i in range(x.size):
            out[i] = vlog(x[i])
    else:
        for i in range(x.size):
            out[i] = verfc(x[i])


# ---------------------------------------------------------------------------- log Φ, scalar
# scipy's definitions, for the cells the vectorised loops leave (tails beyond ±30); libm's erfc.
_LOG_2PI = math.log(2.0 * math.pi)
_SQRT1_2 = math.sqrt(0.5)
_TINY = 1e-300
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
def log_diff_ndtr(a: float, b: float) -> float:  # pragma: no cover - numba
    """log(Φ(b) − Φ(a)) for a < b (`rpt_bayes._log_diff_ndtr`, one cell).

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


__all__ = ["apply", "log_diff_ndtr", "log_ndtr", "verfc", "verfc_pos", "vexp", "vlog"]
