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
  Laframboise, Math. Comp. 36, 1981, coefficients computed here with mpmath at 50 digits; the
  first omitted one is below 3e-19), e^(−x²) with x² split exactly (Dekker) so that its
  rounding does not grow with x²; erfc(−x) = 2 − erfc(x). Within 6e-16 relative of scipy's
  erfc on [−6, 26.5] (the range where erfc(x) is a normal number) and 0 beyond.
"""

from __future__ import annotations

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

# Chebyshev coefficients of Y(t) = (1 + 2x)·e^(x²)·erfc(x), x = 3(1 + t)/(1 − t), c₀ halved.
_ERFC_CHEB = (
    1.17756257419656,
    0.005353904539615676,
    -0.09377550342284209,
    0.05436652555744322,
    -0.018976596707845208,
    0.004453426061462712,
    -0.0006335531710553147,
    1.7661719523171593e-05,
    1.2841532864056671e-05,
    -2.0072285659059913e-06,
    -1.807522790414837e-07,
    7.549828343825093e-08,
    1.885668523838603e-09,
    -2.699519049798364e-09,
    -1.460079119939105e-11,
    1.0361607445969489e-10,
    1.475715976623473e-12,
    -4.277340064396911e-12,
    -2.07922492859799e-13,
    1.8134502003176963e-13,
    1.973425574544739e-14,
    -7.287943737592673e-15,
    -1.5169878690228116e-15,
    2.3514112258781403e-16,
    1.0006111691821667e-16,
    -2.0572528169538546e-18,
    -5.608608218863183e-18,
    -5.546884725994431e-19,
)
_C0 = _ERFC_CHEB[0]
_C1 = _ERFC_CHEB[1]
_C2 = _ERFC_CHEB[2]
_C3 = _ERFC_CHEB[3]
_C4 = _ERFC_CHEB[4]
_C5 = _ERFC_CHEB[5]
_C6 = _ERFC_CHEB[6]
_C7 = _ERFC_CHEB[7]
_C8 = _ERFC_CHEB[8]
_C9 = _ERFC_CHEB[9]
_C10 = _ERFC_CHEB[10]
_C11 = _ERFC_CHEB[11]
_C12 = _ERFC_CHEB[12]
_C13 = _ERFC_CHEB[13]
_C14 = _ERFC_CHEB[14]
_C15 = _ERFC_CHEB[15]
_C16 = _ERFC_CHEB[16]
_C17 = _ERFC_CHEB[17]
_C18 = _ERFC_CHEB[18]
_C19 = _ERFC_CHEB[19]
_C20 = _ERFC_CHEB[20]
_C21 = _ERFC_CHEB[21]
_C22 = _ERFC_CHEB[22]
_C23 = _ERFC_CHEB[23]
_C24 = _ERFC_CHEB[24]
_C25 = _ERFC_CHEB[25]
_C26 = _ERFC_CHEB[26]
_C27 = _ERFC_CHEB[27]
_ERFC_K = 3.0
_ERFC_MAX = 26.6  # erfc(26.6) < 1e-308: arguments are clamped here (the value is 0 anyway)


@numba.njit(cache=True, inline="always")
def _as_float(bits: int) -> float:  # pragma: no cover - numba
    return np.int64(bits).view(np.float64)  # type: ignore[no-any-return]


@numba.njit(cache=True, inline="always")
def _as_bits(x: float) -> int:  # pragma: no cover - numba
    return np.float64(x).view(np.int64)  # type: ignore[no-any-return]


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
    """erfc(x) for 0 ≤ x (module docstring); x is clamped at 26.6, where erfc is 0."""
    xc = x if x < _ERFC_MAX else _ERFC_MAX
    t = (xc - _ERFC_K) / (xc + _ERFC_K)
    t2 = 2.0 * t
    # Clenshaw recurrence for Σ' c_k T_k(t)
    # (unrolled: a loop over the tuple is not vectorised)
    b2 = _C27
    b1 = t2 * b2 + _C26
    b2, b1 = b1, t2 * b1 - b2 + _C25
    b2, b1 = b1, t2 * b1 - b2 + _C24
    b2, b1 = b1, t2 * b1 - b2 + _C23
    b2, b1 = b1, t2 * b1 - b2 + _C22
    b2, b1 = b1, t2 * b1 - b2 + _C21
    b2, b1 = b1, t2 * b1 - b2 + _C20
    b2, b1 = b1, t2 * b1 - b2 + _C19
    b2, b1 = b1, t2 * b1 - b2 + _C18
    b2, b1 = b1, t2 * b1 - b2 + _C17
    b2, b1 = b1, t2 * b1 - b2 + _C16
    b2, b1 = b1, t2 * b1 - b2 + _C15
    b2, b1 = b1, t2 * b1 - b2 + _C14
    b2, b1 = b1, t2 * b1 - b2 + _C13
    b2, b1 = b1, t2 * b1 - b2 + _C12
    b2, b1 = b1, t2 * b1 - b2 + _C11
    b2, b1 = b1, t2 * b1 - b2 + _C10
    b2, b1 = b1, t2 * b1 - b2 + _C9
    b2, b1 = b1, t2 * b1 - b2 + _C8
    b2, b1 = b1, t2 * b1 - b2 + _C7
    b2, b1 = b1, t2 * b1 - b2 + _C6
    b2, b1 = b1, t2 * b1 - b2 + _C5
    b2, b1 = b1, t2 * b1 - b2 + _C4
    b2, b1 = b1, t2 * b1 - b2 + _C3
    b2, b1 = b1, t2 * b1 - b2 + _C2
    b2, b1 = b1, t2 * b1 - b2 + _C1
    y = t * b1 - b2 + _C0
    # e^(−x²) with x² = p + err exactly (Dekker's product of a 26-bit split of x, taken from
    # the bits so that it stays exact when the caller lets LLVM contract a·b + c to an FMA)
    p = xc * xc
    hi = _as_float(_as_bits(xc) & _HI26)
    lo = xc - hi
    err = ((hi * hi - p) + 2.0 * hi * lo) + lo * lo
    g = vexp(-p) * (1.0 - err)
    return g * y / (1.0 + 2.0 * xc)


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


__all__ = ["apply", "verfc", "verfc_pos", "vexp", "vlog"]
