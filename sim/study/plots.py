"""A study's figures, as a paper would print them (`RUN_DIR/plots/`).

* ``utility_vs_<axis>`` (the first metric family, rating error) and ``utility_<family>_vs_<axis>``
  (ranking, classification): for each numeric axis, one panel per utility headline: the mean
  over seeds against the axis, one line per value of the other axes, the 95 % t interval as a
  band; the non-private counterpart and the trivial predictors dashed, chance dotted.
* ``attacks_vs_<axis>``: the same for each attack's headline metrics, beside their free
  baselines and chance levels (an attack that does no better than those has learnt nothing).
* ``tradeoff``: the frontier: each utility headline against each attack headline and against
  the median per-user composed ε, one curve per value of the non-numeric axes (per mechanism),
  its points in the order of the numeric axis and labelled with its value; error bars are the
  95 % intervals in both directions.

Axes are labelled with their units (`axis_label`); ε, and any axis spanning two orders of
magnitude, is drawn on a log scale.
"""

from __future__ import annotations

import dataclasses
import math
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from privrec.sim.study.metrics import Headline, is_number
from privrec.sim.study.spec import Axis

Stats = Mapping[int, Mapping[str, Mapping[str, Any]]]
"""point → column → `sim.study.stats.describe`."""

AXIS_LABELS = {
    "mechanism.params.epsilon": "ε per release (privacy budget)",
    "mechanism.params.delta": "δ",
    "mechanism.params.sigma_max": "σ_max (largest noise s.d., z-score units)",
    "mechanism.params.beta_max": "β_max (largest share of empty cells filled, %)",
    "mechanism.params.theta": "θ (RRT: probability of a true group answer)",
    "mechanism.params.n_groups": "M (RRT: item groups)",
    "mechanism.params.n_bits": "Bloom filter bits",
    "mechanism.params.n_hashes": "hash functions",
    "mechanism.params.dim": "projection dimension",
    "model.k": "k (neighbours, or the model's rank)",
    "data.max_users": "users in the run",
    "data.synthetic_users": "synthetic users",
    "adversary.auxiliary_users": "users whose profiles the adversary holds",
}
"""Known axes with their units; any other axis is labelled with its key."""
UTILITY_UNITS = {"MAE": "rating scale", "RMSE": "rating scale"}
LOG_SPAN = 10.0  # two values this far apart (a ratio) are drawn on a log axis
DPI = 110
SERIES_COLORS = ("#3572b0", "#b03535", "#3a8a3a", "#8a5bb0", "#c07a1a", "#2a9a9a", "#555555")


def axis_label(key: str) -> str:
    """The label of axis `key`, with its unit."""
    return AXIS_LABELS.get(key, key)


def metric_label(head: Headline, width: int = 40) -> str:
    """The metric's axis label with its unit and which way is better, wrapped."""
    unit = UTILITY_UNITS.get(head.label)
    extra = ", ".join(x for x in (unit, head.better) if x)
    return "\n".join(textwrap.wrap(f"{head.label} ({extra})" if extra else head.label, width))


def panel_title(head: Headline) -> str:
    """Whose figure a panel shows: "utility of ppcf", the attack's name, or the ε."""
    if head.section == "utility":
        return f"utility of {head.owner}" if head.owner else "utility"
    return head.owner or head.label


def _reference_style(label: str, n: int) -> dict[str, Any]:
    """Chance dotted; the other references dashed, each its own dash and grey."""
    if "chance" in label:
        return {"linestyle": ":", "color": "#333333", "linewidth": 1.2}
    dashes = ("--", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 2)), (0, (8, 2)))
    greys = ("#555555", "#8c8c8c", "#3a3a3a", "#a8a8a8", "#707070")
    return {"linestyle": dashes[n % 5], "color": greys[n % 5], "linewidth": 1.2}


def numeric_axes(axes: Sequence[Axis]) -> list[Axis]:
    """The axes with at least two values, all numbers: they can be an x axis."""
    return [a for a in axes if len(a.values) > 1 and all(is_number(v) for v in a.values)]


def use_log(key: str, values: Sequence[Any]) -> bool:
    """ε always; otherwise positive values spaced more evenly in log than in linear terms
    (0.25, 0.5, 1, 2, 4), or two values `LOG_SPAN` apart or more."""
    xs = sorted(float(v) for v in values if is_number(v))
    if not xs or xs[0] <= 0:
        return False
    if "epsilon" in key:
        return True
    if len(xs) < 3:
        return xs[-1] / xs[0] >= LOG_SPAN
    diffs = np.diff(xs)
    logs = np.diff(np.log(xs))
    return bool(np.std(logs) / np.mean(logs) < np.std(diffs) / np.mean(diffs))


def _mean(stats: Stats, point: int, column: str) -> float | None:
    entry = stats.get(point, {}).get(column)
    mean = entry.get("mean") if entry else None
    return float(mean) if mean is not None and math.isfinite(mean) else None


def _series(
    points: Mapping[int, Mapping[str, Any]], x_key: str
) -> dict[str, list[tuple[float, int]]]:
    """label of the other axes' values → [(x, point)] sorted by x."""
    out: dict[str, list[tuple[float, int]]] = {}
    for i, values in points.items():
        others = ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in values.items() if k != x_key)
        out.setdefault(others, []).append((float(values[x_key]), i))
    return {k: sorted(v) for k, v in out.items()}


def _grid(n: int, width: float = 4.4, height: float = 3.4) -> tuple[Figure, list[Axes]]:
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig = Figure(figsize=(width * cols + 0.6, height * rows + 0.7))
    axes = list(fig.subplots(rows, cols, squeeze=False).ravel())
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


LINE_IN = 0.19
"""One line of a 10-pt label with matplotlib's 1.2 line spacing and its pad, in inches."""
TICK_CHAR_IN = 0.09
"""The widest character of a 10-pt tick label (a DejaVu Sans digit is 0.64 em), in inches."""


def _lines(text: str) -> int:
    return text.count("\n") + 1 if text else 0


def _tick_chars(ax: Axes) -> int:
    """The longest y tick label of `ax`, in characters (its ticks as they will be drawn)."""
    low, high = sorted(ax.get_ylim())
    locs = [v for v in ax.yaxis.get_majorticklocs() if low <= v <= high]
    return max((len(t) for t in ax.yaxis.get_major_formatter().format_ticks(locs)), default=1)


def fit(fig: Figure, panels: Sequence[Axes]) -> None:
    """Place the panels of a `_grid` figure with room for their labels, measured from the
    labels themselves: the lines of the axis labels and titles and the longest y tick label.

    Figures are laid out here rather than by matplotlib's constrained layout, which measures
    every artist of every panel (twice) before the figure is drawn: ≈ 40 % of the drawing
    time of a study's figures (1.45 → 0.9 s of CPU for the 14-panel ranking figure of
    bench/sweep.py), the last thing a study waits for (docs/decisions/studies.md).
    """
    width, height = fig.get_size_inches()
    gs = panels[0].get_gridspec()
    assert gs is not None
    rows, cols = gs.get_geometry()
    y_room = 0.12 + max(
        LINE_IN * _lines(ax.get_ylabel()) + TICK_CHAR_IN * _tick_chars(ax) for ax in panels
    )
    x_room = 0.12 + 0.22 + LINE_IN * max(_lines(ax.get_xlabel()) for ax in panels)
    title_room = 0.1 + LINE_IN * max(_lines(ax.get_title()) for ax in panels)
    suptitle = fig.get_suptitle()
    # matplotlib puts the suptitle's top 2 % of the height below the figure's top
    top = 0.12 + title_room + (0.02 * height + 0.25 * _lines(suptitle) if suptitle else 0.0)
    left, right, bottom = y_room + 0.05, 0.2, x_room + 0.05
    panel_w = (width - left - right - (cols - 1) * y_room) / cols
    panel_h = (height - top - bottom - (rows - 1) * (x_room + title_room)) / rows
    fig.subplots_adjust(
        left=left / width,
        right=1 - right / width,
        bottom=bottom / height,
        top=1 - top / height,
        wspace=y_room / panel_w,
        hspace=(x_room + title_room) / panel_h,
    )


@dataclasses.dataclass(frozen=True)
class Recipe:
    """A figure still to draw: a drawing function of this module and its arguments (plain
    data), so that it can be pickled and drawn in another process (`sim.study.drawing`).

    Attributes:
        draw: the function (`against_axis` or `tradeoff`).
        args: its arguments.
        panels: how many panels it has (the largest is drawn first).
    """

    draw: Callable[..., Figure]
    args: tuple[Any, ...]
    panels: int

    def __call__(self) -> Figure:
        """The figure."""
        return self.draw(*self.args)


def with_data(
    heads: Sequence[Headline], points: Mapping[int, Mapping[str, Any]], stats: Stats
) -> list[Headline]:
    """The headlines with a mean at some point (the others get no panel)."""
    return [h for h in heads if any(_mean(stats, i, h.column) is not None for i in points)]


def against_axis(
    heads: Sequence[Headline],
    axis: Axis,
    points: Mapping[int, Mapping[str, Any]],
    stats: Stats,
    title: str,
) -> Figure:
    """One panel per headline against `axis` (module docstring), under `title`; the headlines
    are those `with_data`."""
    fig, axes = _grid(len(heads))
    series = _series(points, axis.key)
    for ax, head in zip(axes, heads, strict=True):
        for n, (label, members) in enumerate(series.items()):
            color = SERIES_COLORS[n % len(SERIES_COLORS)]
            xs, ys, lo, hi = [], [], [], []
            for x, i in members:
                entry = stats[i].get(head.column, {})
                if entry.get("mean") is None:
                    continue
                xs.append(x)
                ys.append(float(entry["mean"]))
                ci = entry.get("ci95") or [entry["mean"], entry["mean"]]
                lo.append(float(ci[0]))
                hi.append(float(ci[1]))
            if not xs:
                continue
            ax.plot(xs, ys, marker="o", color=color, label=label or head.owner or "study")
            if any(a != b for a, b in zip(lo, hi, strict=True)):
                ax.fill_between(xs, lo, hi, color=color, alpha=0.18, linewidth=0)
        _references(ax, head, axis.key, points, stats)
        if use_log(axis.key, axis.values):
            ax.set_xscale("log")
            ax.minorticks_off()  # the axis's own values are the ticks
        ax.set_xticks(sorted(float(v) for v in axis.values))
        ax.set_xticklabels([f"{float(v):g}" for v in sorted(axis.values)])
        ax.set_xlabel(axis_label(axis.key))
        ax.set_ylabel(metric_label(head))
        ax.set_title(panel_title(head), fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title)
    fit(fig, axes)
    return fig


def _references(
    ax: Axes, head: Headline, x_key: str, points: Mapping[int, Mapping[str, Any]], stats: Stats
) -> None:
    """Each reference of `head` as its mean over every point of each axis value (a flat line
    when, as usual, it does not depend on the axis)."""
    for n, (column, label) in enumerate(head.references):
        by_x: dict[float, list[float]] = {}
        for i, values in points.items():
            m = _mean(stats, i, column)
            if m is not None:
                by_x.setdefault(float(values[x_key]), []).append(m)
        if not by_x:
            continue
        xs = sorted(by_x)
        ys = [sum(by_x[x]) / len(by_x[x]) for x in xs]
        ax.plot(xs, ys, label=label, **_reference_style(label, n))


def tradeoff_headlines(
    heads: Sequence[Headline], points: Mapping[int, Mapping[str, Any]], stats: Stats
) -> tuple[list[Headline], list[Headline]]:
    """The trade-off figure's utility headlines (y) and privacy headlines (x): each owner's
    first with data, and the first per-user ε (module docstring)."""
    shown = with_data(heads, points, stats)
    utility = [h for h in shown if h.section == "utility" and h.primary]
    privacy = [h for h in shown if h.section == "attacks" and h.primary]
    privacy += [h for h in shown if h.section == "privacy"][:1]  # the first ε
    return utility, privacy


def tradeoff(
    utility: Sequence[Headline],
    privacy: Sequence[Headline],
    axes: Sequence[Axis],
    points: Mapping[int, Mapping[str, Any]],
    stats: Stats,
) -> Figure:
    """Each of the `utility` headlines against each of the `privacy` ones (module docstring;
    `tradeoff_headlines`)."""
    numeric = numeric_axes(axes)
    order_key = numeric[0].key if numeric else None
    fig, panels = _grid(len(utility) * len(privacy), width=4.6, height=3.8)
    cells = [(u, p) for u in utility for p in privacy]
    for ax, (u, p) in zip(panels, cells, strict=True):
        groups = (
            _series(points, order_key) if order_key else {"": [(0.0, i) for i in sorted(points)]}
        )
        for n, (label, members) in enumerate(groups.items()):
            color = SERIES_COLORS[n % len(SERIES_COLORS)]
            xs, ys, xerr, yerr, notes = [], [], [], [], []
            for value, i in members:
                px, uy = stats[i].get(p.column, {}), stats[i].get(u.column, {})
                if px.get("mean") is None or uy.get("mean") is None:
                    continue
                xs.append(float(px["mean"]))
                ys.append(float(uy["mean"]))
                xerr.append(_half(px))
                yerr.append(_half(uy))
                notes.append(f"{value:g}" if order_key else "")
            if not xs:
                continue
            name = label or u.owner or "study"
            ax.errorbar(
                xs, ys, xerr=xerr, yerr=yerr, marker="o", color=color, capsize=2, label=name
            )
            for x, y, note in zip(xs, ys, notes, strict=True):
                ax.annotate(note, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
        _frontier_references(ax, u, p, groups, stats, vertical=False)
        _frontier_references(ax, p, u, groups, stats, vertical=True)
        if p.section == "privacy":
            ax.set_xscale("log")
        ax.set_xlabel(metric_label(p) if p.section == "attacks" else f"{p.label} (log scale)")
        ax.set_ylabel(metric_label(u))
        ax.set_title(f"{panel_title(u)} against {panel_title(p)}", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    what = f", points labelled with {axis_label(order_key)}" if order_key else ""
    fig.suptitle(f"Utility against empirical and formal privacy{what}", fontsize=11)
    fit(fig, panels)
    return fig


def _half(entry: Mapping[str, Any]) -> float:
    ci = entry.get("ci95")
    return 0.0 if not ci else (float(ci[1]) - float(ci[0])) / 2


def _frontier_references(
    ax: Axes,
    head: Headline,
    other: Headline,
    groups: Mapping[str, list[tuple[float, int]]],
    stats: Stats,
    *,
    vertical: bool,
) -> None:
    """`head`'s references on a trade-off panel: a line across it when a reference is the
    same at every point (chance, the non-private counterpart), else, since a free baseline
    moves with the noise (the naive ẑ = z′), a dashed curve through each point's reference
    beside the point's value of `other`: the attack and its baseline at the same utility."""
    for n, (column, label) in enumerate(head.references):
        means = {i: m for i in stats if (m := _mean(stats, i, column)) is not None}
        if not means:
            continue
        style = _reference_style(label, n + 2 * (not vertical))
        values = list(means.values())
        if max(values) - min(values) <= 1e-9 * max(1.0, abs(max(values))):
            line: Callable[..., Any] = ax.axvline if vertical else ax.axhline
            line(sum(values) / len(values), label=label, **style)
            continue
        for k, members in enumerate(groups.values()):
            pts = [
                (means[i], o) if vertical else (o, means[i])
                for _, i in members
                if i in means and (o := _mean(stats, i, other.column)) is not None
            ]
            if pts:
                xs, ys = zip(*pts, strict=True)
                ax.plot(xs, ys, label=label if k == 0 else None, **style)


def study_figures(
    axes: Sequence[Axis],
    points: Mapping[int, Mapping[str, Any]],
    stats: Stats,
    heads: Sequence[Headline],
) -> dict[str, Recipe]:
    """Every figure the study has data for, by name, still to draw (module docstring)."""
    figures: dict[str, Recipe] = {}
    families = list(dict.fromkeys(h.family for h in heads if h.section == "utility"))
    groups = [(f"utility_{f}" if i else "utility", f, "utility") for i, f in enumerate(families)]
    groups.append(("attacks", "", "attacks"))
    for axis in numeric_axes(axes):
        short = axis.key.rsplit(".", 1)[-1]
        for name, family, section in groups:
            part = [h for h in heads if h.section == section and h.family == family]
            drawn = with_data(part, points, stats)
            if drawn:
                what = f"Utility ({family})" if section == "utility" else "Attack success"
                title = f"{what} against {axis_label(axis.key)}; bands: 95 % t intervals"
                figures[f"{name.replace(' ', '_')}_vs_{short}"] = Recipe(
                    against_axis, (drawn, axis, points, stats, title), len(drawn)
                )
    utility, privacy = tradeoff_headlines(heads, points, stats)
    if utility and privacy:
        figures["tradeoff"] = Recipe(
            tradeoff, (utility, privacy, axes, points, stats), len(utility) * len(privacy)
        )
    return figures


__all__ = [
    "AXIS_LABELS",
    "Recipe",
    "against_axis",
    "axis_label",
    "numeric_axes",
    "study_figures",
    "tradeoff",
    "tradeoff_headlines",
    "use_log",
    "with_data",
]
