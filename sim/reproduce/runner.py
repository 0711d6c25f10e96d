"""Running a reproduction: repeats, verdicts, and the table, JSON and plot it writes."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from privrec.sim.reproduce.base import REL_TOL, Progress, Reproduction, RunContext

QUICK = "not compared (quick run)"
"""The verdict of every row of a `--quick` run: tiny data says nothing about the paper."""


@dataclasses.dataclass(frozen=True)
class Row:
    """One published number beside ours."""

    key: str
    label: str
    metric: str
    published: float | None
    mean: float
    std: float
    values: list[float]
    verdict: str
    reason: str


@dataclasses.dataclass(frozen=True)
class ReproductionResult:
    """What `privrec reproduce NAME` found."""

    name: str
    title: str
    source: str
    repeats: int
    quick: bool
    seconds: float
    rows: list[Row]
    claims: list[dict[str, Any]]
    extra: dict[str, list[float]]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def verdict(published: float | None, mean: float) -> str:
    """ "reproduced" within `REL_TOL` relative, "differs" outside, "—" when nothing is printed."""
    if published is None:
        return "—"
    if not math.isfinite(mean):
        return "differs"
    return "reproduced" if abs(mean - published) <= REL_TOL * abs(published) else "differs"


def reproduce(
    entry: Reproduction,
    *,
    repeats: int,
    out_dir: Path,
    data: Path | None = None,
    quick: bool = False,
    progress: Progress | None = None,
) -> ReproductionResult:
    """Run `entry` `repeats` times (seeds 0, 1, …), compare, and write `out_dir/NAME.json` and
    `out_dir/NAME.png`.

    Raises:
        ValueError: `repeats` < 1, or a repeat did not report a published key.
    """
    if repeats < 1:
        raise ValueError(f"--repeats must be >= 1, got {repeats}")
    out_dir.mkdir(parents=True, exist_ok=True)
    tell = progress or (lambda what, done, total: None)
    t0 = time.perf_counter()
    measured: list[dict[str, float]] = []
    for r in range(repeats):
        tell(f"{entry.name}: repeat {r + 1}/{repeats}", r, repeats)
        work = out_dir / f"{entry.name}-work" / f"repeat-{r}"
        work.mkdir(parents=True, exist_ok=True)
        measured.append(entry.run(RunContext(r, data, quick, work, tell)))
    tell(f"{entry.name}: done", repeats, repeats)
    missing = sorted({p.key for p in entry.published} - set(measured[0]))
    if missing:
        raise ValueError(f"reproduction {entry.name} reported no value for {missing}")
    keys = sorted(set().union(*measured))
    series = {k: [float(m[k]) for m in measured if k in m] for k in keys}
    means = {k: float(np.mean(v)) for k, v in series.items()}
    rows = [
        Row(
            key=p.key,
            label=p.label,
            metric=p.metric,
            published=p.value,
            mean=means[p.key],
            std=float(np.std(series[p.key], ddof=1)) if repeats > 1 else 0.0,
            values=series[p.key],
            verdict=QUICK if quick else verdict(p.value, means[p.key]),
            reason=p.reason,
        )
        for p in entry.published
    ]
    claims = []
    for c in entry.claims:
        try:
            ok = bool(c.holds(means))
        except KeyError as exc:
            raise ValueError(f"claim {c.text!r} needs key {exc}") from None
        claims.append(
            {"claim": c.text, "verdict": QUICK if quick else ("holds" if ok else "fails")}
        )
    published_keys = {p.key for p in entry.published}
    result = ReproductionResult(
        name=entry.name,
        title=entry.title,
        source=entry.source,
        repeats=repeats,
        quick=quick,
        seconds=time.perf_counter() - t0,
        rows=rows,
        claims=claims,
        extra={k: v for k, v in series.items() if k not in published_keys},
    )
    (out_dir / f"{entry.name}.json").write_text(json.dumps(result.to_dict(), indent=2))
    plot(entry, result, out_dir / f"{entry.name}.png")
    return result


def _mean_of(result: ReproductionResult, by_key: dict[str, Row], key: str) -> float:
    """The measured mean of `key`, a published row or an extra key (NaN if absent)."""
    if key in by_key:
        return by_key[key].mean
    values = result.extra.get(key)
    return float(np.mean(values)) if values else float("nan")


def plot(entry: Reproduction, result: ReproductionResult, path: Path) -> None:
    """The paper's form: curves (ours with a ±1 sd band, published as markers) when the entry
    declares them, else bars of published beside ours."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_key = {r.key: r for r in result.rows}
    curves = entry.curve()
    bands = entry.bands()
    fig, ax = plt.subplots(figsize=(7, 4))
    if curves:
        for i, (series, points) in enumerate(curves.items()):
            colour = f"C{i}"
            xs = [x for x, k in points]
            ours = np.array([by_key[k].mean for _, k in points])
            sd = np.array([by_key[k].std for _, k in points])
            ax.plot(xs, ours, marker="o", color=colour, label=f"{series} (ours)")
            if series in bands:  # the paper's own band (means of its low and high keys)
                lo, hi = (
                    np.array([_mean_of(result, by_key, k) for k in keys])
                    for keys in zip(*bands[series], strict=True)
                )
                ax.fill_between(xs, lo, hi, color=colour, alpha=0.15)
            else:
                ax.fill_between(xs, ours - sd, ours + sd, color=colour, alpha=0.2)
            pub = [(x, by_key[k].published) for x, k in points if by_key[k].published is not None]
            if pub:
                ax.plot(*zip(*pub, strict=True), "x--", color=colour, label=f"{series} (published)")
        ax.set_xlabel(entry.x_label)
        if entry.x_scale == "symlog":
            ax.set_xscale("symlog", linthresh=1.0)
        elif entry.x_scale != "linear":
            ax.set_xscale(entry.x_scale)
    else:
        labels = [r.label for r in result.rows]
        pos = np.arange(len(labels))
        printed = [r.published if r.published is not None else np.nan for r in result.rows]
        ax.bar(pos - 0.2, printed, 0.4, label="published", color="#999")
        ax.bar(
            pos + 0.2,
            [r.mean for r in result.rows],
            0.4,
            label="ours",
            color="#3572b0",
            yerr=[r.std for r in result.rows],
        )
        ax.set_xticks(pos, labels, rotation=20, ha="right", fontsize=8)
    metrics = sorted({r.metric for r in result.rows})
    ax.set_ylabel(" / ".join(metrics))
    ax.set_title(
        f"{entry.title}\n({result.repeats} repeat{'s' if result.repeats > 1 else ''}"
        f"{', quick' if result.quick else ''})",
        fontsize=9,
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


__all__ = ["QUICK", "ReproductionResult", "Row", "plot", "reproduce", "verdict"]
