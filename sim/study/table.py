"""A study's tidy table: one row per run, every axis value and every scalar of its report.

The columns are ``run_dir``, ``point``, ``seed``, one per axis (its dotted key), ``seconds``
(the run's wall time), then every scalar of report.json's ``utility``, ``privacy`` and
``attacks`` sections, flattened with dots: ``utility.ppcf_mae``,
``privacy.per_user.per_user_epsilon.median``, ``attacks.rpt_bayes.rmse_z`` (an attack's
metrics directly under its name, its other fields beside them: ``attacks.rpt_bayes.kind``).
Nothing is listed by hand, so a metric the referee starts to score appears without a change
here. Lists (histograms, flags) are left out; a value a run does not have is empty.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from privrec.sim.study.store import RUNS_DIR, RunRecord

FIXED = ("run_dir", "point", "seed")
SECTIONS = ("utility", "privacy", "attacks")
Scalar = int | float | str | bool | None


def _flatten(out: dict[str, Scalar], prefix: str, value: Any) -> None:
    if isinstance(value, Mapping):
        for k, v in value.items():
            _flatten(out, f"{prefix}.{k}", v)
    elif value is None or isinstance(value, int | float | str | bool):
        out[prefix] = value


def report_scalars(report: Mapping[str, Any]) -> dict[str, Scalar]:
    """Every scalar of the report's utility, privacy and attacks sections (module docstring)."""
    out: dict[str, Scalar] = {}
    _flatten(out, "utility", report.get("utility", {}))
    _flatten(out, "privacy", report.get("privacy", {}))
    for attack in report.get("attacks", []):
        fields = {k: v for k, v in attack.items() if k not in ("name", "metrics")}
        _flatten(out, f"attacks.{attack['name']}", {**fields, **attack.get("metrics", {})})
    return out


def run_row(record: RunRecord, report: Mapping[str, Any]) -> dict[str, Scalar]:
    """The table row of one finished run."""
    row: dict[str, Scalar] = {
        "run_dir": f"{RUNS_DIR}/{record.name}",
        "point": record.point,
        "seed": record.seed,
    }
    row |= {key: _cell(v) for key, v in record.axes.items()}
    row["seconds"] = record.seconds
    return row | report_scalars(report)


def _cell(value: Any) -> Scalar:
    """An axis value as a cell: scalars as they are, a list or table as JSON text."""
    if value is None or isinstance(value, int | float | str | bool):
        return value
    return json.dumps(value)


def columns(rows: Sequence[Mapping[str, Any]], axes: Iterable[str]) -> list[str]:
    """The table's columns: the fixed ones, the axes, ``seconds``, then the report's in the
    order first seen, section by section."""
    head = [*FIXED, *axes, "seconds"]
    seen: dict[str, None] = {}
    for row in rows:
        seen |= dict.fromkeys(k for k in row if k not in head)
    body = [c for s in SECTIONS for c in seen if c.startswith(f"{s}.")]
    return head + body


def to_csv(rows: Sequence[Mapping[str, Any]], cols: Sequence[str]) -> str:
    """The table as CSV (empty cells for missing values, floats in full precision)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(cols), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({c: "" if row.get(c) is None else row[c] for c in cols})
    return buf.getvalue()


def read_report(run_dir: Path) -> dict[str, Any]:
    """The run's report.json."""
    data: dict[str, Any] = json.loads((run_dir / "report.json").read_text())
    return data


__all__ = ["FIXED", "columns", "read_report", "report_scalars", "run_row", "to_csv"]
