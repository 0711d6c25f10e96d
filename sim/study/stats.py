"""Statistics over a study's seeds: intervals per point, paired tests between points.

* Per point and metric: n, the mean, the sample standard deviation (n − 1) and the 95 %
  Student t interval of the mean, mean ± t(0.975, n − 1) · sd / √n: the seeds are independent
  replications, their number is small, so the normal interval would be too narrow. With one
  seed there is no interval.
* For each pair of points that differ in one axis value only, each metric is compared over the
  seeds both have: the runs of one seed share their population, splits and every other draw
  but the axis's, so the difference is paired (common random numbers). Two tests, both
  two-sided: Student's paired t-test (`scipy.stats.ttest_rel`) and Wilcoxon's signed-rank test
  (`scipy.stats.wilcoxon`, exact for small n; zero differences dropped, Wilcoxon's own
  convention), which does not assume normal differences. The p-values are not adjusted for the
  number of comparisons a study makes; the study states how many there are. With 3 seeds the
  smallest two-sided Wilcoxon p is 0.25: a few seeds cannot reject by rank alone.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats as sps

from privrec.sim.study.metrics import is_number

LEVEL = 0.95
INTERVAL = (
    "95 % Student t interval of the mean over seeds: mean ± t(0.975, n − 1) · sd / √n, "
    "sd the sample standard deviation (n − 1); none with one seed"
)
TESTS = (
    "pairs of points differing in one axis value, paired by seed: Student's paired t-test "
    "(scipy.stats.ttest_rel) and Wilcoxon's signed-rank test (scipy.stats.wilcoxon, exact for "
    "small n, zero differences dropped); two-sided p-values, not adjusted for the number of "
    "comparisons"
)


def describe(values: Sequence[float]) -> dict[str, Any]:
    """n, mean, sd, the 95 % t interval (`ci95`, None for n < 2) and the values themselves,
    over the finite values."""
    x = np.asarray([v for v in values if math.isfinite(v)], dtype=np.float64)
    n = int(x.size)
    shown = [v if math.isfinite(v) else None for v in values]  # JSON has no NaN
    if n == 0:
        return {"n": 0, "mean": None, "sd": None, "ci95": None, "values": shown}
    mean = float(np.mean(x))
    if n < 2:
        return {"n": 1, "mean": mean, "sd": None, "ci95": None, "values": shown}
    sd = float(np.std(x, ddof=1))
    half = float(sps.t.ppf(0.5 + LEVEL / 2, n - 1)) * sd / math.sqrt(n)
    return {
        "n": n,
        "mean": mean,
        "sd": sd,
        "ci95": [mean - half, mean + half],
        "values": shown,
    }


def paired_test(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """Paired comparison of b against a (same seeds, in order): n, mean of b − a, its sd, and
    both tests' p-values (None when undefined: fewer than 2 pairs, or no difference at all,
    `identical`)."""
    d = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    n = int(d.size)
    out: dict[str, Any] = {
        "n": n,
        "mean_diff": float(np.mean(d)) if n else None,
        "sd_diff": float(np.std(d, ddof=1)) if n > 1 else None,
        "t_p": None,
        "wilcoxon_p": None,
        "identical": bool(n and np.all(d == 0)),
    }
    if n < 2 or out["identical"]:
        return out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy warns on tiny n and on ties; p is still right
        if np.std(d) > 0:
            out["t_p"] = _p(sps.ttest_rel(b, a).pvalue)
        else:  # every seed moved by the same amount: t is infinite, p = 0
            out["t_p"] = 0.0
        out["wilcoxon_p"] = _p(sps.wilcoxon(d).pvalue)
    return out


def _p(value: Any) -> float | None:
    p = float(value)
    return p if math.isfinite(p) else None


def point_statistics(
    rows_by_point: Mapping[int, Sequence[Mapping[str, Any]]], metrics: Sequence[str]
) -> dict[int, dict[str, dict[str, Any]]]:
    """point → metric → `describe` of its values over the point's runs (seed order)."""
    out: dict[int, dict[str, dict[str, Any]]] = {}
    for point, rows in rows_by_point.items():
        ordered = sorted(rows, key=lambda r: r["seed"])
        out[point] = {
            m: describe([float(r[m]) for r in ordered if is_number(r.get(m))]) for m in metrics
        }
    return out


def one_axis_pairs(
    points: Mapping[int, Mapping[str, Any]],
) -> list[tuple[str, int, int]]:
    """(axis, point a, point b) for every pair of points whose axis values differ in exactly
    one axis, a before b in the study's order."""
    out = []
    for a, b in itertools.combinations(sorted(points), 2):
        differ = [k for k in points[a] if points[a][k] != points[b].get(k)]
        if len(differ) == 1:
            out.append((differ[0], a, b))
    return out


def comparisons(
    points: Mapping[int, Mapping[str, Any]],
    rows_by_point: Mapping[int, Sequence[Mapping[str, Any]]],
    metrics: Sequence[str],
) -> list[dict[str, Any]]:
    """Every one-axis pair and metric, paired over the seeds both points have (module
    docstring)."""
    out = []
    for axis, a, b in one_axis_pairs(points):
        seeds_a = {r["seed"]: r for r in rows_by_point.get(a, ())}
        seeds_b = {r["seed"]: r for r in rows_by_point.get(b, ())}
        common = sorted(set(seeds_a) & set(seeds_b))
        for m in metrics:
            pairs = [
                (float(seeds_a[s][m]), float(seeds_b[s][m]))
                for s in common
                if is_number(seeds_a[s].get(m)) and is_number(seeds_b[s].get(m))
            ]
            pairs = [(x, y) for x, y in pairs if math.isfinite(x) and math.isfinite(y)]
            if not pairs:
                continue
            xs, ys = zip(*pairs, strict=True)
            out.append(
                {
                    "axis": axis,
                    "a": {"point": a, axis: points[a][axis]},
                    "b": {"point": b, axis: points[b][axis]},
                    "metric": m,
                    "mean_a": float(np.mean(xs)),
                    "mean_b": float(np.mean(ys)),
                    **paired_test(xs, ys),
                }
            )
    return out


__all__ = [
    "INTERVAL",
    "LEVEL",
    "TESTS",
    "comparisons",
    "describe",
    "one_axis_pairs",
    "paired_test",
    "point_statistics",
]
