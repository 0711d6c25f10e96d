"""A study's results, rebuilt from its run directories alone (`privrec sweep --report`).

`write_results(study)` reads `study.toml` and every finished run (`done.json`, `report.json`)
and writes:

* ``summary.csv``: the tidy table, one row per run (`sim.study.table`);
* ``study.json``: per point, every numeric column's n, mean, sd and 95 % t interval over the
  seeds; per pair of points that differ in one axis value, the paired tests of every numeric
  column (`sim.study.stats`); the runs that failed; how the intervals and tests are made;
* ``study.md``: the same for the headline columns (`sim.study.metrics`), as tables;
* ``plots/*.png``: `sim.study.plots`.

Nothing is re-run; a run that has not finished is listed as missing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from privrec.sim.study.drawing import Render, in_turn
from privrec.sim.study.metrics import Headline, headlines, is_number
from privrec.sim.study.plots import study_figures
from privrec.sim.study.spec import StudySpec
from privrec.sim.study.stats import INTERVAL, TESTS, comparisons, point_statistics
from privrec.sim.study.store import (
    PLOTS,
    STUDY_JSON,
    STUDY_MD,
    SUMMARY,
    StudyDir,
    write_atomically,
)
from privrec.sim.study.table import columns, read_report, run_row, to_csv


def collect(study: StudyDir) -> tuple[StudySpec, list[dict[str, Any]], dict[str, str | None]]:
    """The study, the rows of its finished runs (study order: seed, then point) and each
    attack's output kind."""
    spec = study.read_spec()
    rows: list[dict[str, Any]] = []
    kinds: dict[str, str | None] = {}
    for record in study.records():
        report = read_report(study.run_dir(record.name))
        rows.append(run_row(record, report))
        kinds |= {a["name"]: a.get("kind") for a in report.get("attacks", [])}
    rows.sort(key=lambda r: (r["seed"], r["point"]))
    return spec, rows, kinds


def numeric_columns(rows: Sequence[Mapping[str, Any]], cols: Sequence[str]) -> list[str]:
    """The report columns whose every present value is a number."""
    out = []
    for c in cols:
        if "." not in c:
            continue
        present = [r[c] for r in rows if r.get(c) is not None]
        if present and all(is_number(v) for v in present):
            out.append(c)
    return out


def write_results(study: StudyDir, *, figures: bool = True, render: Render = in_turn) -> list[str]:
    """Write summary.csv, study.json, study.md and (with `figures`) the plots (module
    docstring), the figures saved by `render` (`sim.study.drawing`: here, or in the sweep's
    idle workers); returns the files written, relative to the study directory."""
    spec, rows, kinds = collect(study)
    axes = [a.key for a in spec.axes]
    cols = columns(rows, axes)
    write_atomically(study.root / SUMMARY, to_csv(rows, cols))
    metrics = numeric_columns(rows, cols)
    points = dict(enumerate(spec.points()))
    by_point: dict[int, list[dict[str, Any]]] = {i: [] for i in points}
    for row in rows:
        by_point[int(row["point"])].append(row)
    stats = point_statistics(by_point, metrics)
    heads = headlines(metrics, kinds)
    plots_dir = study.root / PLOTS
    drawn = study_figures(spec.axes, points, stats, heads) if figures else {}
    if drawn:  # saved while the comparisons are made (`render` may hand them to workers)
        plots_dir.mkdir(exist_ok=True)
    saved = render(drawn, plots_dir)
    compared = comparisons(points, by_point, metrics)
    finished = {r["run_dir"].rsplit("/", 1)[-1] for r in rows}
    all_runs = spec.runs()
    failures = study.failures()
    doc = {
        "study": {
            "axes": {a.key: list(a.values) for a in spec.axes},
            "zipped": [a.key for a in spec.zipped],
            "seeds": list(spec.seeds),
            "runs": len(all_runs),
            "finished": len(finished),
            "failed": {n: f.get("error", "") for n, f in failures.items() if n not in finished},
            "missing": [r.name for r in all_runs if r.name not in finished],
        },
        "interval": INTERVAL,
        "tests": TESTS,
        "headlines": [h.column for h in heads],
        "points": [
            {
                "point": i,
                "axes": values,
                "runs": [r["run_dir"] for r in by_point[i]],
                "seeds": [r["seed"] for r in by_point[i]],
                "metrics": stats[i],
            }
            for i, values in points.items()
        ],
        "comparisons": compared,
    }
    write_atomically(study.root / STUDY_JSON, json.dumps(doc, indent=1, allow_nan=False))
    written = [SUMMARY, STUDY_JSON, *(f"{PLOTS}/{name}.png" for name in drawn)]
    saved()
    write_atomically(study.root / STUDY_MD, markdown(doc, heads, written[2:]))
    return [*written, STUDY_MD]


def _interval(entry: Mapping[str, Any]) -> str:
    if entry.get("mean") is None:
        return "—"
    mean, ci = entry["mean"], entry.get("ci95")
    if not ci:
        return f"{mean:.4g} (n={entry['n']})"
    return f"{mean:.4g} ± {(ci[1] - ci[0]) / 2:.2g} (n={entry['n']})"


def _p(value: Any) -> str:
    return "—" if value is None else f"{value:.3g}"


def markdown(doc: Mapping[str, Any], heads: Sequence[Headline], plots: Sequence[str]) -> str:
    """study.md: the study, a table of the headline columns per point, the one-axis paired
    comparisons of those columns, the figures."""
    s = doc["study"]
    axes = list(s["axes"])
    lines = [
        "# privrec study",
        "",
        f"axes: {', '.join(f'`{k}` ∈ {v}' for k, v in s['axes'].items()) or 'none'}"
        + (f" (zipped: {', '.join(s['zipped'])})" if s["zipped"] else ""),
        f"seeds: {s['seeds']} · runs: {s['finished']} of {s['runs']} finished",
        "",
        f"Cells: mean ± half-width of the {doc['interval']}. The intervals include the "
        "seed-to-seed spread of the population and its splits; a difference between points is "
        "judged by the paired comparisons below, which remove it.",
        "",
    ]
    if s["failed"] or s["missing"]:
        lines += [f"**{len(s['missing'])} run(s) missing**, failed: {s['failed'] or 'none'}", ""]
    head_cols = [h.column for h in heads if h.brief]
    lines += ["## Per point", "", "| " + " | ".join([*axes, *head_cols]) + " |"]
    lines.append("|" + "---|" * (len(axes) + len(head_cols)))
    for p in doc["points"]:
        cells = [str(p["axes"].get(k)) for k in axes]
        cells += [_interval(p["metrics"].get(c, {})) for c in head_cols]
        lines.append("| " + " | ".join(cells) + " |")
    shown = [c for c in doc["comparisons"] if c["metric"] in set(head_cols)]
    lines += [
        "",
        "## Paired comparisons (one axis differs)",
        "",
        f"{doc['tests']}. {len(doc['comparisons'])} comparisons in study.json, "
        f"{len(shown)} of the headline columns here; Δ = b − a.",
        "",
        "| axis | a | b | metric | mean a | mean b | Δ | n | paired t p | Wilcoxon p |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in shown:
        note = " (identical)" if c["identical"] else ""
        lines.append(
            f"| {c['axis']} | {c['a'][c['axis']]} | {c['b'][c['axis']]} | {c['metric']} | "
            f"{c['mean_a']:.4g} | {c['mean_b']:.4g} | {c['mean_diff']:.3g}{note} | {c['n']} | "
            f"{_p(c['t_p'])} | {_p(c['wilcoxon_p'])} |"
        )
    lines += ["", *[f"![{Path(p).stem}]({p})" for p in plots], ""]
    return "\n".join(lines)


__all__ = ["collect", "write_results"]
