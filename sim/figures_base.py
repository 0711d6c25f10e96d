"""What every figure of the run shares: the palette, the count rule and the bar panel.

`sim.figures` (attacks, ε, curves) and `sim.figures_utility` (one figure per utility family)
draw with these, so a bar, a label and a colour mean the same in every PNG.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from matplotlib.axes import Axes

DPI = 110
COLORS = {
    "model": "#3572b0",
    "variant": "#8fb3dc",
    "reference": "#8a8a8a",
    "chance": "#c9c9c9",
    "attack": "#b03535",
    "trivial": "#c8a46e",
}
_COUNT = re.compile(r"(^n_|_predictions$|_count$|^users$|_users$)")
Bar = tuple[str, float, str]  # (label, value, role: a key of COLORS)


def is_count(key: str) -> bool:
    """Whether a metric key names a count (``n_cells``, ``ppcf_predictions``), not a score."""
    return bool(_COUNT.search(key))


def finite(v: Any) -> bool:
    """True for a finite int or float (not a bool)."""
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def barh(
    ax: Axes, bars: Sequence[Bar], xlabel: str, *, unit_interval: bool = False, fmt: str = ".3f"
) -> None:
    """Horizontal bars, one category per row (labels never collide), values written at the
    bar ends, the x axis from 0 (or the most negative value) with room for the labels."""
    labels = [b[0] for b in bars]
    values = [b[1] for b in bars]
    ys = list(range(len(bars)))
    ax.barh(ys, values, color=[COLORS[b[2]] for b in bars], height=0.6)
    ax.set_yticks(ys, labels)
    ax.invert_yaxis()  # the run's own figure on top
    lo = min(0.0, *values)
    hi = 1.0 if unit_interval and max(values) <= 1.0 else max(0.0, *values)
    span = (hi - lo) or 1.0
    ax.set_xlim(lo - (0.02 * span if lo < 0 else 0.0), hi + 0.28 * span)
    if unit_interval and lo == 0.0 and hi == 1.0:
        ax.set_xticks([0.0, 0.25, 0.5, 0.75, 1.0])  # no tick past 1 on a probability axis
    for y, v in zip(ys, values, strict=True):
        ax.text(v, y, f" {v:{fmt}}", va="center", ha="left", fontsize=8)
    ax.set_xlabel(xlabel)
    ax.tick_params(axis="y", labelsize=8)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)


__all__ = ["COLORS", "DPI", "Bar", "barh", "finite", "is_count"]
