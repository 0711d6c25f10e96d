"""The utility figures: one per metric family, the model beside its non-private counterpart
and the trivial predictors on every axis.

* ``utility`` — rating error (MAE, RMSE; and any metric of no family, such as a published
  neighbour graph's recall@10 beside chance): the model, its variants (unclipped, public
  model only), its non-private counterpart and the global, user and item means;
* ``utility_ranking`` — precision, recall, NDCG, HR, MRR, coverage and ARP at each K: the
  model, its counterpart and the popularity ranking;
* ``utility_classification`` — CA, precision, recall and F1 of "like": the classifier, its
  unmasked counterpart and the trivial majority votes.

Keys are read by `sim.utility_keys`; each figure puts every metric on its own axis, at most
`COLUMNS` axes a row, so that no family becomes a strip of one-bar panels.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from matplotlib.figure import Figure

from privrec.sim.figures_base import Bar, barh, finite
from privrec.sim.utility_keys import (
    CLASSIFICATION,
    METRICS,
    OTHER,
    RANKING,
    RATING,
    ROLES,
    parse_utility_key,
)

COLUMNS = 4
"""Most axes in one row of a utility figure."""

FIGURE_FAMILIES: dict[str, tuple[str, ...]] = {
    "utility": (RATING, OTHER),
    "utility_ranking": (RANKING,),
    "utility_classification": (CLASSIFICATION,),
}
"""Figure name → the families it draws."""

_BESIDE = {
    "variant": "its variants",
    "reference": "its non-private counterpart",
    "trivial": "the trivial predictors",
    "chance": "chance",
}
Panels = dict[str, tuple[str, list[Bar], bool]]


def utility_bars(
    utility: Mapping[str, Any], model: str = "this run", families: tuple[str, ...] = (RATING, OTHER)
) -> Panels:
    """Group the utility metrics of `families` into panels: title → (x label, bars, unit
    interval), each panel's bars in the order model, variants, reference, trivial, chance.

    Counts and neighbour coverage are left to the tables; a metric that names no model
    (``recall_at_10``) is labelled `model`.
    """
    panels: Panels = {}
    keys = [
        (parsed, float(value))
        for key, value in utility.items()
        if finite(value) and (parsed := parse_utility_key(key)) and parsed.family in families
    ]
    # panels by K, then in the order of METRICS (MAE before RMSE, precision before NDCG)
    rank = {name: i for i, name in enumerate(METRICS)}
    keys.sort(key=lambda kv: (kv[0].k or 0, rank.get(kv[0].metric, len(rank))))
    for parsed, value in keys:
        better = f" ({parsed.better})" if parsed.better else ""
        panel = panels.setdefault(parsed.panel, (parsed.panel + better, [], parsed.unit_interval))
        panel[1].append((parsed.label(model), value, parsed.role))
    for _, bars, _ in panels.values():
        bars.sort(key=lambda b: ROLES.index(b[2]))
    return panels


def family_figure(report: Mapping[str, Any], families: tuple[str, ...], what: str) -> Figure | None:
    """Each metric of `families` on its own axis (at most `COLUMNS` a row), beside the
    references the report has for it; None when the run has none of these metrics."""
    model = report.get("run", {}).get("model", "the model")
    panels = utility_bars(report.get("utility", {}), model, families)
    if not panels:
        return None
    # each cut-off K starts a row of its own (panel titles end in "@K"; other panels, "")
    groups: dict[str, list[str]] = {}
    for title in panels:
        groups.setdefault(title.rpartition("@")[2] if "@" in title else "", []).append(title)
    # near-square: a few panels two by two, never a strip of one-bar panels
    n_cols = min(
        COLUMNS, max(len(g) for g in groups.values()), max(2, math.isqrt(len(panels) - 1) + 1)
    )
    slots = [row for g in groups.values() for row in _rows(g, n_cols)]
    bars_per_panel = max(len(bars) for _, bars, _ in panels.values())
    row_height = 1.15 + 0.34 * bars_per_panel
    fig = Figure(figsize=(4.2 * n_cols + 1.2, row_height * len(slots) + 0.8), layout="constrained")
    axes = fig.subplots(len(slots), n_cols, squeeze=False)
    for ax_row, titles in zip(axes, slots, strict=True):
        for ax, title in zip(ax_row, titles, strict=False):
            xlabel, bars, unit = panels[title]
            barh(ax, bars, xlabel, unit_interval=unit)
            ax.set_title(title)
        for ax in ax_row[len(titles) :]:
            ax.set_visible(False)
    roles = {role for _, bars, _ in panels.values() for _, _, role in bars}
    beside = [text for role, text in _BESIDE.items() if role in roles]
    mechanism = report.get("privacy", {}).get("mechanism", "?")
    fig.suptitle(
        f"{what} of {model} on {mechanism} releases"
        + (f", beside {', '.join(beside[:-1])} and {beside[-1]}" if len(beside) > 1 else "")
        + (f", beside {beside[0]}" if len(beside) == 1 else "")
    )
    return fig


def _rows(titles: list[str], n_cols: int) -> list[list[str]]:
    return [titles[i : i + n_cols] for i in range(0, len(titles), n_cols)]


def utility_figure(report: Mapping[str, Any]) -> Figure | None:
    """Rating error (and metrics of no family), model beside its references; titled "Rating
    error" only when it draws one (a published neighbour graph's recall is "Utility")."""
    model = report.get("run", {}).get("model", "the model")
    rating = utility_bars(report.get("utility", {}), model, (RATING,))
    what = "Rating error" if rating else "Utility"
    return family_figure(report, FIGURE_FAMILIES["utility"], what)


def ranking_figure(report: Mapping[str, Any]) -> Figure | None:
    """The ranking metrics at each K, model beside its counterpart and popularity."""
    return family_figure(report, FIGURE_FAMILIES["utility_ranking"], "Top-K ranking")


def classification_figure(report: Mapping[str, Any]) -> Figure | None:
    """Like/dislike classification, classifier beside its counterpart and majority votes."""
    return family_figure(report, FIGURE_FAMILIES["utility_classification"], "Classification")


__all__ = [
    "FIGURE_FAMILIES",
    "classification_figure",
    "family_figure",
    "ranking_figure",
    "utility_bars",
    "utility_figure",
]
