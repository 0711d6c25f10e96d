"""The vectorisable special functions of the RPT kernels (adversary.attacks.rpt_vecmath).

Deterministic: fixed grids plus fixed-seed random points over each function's whole domain,
compared with libm (numpy's exp/log, Python's math.erfc, both correctly rounded to within an
ulp); the bounds asserted are the ones the module docstring states. Each check is also shown
to reject a perturbation that is just outside its bound.
"""

from __future__ import annotations

import math

import numpy as np

from privrec.adversary.attacks.rpt_vecmath import apply
from privrec.shared.types import FloatArray

EXP, LOG, ERFC = 0, 1, 2


def _run(kind: int, x: FloatArray) -> FloatArray:
    out = np.empty_like(x)
    apply(kind, np.ascontiguousarray(x, dtype=np.float64), out)
    return out


def _ulps(got: FloatArray, ref: FloatArray) -> float:
    return float(np.max(np.abs(got - ref) / np.spacing(np.abs(ref))))


def test_vexp_within_two_ulp_and_zero_below_the_normal_range() -> None:
    rng = np.random.default_rng(0)
    x = np.concatenate(
        [rng.uniform(-708.39, 709.4, 200_000), rng.uniform(-1, 1, 50_000), [0.0, -0.0, 1.0]]
    )
    got, ref = _run(EXP, x), np.exp(x)
    assert _ulps(got, ref) <= 2.0
    assert _run(EXP, np.array([0.0]))[0] == 1.0
    np.testing.assert_array_equal(_run(EXP, np.array([-708.5, -800.0, -np.inf])), 0.0)
    # the check is sharp: a result off by 1e-15 relative (≈ 5 ulp) is rejected
    assert _ulps(ref * (1 + 1e-15), ref) > 2.0


def test_vlog_within_two_ulp_over_every_exponent() -> None:
    rng = np.random.default_rng(1)
    x = np.concatenate(
        [
            np.exp(rng.uniform(-708, 709, 200_000)),
            1.0 + rng.uniform(0.0, 1.0, 50_000),  # the kernels' log(1 + e)
            rng.uniform(0.5, 2.0, 50_000),  # around 1, where log is near 0
            [2.2250738585072014e-308, 1.7976931348623157e308, math.sqrt(0.5), math.sqrt(2.0)],
        ]
    )
    got, ref = _run(LOG, x), np.log(x)
    nz = ref != 0.0
    assert _ulps(got[nz], ref[nz]) <= 2.0
    assert _run(LOG, np.array([1.0]))[0] == 0.0
    assert _ulps(ref[nz] * (1 + 1e-15), ref[nz]) > 2.0


def test_verfc_within_2e_15_relative_of_libm_on_its_domain() -> None:
    """[−6, 26.5]: erfc is 2 below and a subnormal above; the E-step's arguments are |a|/√2,
    |b|/√2 < 30/√2 ≈ 21.2 (beyond, it switches to log Φ)."""
    rng = np.random.default_rng(2)
    x = np.concatenate(
        [np.linspace(-6.0, 26.5, 60_001), rng.uniform(-1.0, 1.0, 20_000), [0.0, 3.0, 21.2]]
    )
    got = _run(ERFC, x)
    ref = np.array([math.erfc(v) for v in x])
    rel = np.abs(got - ref) / ref
    assert float(np.max(rel)) < 2e-15
    assert _run(ERFC, np.array([27.0, 40.0])).tolist() == [0.0, 0.0]
    # sharp: rounding x² before the exponential (what the Dekker split avoids) costs ≈ 2x²·ε,
    # already 8e-14 at x = 20
    far = np.linspace(15.0, 21.0, 7)
    naive = np.array([math.exp(-(v * v) * (1 + 2.2e-16)) for v in far]) / np.exp(-far * far)
    assert float(np.max(np.abs(naive - 1.0))) > 2e-15
