"""Running a reproduction: repeats, verdicts, and the table, JSON and plot it writes."""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from privrec.shared.errors import PrivrecError
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
        """The result as a plain dict."""
        return dataclasses.asdict(self)


def verdict(published: float | None, mean: float) -> str:
    """The verdict: "reproduced" within `REL_TOL` relative, "differs" outside, "—" if unprinted."""
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
    jobs: int | None = None,
) -> ReproductionResult:
    """Run `entry` `repeats` times (seeds 0, 1, …), compare, and write `out_dir/NAME.json` and
    `out_dir/NAME.png`.

    The repeats are jobs of the sweep engine (`run_repeats`): `jobs` at once, each in a
    worker, resumed after an interruption.

    Raises:
        ValueError: `repeats` < 1, or a repeat did not report a published key.
        ReproductionFailed: a repeat raised (its error and its failed.json named).
    """
    if repeats < 1:
        raise ValueError(f"--repeats must be >= 1, got {repeats}")
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    measured = run_repeats(entry, repeats, out_dir, data, quick, progress, jobs)
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


class ReproductionFailed(PrivrecError):
    """A repeat of a reproduction raised; the message names it and its failed.json."""


def run_repeat(
    entry: str, seed: int, data: str | None, quick: bool, work_dir: Path
) -> dict[str, float]:
    """One repeat of the entry class `entry` (``module:qualname``), in a worker (a job of kind
    "call", `sim.study.execute`): its measured values."""
    module, _, qualname = entry.partition(":")
    cls = getattr(importlib.import_module(module), qualname)
    ctx = RunContext(seed, Path(data) if data else None, quick, work_dir, lambda *_: None)
    return {k: float(v) for k, v in cls().run(ctx).items()}  # (JSON: no numpy scalars)


def run_repeats(
    entry: Reproduction,
    repeats: int,
    out_dir: Path,
    data: Path | None,
    quick: bool,
    progress: Progress | None,
    jobs: int | None,
) -> list[dict[str, float]]:
    """Every repeat's measured values, repeat r (seed r) in `out_dir/NAME-work/repeat-r`.

    The repeats run on the sweep engine (`sim.study.engine`): as jobs of kind "call", `jobs`
    at once (default: the cores) in workers with the numeric threads shared out, a lone one in
    this process; a repeat whose `done.json` holds the same entry, seed, data and quick flag
    is taken from there (a stopped reproduction resumes; delete the folder to recompute).
    """
    from privrec.sim.study.engine import (
        StudyStatus,
        SweepOptions,
        dispatch,
        open_backend,
        signals_interrupt,
    )
    from privrec.sim.study.execute import Job
    from privrec.sim.study.store import read_done

    tell = progress or (lambda what, done, total: None)
    root = (out_dir / f"{entry.name}-work").resolve()
    cls = type(entry)
    found: dict[int, dict[str, float]] = {}
    todo: list[Job] = []
    for r in range(repeats):
        job_dir = root / f"repeat-{r}"
        identity = {
            "entry": f"{cls.__module__}:{cls.__qualname__}",
            "seed": r,
            "data": str(data) if data else None,
            "quick": quick,
        }
        done = read_done(job_dir)
        if done is not None and done.get("identity") == identity and "result" in done:
            found[r] = done["result"]
            continue
        payload = {
            "kind": "call",
            "dir": str(job_dir),
            "record": {"name": job_dir.name, "identity": identity},
            "function": f"{__name__}:run_repeat",
            "kwargs": identity,
        }
        todo.append(Job(job_dir.name, payload, f"{entry.name} repeat {r + 1}/{repeats}"))

    def status_line(status: StudyStatus) -> None:
        eta = "" if status.eta_s is None else f", about {status.eta_s:.0f} s left"
        tell(
            f"{entry.name}: {status.running} repeat(s) running, {status.left} left{eta}",
            status.done + status.failed,
            status.total,
        )

    failed: dict[str, str] = {}
    if todo:
        options = SweepOptions(jobs=jobs, progress=status_line)
        status = StudyStatus(total=repeats, done=len(found), skipped=len(found))
        with signals_interrupt(), open_backend(options, root / "logs", len(todo)) as opened:
            backend, n, _ = opened
            dispatch(backend, todo, options, status, failed, n)
    if failed:
        name, error = next(iter(failed.items()))
        raise ReproductionFailed(
            f"{entry.name} {name} failed: {error} (see {root / name / 'failed.json'})"
        )
    for r in range(repeats):
        if r not in found:
            done = read_done(root / f"repeat-{r}")
            assert done is not None  # every job finished without failing
            found[r] = done["result"]
    tell(f"{entry.name}: done", repeats, repeats)
    return [{k: float(v) for k, v in found[r].items()} for r in range(repeats)]


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


__all__ = [
    "QUICK",
    "ReproductionFailed",
    "ReproductionResult",
    "Row",
    "plot",
    "reproduce",
    "run_repeat",
    "run_repeats",
    "verdict",
]
