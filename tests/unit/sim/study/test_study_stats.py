"""Intervals over seeds and paired tests between points (issue 26, item 3), against closed
forms and scipy, and the one-axis pairing."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from privrec.sim.study.stats import comparisons, describe, one_axis_pairs, paired_test


def test_describe_is_the_student_t_interval() -> None:
    """[1, 2, 3]: mean 2, sd 1, half-width t(0.975, 2) / √3, with Student's quantile for 2
    degrees of freedom in closed form, t_p = (2p − 1) √(2 / (4p(1 − p))) (= 4.3027); NaN is
    left out of the statistics but kept, as None, among the values."""
    d = describe([1.0, 2.0, 3.0, math.nan])
    assert d["n"] == 3 and d["mean"] == 2.0 and d["sd"] == 1.0
    p = 0.975
    half = (2 * p - 1) * math.sqrt(2 / (4 * p * (1 - p))) / math.sqrt(3)
    assert d["ci95"] == pytest.approx([2.0 - half, 2.0 + half], rel=1e-12)
    assert d["values"] == [1.0, 2.0, 3.0, None]


def test_describe_covers_the_mean_at_its_level() -> None:
    """The interval's coverage over 4000 normal samples of 5 is 95 % within 4 binomial sds
    (sd = √(.95·.05/4000) ≈ 0.0034; a false failure has probability < 1e-4); the normal
    interval (z = 1.96 instead of t), a broken variant, covers visibly less."""
    rng = np.random.default_rng(7)
    samples = rng.normal(3.0, 2.0, size=(4000, 5))
    hits, z_hits = 0, 0
    for s in samples:
        d = describe(list(s))
        hits += d["ci95"][0] <= 3.0 <= d["ci95"][1]
        z = 1.96 * d["sd"] / math.sqrt(5)
        z_hits += d["mean"] - z <= 3.0 <= d["mean"] + z
    assert abs(hits / 4000 - 0.95) < 4 * 0.0034
    assert z_hits / 4000 < 0.95 - 4 * 0.0034


def test_describe_with_one_seed_has_no_interval() -> None:
    assert describe([0.5]) == {"n": 1, "mean": 0.5, "sd": None, "ci95": None, "values": [0.5]}


def test_paired_test_matches_scipy() -> None:
    a = [0.80, 0.82, 0.79, 0.85, 0.81]
    b = [0.84, 0.83, 0.86, 0.88, 0.82]
    t = paired_test(a, b)
    assert t["n"] == 5
    assert t["mean_diff"] == pytest.approx(np.mean(np.subtract(b, a)))
    assert t["t_p"] == pytest.approx(sps.ttest_rel(b, a).pvalue)
    assert t["wilcoxon_p"] == pytest.approx(sps.wilcoxon(np.subtract(b, a)).pvalue)
    assert t["identical"] is False


def test_paired_test_of_identical_values_has_no_p() -> None:
    """A metric the axis does not move (a count): no test, flagged identical."""
    t = paired_test([3.0, 4.0], [3.0, 4.0])
    assert t["identical"] is True and t["t_p"] is None and t["wilcoxon_p"] is None


def test_one_axis_pairs_and_comparisons_pair_by_seed() -> None:
    """Points differing in two axes are not compared; the pairing is by seed, over the
    seeds both points have."""
    points = {
        0: {"eps": 1, "mech": "blip"},
        1: {"eps": 2, "mech": "blip"},
        2: {"eps": 1, "mech": "jlt"},
        3: {"eps": 2, "mech": "jlt"},
    }
    assert one_axis_pairs(points) == [("eps", 0, 1), ("mech", 0, 2), ("mech", 1, 3), ("eps", 2, 3)]
    rows = {
        0: [{"seed": 0, "m": 1.0}, {"seed": 1, "m": 2.0}, {"seed": 2, "m": 3.0}],
        1: [{"seed": 2, "m": 5.0}, {"seed": 0, "m": 2.0}],  # seed 1 missing, order shuffled
        2: [],
        3: [],
    }
    (c,) = comparisons(points, rows, ["m"])
    assert c["axis"] == "eps" and c["n"] == 2
    assert c["mean_a"] == 2.0 and c["mean_b"] == 3.5  # seeds 0 and 2 of each
    assert c["mean_diff"] == pytest.approx(1.5)
