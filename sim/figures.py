"""The run's figures, as a paper would draw them: builders that return matplotlib Figures.

`build_figures(report)` turns a report dict (the contract of `report.json`) into named
`matplotlib.figure.Figure`s; `sim.report` saves them as `plots/NAME.png` and the tests inspect
the same objects (axis limits, labels, text extents) rather than pixels. Every figure puts each
metric on its own axis, so a count never shares a scale with an error or a probability:

* ``utility``, ``utility_ranking``, ``utility_classification``: one figure per utility family
  (rating error, top-K ranking, classification; `sim.figures_utility`), each metric on its own
  axis with the run's model beside its variants, its non-private counterpart
  (``baseline_*``), the trivial predictors (``trivial_*``) and chance (``*_chance``).
* ``attacks``: one row per attack, one panel per headline metric of the attack's output kind
  (`sim.referee_attacks.HEADLINES`), the attack's score beside its naive baselines and chance.
  A kind without a declaration falls back to every non-count metric beside the
  ``<metric>_<naive|baseline|chance|…>`` keys that share its name.
* ``epsilon``: the distribution of the per-user composed ε (from the compact histogram the
  report keeps under ``privacy.per_user.histogram``), for the mechanism and for the model's
  output-privacy ledger, when a run has one.
* ``rmse_by_private_users``: test RMSE against the private users folded into the model (Xin &
  Jaakkola Fig. 2), when a two-tier run has the curve.

Figures are made with `matplotlib.figure.Figure` directly (no pyplot state, nothing to close)
and the constrained layout, which keeps titles and labels inside the canvas.
"""

from __future__ import annotations

import itertools
import math
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from privrec.sim.figures_base import COLORS, DPI, Bar, barh, finite, is_count
from privrec.sim.figures_utility import (
    classification_figure,
    ranking_figure,
    utility_bars,
    utility_figure,
)
from privrec.sim.referee_attacks import HEADLINES, Headline

_REFERENCE_SUFFIXES = ("naive", "baseline", "chance", "zero", "mu", "permuted", "random")
_FALLBACK_PANELS = 4


# ------------------------------------------------------------------------------------ attacks
def fallback_headlines(metrics: Mapping[str, Any]) -> tuple[Headline, ...]:
    """Headlines for an output kind with no declaration: every non-count metric that is not
    itself a reference, beside the ``<metric>_<naive|baseline|chance|…>`` keys (at most four)."""
    out = []
    for key, value in metrics.items():
        if not finite(value) or is_count(key) or key.rsplit("_", 1)[-1] in _REFERENCE_SUFFIXES:
            continue
        refs = tuple(
            (f"{key}_{s}", s) for s in _REFERENCE_SUFFIXES if finite(metrics.get(f"{key}_{s}"))
        )
        out.append(
            Headline(key, key.replace("_", " "), "", refs, 0.0 <= value <= 1.0 and bool(refs))
        )
    return tuple(out[:_FALLBACK_PANELS])


def attack_headlines(kind: str | None, metrics: Mapping[str, Any]) -> tuple[Headline, ...]:
    """The declared headlines of `kind` present in `metrics`, else the fallback."""
    declared = HEADLINES.get(kind or "", ())
    present = tuple(h for h in declared if finite(metrics.get(h.metric)))
    return present or fallback_headlines(metrics)


def attack_bars(headline: Headline, metrics: Mapping[str, Any]) -> list[Bar]:
    """The attack's value, then each reference it has in `metrics`."""
    bars: list[Bar] = [("attack", float(metrics[headline.metric]), "attack")]
    bars += [
        (label, float(metrics[key]), "chance" if "chance" in f"{key} {label}" else "reference")
        for key, label in headline.references
        if finite(metrics.get(key))
    ]
    return bars


def attacks_figure(report: Mapping[str, Any]) -> Figure | None:
    """One row per attack, one axis per headline metric, each beside its baselines."""
    rows = [
        (a, heads)
        for a in report.get("attacks", [])
        if (heads := attack_headlines(a.get("kind"), a.get("metrics", {})))
    ]
    if not rows:
        return None
    n_cols = max(len(h) for _, h in rows)
    heights = [
        1.3 + 0.34 * max(len(attack_bars(h, a["metrics"])) for h in heads) for a, heads in rows
    ]
    fig = Figure(figsize=(3.7 * n_cols + 1.4, sum(heights) + 0.6), layout="constrained")
    subfigs = fig.subfigures(len(rows), 1, squeeze=False, height_ratios=heights)[:, 0]
    for sub, (attack, heads) in zip(subfigs, rows, strict=True):
        axes = sub.subplots(1, n_cols, squeeze=False)[0]
        for ax, head in zip(axes, heads, strict=False):
            better = f" ({head.better} is better)" if head.better else ""
            barh(
                ax,
                attack_bars(head, attack["metrics"]),
                "\n".join(textwrap.wrap(head.label + better, 38)),
                unit_interval=head.unit_interval,
            )
        for ax in axes[len(heads) :]:
            ax.set_visible(False)
        knowledge = textwrap.shorten(attack.get("knowledge", ""), 110, placeholder=" …")
        sub.suptitle(f"{attack['name']}  ·  {knowledge}", fontsize=10, ha="left", x=0.01)
    fig.suptitle("Empirical privacy: each attack against its free baselines", fontsize=12)
    return fig


# ------------------------------------------------------------------------------------ epsilon
def epsilon_histogram(per_user: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The compact histogram of a ledger summary, if it has one with users."""
    hist = per_user.get("histogram")
    return hist if isinstance(hist, Mapping) and sum(hist.get("counts", [])) else None


def epsilon_figure(report: Mapping[str, Any]) -> Figure | None:
    """The per-user composed ε of each ledger that states one (mechanism; model output)."""
    p = report.get("privacy", {})
    ledgers = [(f"releases ({p.get('mechanism', '?')})", p.get("per_user", {}))]
    if isinstance(p.get("model"), Mapping):
        ledgers.append((f"model output ({p['model'].get('model', '?')})", p["model"]["per_user"]))
    panels = [(t, s, h) for t, s in ledgers if (h := epsilon_histogram(s)) is not None]
    if not panels:
        return None
    fig = Figure(figsize=(5.2 * len(panels) + 0.6, 3.4), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (title, summary, hist) in zip(axes, panels, strict=True):
        counts = list(hist["counts"])
        if "values" in hist:  # few distinct values: one bar each
            xs = [float(v) for v in hist["values"]]
            gaps = [b - a for a, b in itertools.pairwise(xs)]
            width = 0.05 * max([abs(x) for x in xs] + [1e-9])
            width = min([width, *(0.6 * g for g in gaps)])
            ax.bar(xs, counts, width=width, color=COLORS["model"])
            for x, c in zip(xs, counts, strict=True):  # each exact ε over its bar
                ax.text(x, c, f"ε = {x:.3g}", ha="center", va="bottom", fontsize=8)
            lo, hi = min(xs) - width, max(xs) + width
        else:
            edges = [float(e) for e in hist["edges"]]
            ax.stairs(counts, edges, fill=True, color=COLORS["model"])
            lo, hi = edges[0], edges[-1]
        ax.set_xlim(min(0.0, lo), hi + 0.05 * (hi - min(0.0, lo) or 1.0))
        ax.set_ylim(0, max(counts) * 1.15)
        ax.set_xlabel(
            "\n".join(textwrap.wrap(f"composed ε per user: {composition_text(summary)}", 62))
        )
        ax.set_ylabel("users")
        eps = summary.get("per_user_epsilon", {})
        users = summary.get("users", sum(counts))
        median, most = eps.get("median", math.nan), eps.get("max", math.nan)
        ax.set_title(
            f"{title}\nmedian {median:.3g}, max {most:.3g} over {users} users", fontsize=10
        )
    fig.suptitle("Formal privacy: the distribution of per-user ε, and what it composes")
    return fig


def composition_text(summary: Mapping[str, Any]) -> str:
    """What a ledger's per-user ε composes, in words: ``each user's 1 profile release
    (ε = 8 each, pure DP), composed by the PLD accountant and stated at δ = 1e-06``, and why a
    single pure ε-release reads slightly below ε there (at δ > 0 the accountant trades a little
    δ for ε: the (ε, δ) bound of one ε-DP release is below ε)."""
    composed = summary.get("composed") or {}
    what = ", ".join(
        f"{_count(c)} {purpose} {'event' if purpose in ('fit', 'answer') else 'release'}"
        + ("s" if c.get("median") != 1 else "")
        for purpose, c in composed.items()
    )
    per = summary.get("epsilon_per_release")
    kind = summary.get("kind", "?")
    each = f" (ε = {per:g} each, {kind} DP)" if finite(per) else f" ({kind} DP)"
    delta = summary.get("delta", "?")
    text = (
        f"each user's {what or 'releases'}{each}, composed by the "
        f"{str(summary.get('accountant', '?')).upper()} accountant and stated at δ = {delta}"
    )
    median = summary.get("per_user_epsilon", {}).get("median")
    if kind == "pure" and finite(per) and finite(median) and median < per:
        text += f"; below {per:g} because at δ > 0 the accountant states a smaller ε for it"
    return text


def _count(c: Mapping[str, Any]) -> str:
    """``1`` when every user has the same count, else ``median 3 (max 9)``."""
    median, most = c.get("median", 0.0), c.get("max", 0.0)
    return f"{median:g}" if median == most else f"median {median:g} (max {most:g})"


# ------------------------------------------------------------------------------------ curves
def curve_figure(report: Mapping[str, Any]) -> Figure | None:
    """Test RMSE against the private users folded into the model (Xin & Jaakkola Fig. 2)."""
    curve = report.get("curves", {}).get("utility_by_private_users")
    if not curve:
        return None
    fig = Figure(figsize=(6.4, 3.6), layout="constrained")
    ax = fig.subplots()
    label = f"{report.get('privacy', {}).get('mechanism', 'private')} releases"
    ax.plot(curve["private_users"], curve["rmse"], marker=".", color=COLORS["model"], label=label)
    ref = report.get("utility", {}).get("baseline_all_public_rmse")
    if finite(ref):
        ax.axhline(ref, color=COLORS["reference"], linestyle="--", label="every user public")
    ax.set_xlabel("private users folded into the model")
    ax.set_ylabel("test RMSE (lower is better)")
    ax.set_title("Utility as private users join (round 0: the public model alone)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig


FIGURES: dict[str, Callable[[Mapping[str, Any]], Figure | None]] = {
    "utility": utility_figure,
    "utility_ranking": ranking_figure,
    "utility_classification": classification_figure,
    "attacks": attacks_figure,
    "epsilon": epsilon_figure,
    "rmse_by_private_users": curve_figure,
}
"""Figure name (the PNG's stem) → builder; a builder returns None when the run has no data
for it."""


def build_figures(report: Mapping[str, Any]) -> dict[str, Figure]:
    """Every figure the report has data for, by name."""
    return {name: fig for name, build in FIGURES.items() if (fig := build(report)) is not None}


def save_figures(figures: Mapping[str, Figure], plots_dir: Path) -> list[str]:
    """Write each figure to `plots_dir/NAME.png` (its suptitle in the PNG's Title); returns
    the paths relative to the run directory (``plots/NAME.png``)."""
    plots_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, fig in figures.items():
        title = fig.get_suptitle() or name
        fig.savefig(plots_dir / f"{name}.png", dpi=DPI, metadata={"Title": title})
        written.append(f"{plots_dir.name}/{name}.png")
    return written


__all__ = [
    "COLORS",
    "DPI",
    "FIGURES",
    "attack_bars",
    "attack_headlines",
    "attacks_figure",
    "build_figures",
    "composition_text",
    "curve_figure",
    "epsilon_figure",
    "fallback_headlines",
    "is_count",
    "save_figures",
    "utility_bars",
    "utility_figure",
]
