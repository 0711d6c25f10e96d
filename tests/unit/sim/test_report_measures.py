"""Bilge's ch. 3 privacy measures in the report (`sim.report_measures`): the values are the
estimators of `shared.privacy.measures` at the run's parameters and users, and they reach the
privacy section of report.md and the summary."""

from __future__ import annotations

import math

import pytest

from privrec.shared.privacy.measures import (
    apparent_size_entropy,
    conditional_privacy,
    fake_count,
    log_exact_list_probability,
    privacy_loss_fraction,
)
from privrec.sim.report_measures import (
    exact_list_log10,
    measure_rows,
    measures_text,
    privacy_measures,
    rpt_measures,
)
from privrec.sim.report_text import markdown
from tests.run_configs import make_run_config


def test_rpt_measures_are_the_thesis_estimators_at_the_run() -> None:
    """H(S) and the exact-list probability of the median user (genuine counts 40, 50, 90 →
    50), Π(P|U) and Pr(P|U) at σ_max with Procedure 1's coin of noises."""
    m = rpt_measures({"sigma_max": 2.0, "beta_max": 25}, [40, 50, 90], 1682)
    assert m["apparent_size_entropy_bits"]["median"] == pytest.approx(
        apparent_size_entropy(50, 1682, 25)
    )
    assert m["apparent_size_entropy_bits"]["bound"] == pytest.approx(math.log2(25))
    assert m["exact_list_log10_probability"]["median"] == pytest.approx(
        exact_list_log10(50, 1682, 25)
    )
    c = m["conditional_privacy"]
    assert c["at_sigma_max"] == pytest.approx(conditional_privacy(1.0, 2.0, "mixture"))
    assert c["privacy_loss_at_sigma_max"] == pytest.approx(
        privacy_loss_fraction(1.0, 2.0, "mixture")
    )
    assert c["mean_over_sigma"] < c["at_sigma_max"]  # smaller σ, less privacy


def test_exact_list_probability_averages_the_guess_over_beta() -> None:
    """With β_max = 1 there is one β: log10 of 1/(β_max·C(g′, g)) for g′ = g + ⌊(m − g)/100⌋;
    the thesis's example (g = 50, β = 25 % of MLP) is C(458, 50) ≈ 10^67.35."""
    g, m = 50, 1682
    apparent = g + int(fake_count(m - g, 1))
    want = log_exact_list_probability(apparent, g, 1) / math.log(10)
    assert exact_list_log10(g, m, 1) == pytest.approx(want)
    at_25 = log_exact_list_probability(g + int(fake_count(m - g, 25)), g, 1) / math.log(10)
    assert at_25 == pytest.approx(-67.35, abs=0.01)


def test_measures_apply_to_rpt_and_rrt_only_and_reach_the_report() -> None:
    """RRT: θ and h2(θ); BLIP: none. report.md's privacy section and the summary carry them."""
    rrt = privacy_measures(
        make_run_config("rrt", {"theta": 0.7, "n_groups": 3, "threshold": 3.0}, 20), [], 20
    )
    assert rrt is not None and rrt["value_correct_probability"] == 0.7
    h2 = -(0.7 * math.log2(0.7) + 0.3 * math.log2(0.3))
    assert rrt["bit_entropy_bits"] == pytest.approx(h2)
    blip = make_run_config("blip", {"epsilon": 1.0, "n_bits": 64, "n_hashes": 2}, 20)
    assert privacy_measures(blip, [5], 20) is None
    rpt = make_run_config("rpt", {"sigma_max": 1.0, "beta_max": 10}, 100)
    measures = privacy_measures(rpt, [10, 20], 100)
    assert measures is not None
    report = {
        "run": {"id": "t", "seed": 0, "dataset": "d", "launcher": "inprocess", "mqtt": "none"}
        | {"start": "a", "end": "b"},
        "utility": {},
        "privacy": {
            "mechanism": "rpt",
            "public_params": {},
            "kind": "none",
            "notes": "",
            "per_user": {"reason": "none", "users": 2},
            "tiers": {"private": 2},
            "measures": measures,
        },
        "attacks": [],
        "population": {},
        "timings": {},
    }
    md = markdown(report, [])
    assert measures_text(measures) in md and "H(S) = " in md and "Π(P|U) = " in md
    # a run without attacks says so instead of an empty table
    attacks = md.split("## Attacks", 1)[1].split("## Population", 1)[0]
    assert "No attack ran" in attacks and "| attack |" not in attacks
    assert measure_rows(measures)[0][0].startswith("H(S)")
