"""The run's figures (`sim.figures`) and the plots the report writes: every metric on its own
axis beside its references, labelled, nothing clipped, tick labels apart. The checks read the
figures' matplotlib objects (axis limits, labels, text extents), and the PNGs the report wrote
are opened and matched to them; a deliberately bad figure shows the checks can fail."""

from __future__ import annotations

import functools
import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.container import BarContainer
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.text import Text
from PIL import Image

from privrec.sim.figures import (
    DPI,
    attack_headlines,
    build_figures,
    fallback_headlines,
    utility_bars,
)
from privrec.sim.referee_attacks import HEADLINES
from privrec.sim.report import (
    epsilon_histogram,
    format_value,
    guarantee,
    headline_text,
    write_report,
)

# Metrics as the referee scores them (`sim.referee_attacks`), counts included: the issue's
# attacks.png drew n_cells ≈ 100,000 and AUC on one axis.
RPT_ATTACKS = [
    {
        "name": "rpt_spectral",
        "kind": "z_hat",
        "knowledge": "disguised profiles + public σ_max, β_max",
        "metrics": {
            "rmse_z": 0.93,
            "mae_z": 0.75,
            "rmse_z_zero": 0.98,
            "n_cells": 99_000.0,
            "n_users": 943.0,
            "coverage": 1.0,
            "rmse_z_naive": 1.17,
            "mae_z_naive": 0.85,
            "rmse_reduction": 0.21,
        },
    },
    {
        "name": "rpt_fake_detection",
        "kind": "genuine_score",
        "knowledge": "disguised profiles + the RPT protocol + observed column fill counts",
        "metrics": {
            "auc": 0.86,
            "auc_baseline": 0.5,
            "auc_per_user_mean": 0.84,
            "n_genuine": 100_000.0,
            "n_fake": 192_597.0,
            "top_g_precision": 0.76,
            "top_g_precision_chance": 0.46,
            "exact_list_rate": 0.046,
        },
    },
]
RATING_HAT = {
    "name": "second_order_reconstruction",
    "kind": "rating_hat",
    "knowledge": "private releases + public users' ratings",
    "metrics": {
        "rmse": 0.99,
        "mae": 0.8,
        "rmse_mu": 1.04,
        "mae_mu": 0.85,
        "rmse_best_global_sign": 0.9,
        "sign_accuracy": 0.58,
        "sign_accuracy_mu": 0.55,
        "sign_accuracy_chance": 0.5,
        "sign_accuracy_global": 0.7,
        "sign_accuracy_global_mu": 0.6,
        "sign_accuracy_global_chance": 0.56,
        "n_cells": 80_000.0,
        "n_users": 843.0,
        "coverage": 1.0,
        "rmse_permuted": 1.2,
        "sign_accuracy_global_permuted": 0.66,
    },
}


def report(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "run": {"id": "t-s0", "seed": 0, "dataset": "ml-100k", "launcher": "inprocess"},
        "privacy": {
            "mechanism": "rpt",
            "kind": "none",
            "epsilon": None,
            "per_user": {"kind": "none", "epsilon": None, "reason": "no claim", "users": 943},
        },
        "utility": {
            "ppcf_mae": 0.785,
            "ppcf_rmse": 1.0,
            "ppcf_mae_unclipped": 0.786,
            "ppcf_predictions": 4715.0,
            "ppcf_coverage": 1.0,
            "baseline_pearson_knn_mae": 0.76,
            "baseline_pearson_knn_rmse": 0.97,
        },
        "attacks": RPT_ATTACKS,
        "timings": {"load": 0.1},
    }
    return base | overrides


DP_PRIVACY = {
    "mechanism": "blip",
    "kind": "pure",
    "epsilon": 8.0,
    "delta": 0.0,
    "neighbouring": "add/remove one item",
    "per_user": {
        "kind": "pure",
        "epsilon_per_release": 8.0,
        "delta": 1e-6,
        "per_user_epsilon": {"max": 16.0, "median": 8.0},
        "users": 943,
        "histogram": {"values": [8.0, 16.0], "counts": [900, 43]},
    },
    "model": {
        "model": "dp_mf",
        "kind": "approximate",
        "epsilon": 1.0,
        "delta": 1e-6,
        "guarantee": "output privacy against other users and observers",
        "per_user": {
            "kind": "approximate",
            "delta": 1e-6,
            "per_user_epsilon": {"max": 3.0, "median": 1.5},
            "users": 943,
            "histogram": {
                "edges": [float(e) / 10 for e in range(10, 31, 4)],
                "counts": [5, 9, 400, 2, 1],
            },
        },
    },
}

SCENARIOS = {
    "rpt": report(),
    "graph": report(
        utility={"recall_at_10": 0.31, "recall_at_10_chance": 0.0106},
        privacy=DP_PRIVACY,
        attacks=[],
    ),
    "two_tier": report(
        utility={
            "two_tier_lowrank_mae": 0.78,
            "two_tier_lowrank_rmse": 0.98,
            "two_tier_lowrank_mae_unclipped": 0.79,
            "two_tier_lowrank_predictions": 4215.0,
            "two_tier_lowrank_mae_public_model_only": 0.8,
            "two_tier_lowrank_rmse_public_model_only": 1.0,
            "baseline_all_public_mae": 0.75,
            "baseline_all_public_rmse": 0.95,
        },
        attacks=[RATING_HAT],
        curves={
            "utility_by_private_users": {
                "private_users": [0.0, 20.0, 40.0, 843.0],
                "rmse": [1.0, 0.99, 0.985, 0.98],
                "mae": [0.8, 0.79, 0.785, 0.78],
            }
        },
    ),
    "unknown_kind": report(
        attacks=[
            {
                "name": "membership",
                "kind": "membership_score",
                "knowledge": "released sketches",
                "metrics": {
                    "advantage": 0.12,
                    "advantage_chance": 0.0,
                    "tpr_at_fpr_01": 0.3,
                    "n_users": 943.0,
                },
            }
        ]
    ),
}


@functools.cache
def figures_of(scenario: str) -> dict[str, Figure]:
    """The scenario's figures, built once for the module (drawing is the slow part)."""
    return build_figures(SCENARIOS[scenario])


# --------------------------------------------------------------------------------- checks
def _bars(ax: Axes) -> list[Rectangle]:
    """The horizontal bars of `ax` (the figures draw every bar chart horizontally)."""
    return [p for p in ax.patches if isinstance(p, Rectangle) and p.get_width() != 0]


def legibility_problems(fig: Figure) -> list[str]:
    """What a reader could not read in `fig` (empty when it is legible)."""
    problems = []
    agg = FigureCanvasAgg(fig)
    agg.draw()
    renderer = agg.get_renderer()
    canvas = fig.bbox
    ticks_of = {
        id(t)
        for ax in fig.get_axes()
        for t in ax.get_xticklabels(which="both") + ax.get_yticklabels(which="both")
    }
    texts = [
        t
        for t in fig.findobj(lambda a: hasattr(a, "get_text"))
        if t.get_visible() and id(t) not in ticks_of
    ]
    for ax in fig.get_axes():  # tick labels: of visible axes, ticks inside the view
        if not ax.get_visible():
            continue
        lo_x, hi_x = sorted(ax.get_xlim())
        lo_y, hi_y = sorted(ax.get_ylim())
        texts += [
            t
            for loc, t in zip(ax.get_xticks(), ax.get_xticklabels(), strict=True)
            if lo_x - 1e-9 <= loc <= hi_x + 1e-9
        ]
        texts += [
            t
            for loc, t in zip(ax.get_yticks(), ax.get_yticklabels(), strict=True)
            if lo_y - 1e-9 <= loc <= hi_y + 1e-9
        ]
    for text in texts:
        if not text.get_text().strip():
            continue
        box = text.get_window_extent(renderer)
        if box.x0 < -1 or box.y0 < -1 or box.x1 > canvas.x1 + 1 or box.y1 > canvas.y1 + 1:
            problems.append(f"text {text.get_text()!r} is clipped by the canvas")
    for ax in fig.get_axes():
        if not ax.get_visible():
            continue
        if not (ax.get_xlabel() or ax.get_ylabel()):
            problems.append("an axis without a label")
        ticks = [t for t in ax.get_xticklabels() + ax.get_yticklabels() if t.get_text()]
        boxes = [t.get_window_extent(renderer) for t in ticks]
        for (a, ta), (b, tb) in itertools.combinations(zip(boxes, ticks, strict=True), 2):
            if a.overlaps(b) and a.intersection(a, b).width > 1 and a.intersection(a, b).height > 1:
                problems.append(f"tick labels {ta.get_text()!r} and {tb.get_text()!r} overlap")
        for container in ax.containers:
            if not isinstance(container, BarContainer):
                continue
            horizontal = container.orientation == "horizontal"
            lo, hi = ax.get_xlim() if horizontal else ax.get_ylim()
            ends = [
                (r.get_x() + r.get_width()) if horizontal else (r.get_y() + r.get_height())
                for r in container.patches
            ]
            lengths = [abs(r.get_width() if horizontal else r.get_height()) for r in container]
            for end in ends:
                if not lo - 1e-9 <= end <= hi + 1e-9:
                    problems.append(f"bar ending at {end} outside the axis [{lo}, {hi}]")
            unit = lo == 0.0 and hi <= 1.3  # a probability on [0, 1], room for the values
            if max(lengths) < 0.3 * (hi - lo) and not unit:
                problems.append(f"longest bar {max(lengths)} spans < 30 % of [{lo}, {hi}]")
            nonzero = [x for x in lengths if x > 0]
            hidden = [x for x in nonzero if x < 0.005 * (hi - lo)]
            if hidden and max(nonzero) > 1000 * min(nonzero):
                problems.append("a bar is invisible beside a count on the same axis")
    return problems


def bad_figure() -> Figure:
    """The issue's attacks.png: counts and scores on one axis, overlapping metric names."""
    fig = Figure(figsize=(3, 2))
    ax = fig.subplots()
    m = RPT_ATTACKS[1]["metrics"]
    ax.bar(list(m), list(m.values()))
    ax.set_title("a title far too long for this small figure, so it is clipped at both ends")
    return fig


# --------------------------------------------------------------------------------- tests
def test_the_legibility_check_rejects_the_issue_figure() -> None:
    """The checks below can fail: the old one-axis figure is flagged on every count."""
    problems = legibility_problems(bad_figure())
    assert any("clipped" in p for p in problems)
    assert any("invisible" in p for p in problems)
    assert any("overlap" in p for p in problems)
    assert any("without a label" in p for p in problems)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_every_figure_is_legible(scenario: str) -> None:
    """No text clipped, every axis labelled, tick labels apart, bars visible on their axis."""
    figures = figures_of(scenario)
    assert figures
    for name, fig in figures.items():
        assert fig.get_suptitle() or any(ax.get_title() for ax in fig.get_axes()), name
        assert legibility_problems(fig) == [], name


def test_each_run_kind_draws_the_figures_a_paper_would() -> None:
    """Utility for every run; attacks when there are attacks; per-user ε when a ledger
    states it; the curve when the run has one."""
    assert set(figures_of("rpt")) == {"utility", "attacks"}
    assert set(figures_of("graph")) == {"utility", "epsilon"}
    assert set(figures_of("two_tier")) == {
        "utility",
        "attacks",
        "rmse_by_private_users",
    }


def test_utility_panels_put_each_metric_beside_its_reference() -> None:
    """One panel per metric family; the model first, its variants, the non-private reference;
    counts and coverage left to the tables; recall beside chance on [0, 1]."""
    panels = utility_bars(SCENARIOS["rpt"]["utility"])
    assert list(panels) == ["MAE", "RMSE"]
    assert panels["MAE"][1] == [
        ("ppcf", 0.785, "model"),
        ("ppcf (unclipped)", 0.786, "variant"),
        ("non-private: pearson knn", 0.76, "reference"),
    ]
    assert all(v < 2 for _, bars, _ in panels.values() for _, v, _ in bars)
    two = utility_bars(SCENARIOS["two_tier"]["utility"])
    assert ("two tier lowrank (public model only)", 1.0, "variant") in two["RMSE"][1]
    assert ("non-private: all public", 0.95, "reference") in two["RMSE"][1]
    graph = utility_bars(SCENARIOS["graph"]["utility"])
    assert graph == {
        "recall@10": (
            "recall@10 (higher is better)",
            [("this run", 0.31, "model"), ("chance", 0.0106, "chance")],
            True,
        )
    }
    fig = figures_of("graph")["utility"]
    assert fig.get_suptitle().startswith("Utility of")  # a graph's recall is no rating error
    assert figures_of("rpt")["utility"].get_suptitle().startswith("Rating error of")
    (ax,) = fig.get_axes()
    assert ax.get_xlim()[0] == 0.0 and 1.0 <= ax.get_xlim()[1] <= 1.3
    assert ax.get_xlabel() == "recall@10 (higher is better)"


def test_attack_panels_draw_headlines_beside_baselines_never_counts() -> None:
    """Each attack's row holds its declared headlines, the attack's bar first, then each
    reference; no axis carries a count; AUC and rates on [0, 1]."""
    fig = figures_of("rpt")["attacks"]
    axes = [ax for ax in fig.get_axes() if ax.get_visible()]
    labels = [ax.get_xlabel().replace("\n", " ") for ax in axes]
    assert labels == [
        "RMSE of ẑ on genuine cells (lower is better)",
        "MAE of ẑ on genuine cells (lower is better)",
        "ROC AUC, genuine vs fake cells (higher is better)",
        "precision of each user's top-g cells (higher is better)",
        "users whose genuine list is exact (higher is better)",
    ]
    rmse = axes[0]
    assert [t.get_text() for t in rmse.get_yticklabels()] == [
        "attack",
        "naive ẑ = z′",
        "know-nothing ẑ = 0",
    ]
    assert [round(b.get_width(), 6) for b in _bars(rmse)] == [0.93, 1.17, 0.98]
    auc = axes[2]
    assert auc.get_xlim() == pytest.approx((0.0, 1.28))
    assert max(t for t in auc.get_xticks()) == 1.0
    for ax in axes:
        assert max(b.get_width() for b in _bars(ax)) < 2.0  # no count on any axis
    subtitles = [s.get_suptitle() for s in fig.subfigs]
    assert subtitles[0].startswith("rpt_spectral") and "σ_max" in subtitles[0]


def _item_set_metrics() -> dict[str, float]:
    """What the referee's item-set scorer writes, on a two-user case."""
    from privrec.adversary.attacks.base import AttackOutput, UserEstimate
    from privrec.sim.referee_attacks import score_attack

    est = UserEstimate(np.arange(6, dtype=np.int64), np.arange(6, 0, -1, dtype=np.float64))
    out = AttackOutput("x", "item_set", "test", {"a": est, "b": est}, set_sizes={"a": 2, "b": 3})
    truth = {u: (np.array([0, 2, 4]), np.ones(3)) for u in ("a", "b")}
    return score_attack("x", out, truth, n_items=6)


def _item_hat_metrics() -> dict[str, float]:
    """What the referee's kNN-item scorer writes (`knn_sybil`), on one target who knew two of
    her six items."""
    from privrec.adversary.attacks.base import AttackOutput, UserEstimate
    from privrec.adversary.knowledge import AdversaryKnowledge, KnownProfile
    from privrec.sim.referee_attacks import score_attack
    from tests.run_configs import make_run_config

    truth = {"1": (np.arange(6), np.ones(6)), "2": (np.array([2, 3, 7]), np.ones(3))}
    known = AdversaryKnowledge(targets=(KnownProfile("1", np.array([0, 1]), np.ones(2)),))
    est = UserEstimate(np.array([2, 3, 9], dtype=np.int64), np.array([1.0, 0.8, 0.9]))
    out = AttackOutput("x", "item_hat", "test", {"1": est})
    rc = make_run_config("rpt", {"sigma_max": 1.0, "beta_max": 0}, 10)
    return score_attack("x", out, truth, run_config=rc, knowledge=known)


def test_knn_sybil_draws_popularity_and_chance_beside_the_attack() -> None:
    """Regression: #25 `knn_sybil`'s report.json held precision_at_10_popularity = 0.38 (the
    popularity guess beat the attack's 0.34) and precision_chance, but neither was drawn nor in
    the summary's "beside" column. Now each precision panel of the attack figure carries the
    popularity bar and the chance bar, and the summary line names both."""
    metrics = _item_hat_metrics() | {"precision_at_10": 0.34, "precision_at_10_popularity": 0.38}
    attack = {"name": "knn_sybil", "kind": "item_hat", "knowledge": "k", "metrics": metrics}
    fig = build_figures(report(attacks=[attack]))["attacks"]
    drawn = [
        (ax.get_xlabel(), [t.get_text() for t in ax.get_yticklabels()])
        for ax in fig.get_axes()
        if ax.get_visible()
    ]
    precision = [labels for xlabel, labels in drawn if xlabel.startswith("precision of the top")]
    assert precision == [["attack", "10 most popular items", "chance: unknown items at random"]]
    assert legibility_problems(fig) == []
    assert "10 most popular items 0.38" in headline_text(attack)
    assert "chance: unknown items at random" in headline_text(attack)


MEMBERSHIP_METRICS = {
    "auc": 0.518,
    "kld": 0.00076,
    "loss_members": 1.000,
    "loss_non_members": 1.055,
    "n_members": 100.0,
    "n_non_members": 100.0,
    "auc_chance": 0.5,
    "kld_no_leak": 0.0,
}
"""What `sim.referee_inference.score_membership` writes (values of a real knn_sybil run)."""


def test_membership_draws_auc_beside_chance_and_the_two_losses_on_one_axis() -> None:
    """Regression: the membership row of knn_sybil's attacks.png was drawn by the fallback:
    four one-bar panels, the members' and non-members' losses on separate
    axes with separate scales (so their difference, the attack's signal, could not be read)
    and the KL measure on an axis of 0.0008. Now: AUC beside chance, the members' loss beside
    the non-members' on one axis, the KL beside its no-leak 0."""
    attack = {
        "name": "membership_inference",
        "kind": "membership",
        "knowledge": "k",
        "metrics": MEMBERSHIP_METRICS,
    }
    fig = build_figures(report(attacks=[attack]))["attacks"]
    drawn = {
        " ".join(ax.get_xlabel().split()).rsplit(" (", 1)[0]: [
            t.get_text() for t in ax.get_yticklabels()
        ]
        for ax in fig.get_axes()
        if ax.get_visible() and ax.containers
    }
    assert drawn["ROC AUC of the loss classifier, members vs not"] == ["attack", "chance"]
    assert drawn["mean squared error of r̂ on members"] == ["attack", "on non-members"]
    assert len(drawn) == 3
    assert legibility_problems(fig) == []
    assert "loss_members 1 (on non-members 1.05)" in headline_text(attack)


PPNBC_UTILITY = {
    "ppnbc_ca": 0.71,
    "ppnbc_precision": 0.74,
    "ppnbc_recall": 0.82,
    "ppnbc_f1": 0.78,
    "ppnbc_predictions": 4715.0,
    "ppnbc_coverage": 1.0,
    "baseline_nbc_ca": 0.72,
    "baseline_nbc_precision": 0.75,
    "baseline_nbc_recall": 0.83,
    "baseline_nbc_f1": 0.79,
}


def _drawn_bars(fig: Figure) -> list[tuple[str, str, float]]:
    """(panel title, bar label, value) of every bar of `fig`."""
    out = []
    for ax in fig.get_axes():
        if not ax.get_visible() or not ax.containers:
            continue
        labels = [t.get_text() for t in ax.get_yticklabels()]
        values = [float(v) for v in ax.containers[0].datavalues]
        out += [(ax.get_title(), lab, v) for lab, v in zip(labels, values, strict=True)]
    return out


def test_ppnbc_utility_is_one_classification_figure_with_labelled_references() -> None:
    """Regression: #25 `ppnbc`'s utility.png was a 3,828 × 266 px strip of eight one-bar
    panels, and the non-private baseline's panels labelled their bar "ppnbc". Now CA,
    precision, recall and F1 are four panels of one figure, each with the classifier's bar
    and the baseline's bar labelled as the non-private counterpart, and no utility figure is
    a strip."""
    figures = build_figures(report(run={"id": "t", "model": "ppnbc"}, utility=PPNBC_UTILITY))
    utility = {name: fig for name, fig in figures.items() if name.startswith("utility")}
    bars = [bar for fig in utility.values() for bar in _drawn_bars(fig)]
    for key, value in PPNBC_UTILITY.items():
        if key.startswith("baseline_"):
            assert {lab for _, lab, v in bars if v == value} == {"non-private: nbc"}, key
    panels: dict[str, list[str]] = {}
    for title, label, _ in bars:
        panels.setdefault(title, []).append(label)
    assert all(labels == ["ppnbc", "non-private: nbc"] for labels in panels.values())
    assert len(panels) == 4
    for fig in utility.values():
        width, height = fig.get_size_inches()
        assert width <= 4 * height, (width, height)
        assert legibility_problems(fig) == []


def test_epsilon_figure_says_what_was_composed_and_at_which_delta() -> None:
    """Regression: #25 epsilon.png showed a per-user median of 7.97 for a mechanism configured
    at ε = 8, with no word on why. The figure now says what each user's ε composes (one
    profile release of ε = 8, pure DP), by which accountant, at which δ, and why one pure
    release reads below its ε there."""
    per_user = {
        "kind": "pure",
        "epsilon_per_release": 8.0,
        "delta": 1e-6,
        "per_user_epsilon": {"max": 7.97, "median": 7.97},
        "accountant": "pld",
        "users": 943,
        "histogram": {"values": [7.97], "counts": [943]},
        "composed": {"profile": {"median": 1.0, "max": 1.0, "users": 943.0}},
    }
    privacy = {"mechanism": "blip", "kind": "pure", "epsilon": 8.0, "per_user": per_user}
    fig = build_figures(report(privacy=privacy, attacks=[]))["epsilon"]
    text = " ".join(t.get_text() for t in fig.findobj(Text)).replace("\n", " ")
    for needle in ("1 profile release", "ε = 8 each, pure DP", "PLD accountant", "δ = 1e-06"):
        assert needle in text, needle
    assert "below 8 because at δ > 0" in text
    assert legibility_problems(fig) == []


def test_every_declared_kind_names_metrics_its_scorer_emits() -> None:
    """The declarations match the scorers: each headline and reference of every kind is a
    metric the referee writes (fixtures above hold every key the scorers emit; the item-set
    keys come from the scorer itself)."""
    emitted = {
        "z_hat": RPT_ATTACKS[0]["metrics"],
        "genuine_score": RPT_ATTACKS[1]["metrics"],
        "rating_hat": RATING_HAT["metrics"],
        "item_set": _item_set_metrics(),
        "item_hat": _item_hat_metrics(),
        "membership": MEMBERSHIP_METRICS,
    }
    assert set(HEADLINES) == set(emitted)
    for kind, heads in HEADLINES.items():
        for h in heads:
            assert h.metric in emitted[kind], (kind, h.metric)
            for key, _ in h.references:
                assert key in emitted[kind], (kind, key)
        assert attack_headlines(kind, emitted[kind]) == heads


def test_an_undeclared_kind_falls_back_to_non_count_metrics() -> None:
    """A new output kind without a declaration still gets a readable figure: each non-count
    metric beside the keys that extend its name with a reference word."""
    metrics = SCENARIOS["unknown_kind"]["attacks"][0]["metrics"]
    heads = fallback_headlines(metrics)
    assert [h.metric for h in heads] == ["advantage", "tpr_at_fpr_01"]
    assert heads[0].references == (("advantage_chance", "chance"),)
    assert attack_headlines("membership_score", metrics) == heads
    assert attack_headlines(None, metrics) == heads


def test_epsilon_figure_draws_each_ledger_histogram() -> None:
    """The mechanism's and the model's per-user ε, counts of users on the y axis."""
    fig = figures_of("graph")["epsilon"]
    axes = fig.get_axes()
    assert len(axes) == 2
    assert axes[0].get_xlabel().startswith("composed ε per user")
    assert axes[0].get_ylabel() == "users"
    heights = sorted(round(b.get_height()) for b in axes[0].patches)
    assert heights == [43, 900]
    lo, hi = axes[0].get_xlim()
    assert lo <= 8.0 and hi >= 16.0 and axes[0].get_ylim()[1] >= 900
    assert "median 8, max 16" in axes[0].get_title()


def test_epsilon_histogram_is_exact_for_few_values_and_binned_for_many() -> None:
    """Few distinct ε: each value with its count; many: 20 equal bins that count everyone."""
    assert epsilon_histogram([1.0, 2.0, 1.0]) == {"values": [1.0, 2.0], "counts": [2, 1]}
    many = epsilon_histogram([i / 10 for i in range(100)])
    assert len(many["edges"]) == 21 and sum(many["counts"]) == 100
    assert many["edges"][0] == 0.0 and many["edges"][-1] == pytest.approx(9.9)


def test_report_writes_each_figure_as_a_png(tmp_path: Path) -> None:
    """The report saves exactly the built figures; each PNG opens, has the figure's size at
    the report's dpi and carries its title; report.md embeds each."""
    rep = SCENARIOS["two_tier"] | {
        "run": {
            "id": "t-s0",
            "seed": 0,
            "dataset": "synthetic",
            "launcher": "inprocess",
            "mqtt": "none",
            "start": "a",
            "end": "b",
        },
        "population": {"users": 10, "enrolled": 10, "releases_rejected": None},
    }
    rep["privacy"] = rep["privacy"] | {"public_params": {}, "notes": "", "tiers": {"private": 10}}
    figures = build_figures(rep)
    plots = write_report(tmp_path, json.loads(json.dumps(rep)))
    assert sorted(plots) == sorted(f"plots/{n}.png" for n in figures)
    md = (tmp_path / "report.md").read_text()
    for name, fig in figures.items():
        with Image.open(tmp_path / "plots" / f"{name}.png") as png:
            width, height = png.size
            assert png.format == "PNG"
            assert png.text.get("Title") == (fig.get_suptitle() or name)
        assert (width, height) == pytest.approx(
            (fig.get_figwidth() * DPI, fig.get_figheight() * DPI), abs=2
        )
        assert f"![{name}](plots/{name}.png)" in md
    assert "| releases_rejected | n/a |" in md
    assert "report.plots" in json.loads((tmp_path / "report.json").read_text())["timings"]


def test_counts_print_as_integers_and_no_claim_reads_as_words() -> None:
    """Regression: #14 printed `ppcf_predictions 4715.0000` and the privacy row `rpt (none)`."""
    assert format_value("ppcf_predictions", 4715.0) == "4715"
    assert format_value("n_fake", 192597.0) == "192597"
    assert format_value("rmse_z_zero", 1.0) == "1.0000"
    assert format_value("auc", 0.5) == "0.5000"
    assert guarantee(SCENARIOS["rpt"]["privacy"]) == "no formal DP guarantee"
    assert guarantee({"kind": "element-wise", "epsilon": None}).startswith("element-wise")
    assert guarantee(DP_PRIVACY).startswith("ε = 8 (pure DP")
