"""Typed results: `Report` (one run, the Python face of `report.json`) and `Study` (a sweep).

`privrec.simulate` returns a `Report`. Its sections are attributes (`report.utility["ppcf_mae"]`,
`report.attacks`), a few derived figures have names of their own (`report.epsilon`,
`report.per_user_epsilon`, `report.attack("rpt_bayes")`), and it is still the report
mapping: ``report["utility"]``, ``dict(report)`` and `report.to_dict()` give exactly the dict
written to `report.json`, so code written against that contract keeps working.

`privrec.sweep` returns a `Study`: its table (`rows`, the rows of `summary.csv` with their
types; `to_dataframe()` when pandas is installed), the per-point statistics and the paired
comparisons of `study.json`, and what the sweep did.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any


@dataclasses.dataclass(frozen=True, eq=False)
class Report(Mapping[str, Any]):
    """One run's report (the contract of `report.json`: README.md, "Run directory").

    Attributes:
        data: the report dict, as written to `report.json`.
        run_dir: the run directory the report was read from or written to, if known.
    """

    data: Mapping[str, Any]
    run_dir: Path | None = None

    @classmethod
    def read(cls, run_dir: str | Path) -> Report:
        """The report of the run in `run_dir` (its `report.json`)."""
        path = Path(run_dir)
        return cls(json.loads((path / "report.json").read_text()), path)

    # ------------------------------------------------------------------ Mapping
    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    def to_dict(self) -> dict[str, Any]:
        """A copy of the report dict, the same as `report.json` holds."""
        return copy.deepcopy(dict(self.data))

    # ------------------------------------------------------------------ sections
    @property
    def run(self) -> dict[str, Any]:
        """Identity of the run: id, seed, versions, start/end, launcher, dataset, model."""
        return dict(self.data["run"])

    @property
    def population(self) -> dict[str, Any]:
        """Users, items, shards and the server's counts (enrolled, releases accepted, …)."""
        return dict(self.data["population"])

    @property
    def privacy(self) -> dict[str, Any]:
        """The mechanism's formal statement (kind, ε, δ, neighbouring relation) and the
        per-user composition of every stored release (`per_user`)."""
        return dict(self.data["privacy"])

    @property
    def utility(self) -> dict[str, float]:
        """Utility metric → value (the model's, its non-private reference ``baseline_*``,
        and the trivial predictors where the referee scores them)."""
        return dict(self.data["utility"])

    @property
    def attacks(self) -> list[dict[str, Any]]:
        """Each attack's result: ``{name, knowledge, kind, metrics, ...}``."""
        return [dict(a) for a in self.data["attacks"]]

    @property
    def timings(self) -> dict[str, float]:
        """Phase or step → seconds."""
        return dict(self.data["timings"])

    # ------------------------------------------------------------------ derived
    @property
    def seed(self) -> int:
        """The run's seed."""
        return int(self.data["run"]["seed"])

    @property
    def epsilon(self) -> float | None:
        """The mechanism's ε per release, or None when it makes no DP claim."""
        eps = self.data["privacy"].get("epsilon")
        return None if eps is None else float(eps)

    @property
    def per_user_epsilon(self) -> dict[str, float] | None:
        """``{"median": ..., "max": ...}`` of every user's composed ε (at the report's δ), or
        None when no ε can be stated."""
        eps = self.data["privacy"].get("per_user", {}).get("per_user_epsilon")
        return None if eps is None else {k: float(v) for k, v in eps.items()}

    def attack(self, name: str) -> dict[str, Any]:
        """The metrics of attack `name`.

        Raises:
            KeyError: the run ran no attack of that name (the message lists those it ran).
        """
        for a in self.data["attacks"]:
            if a["name"] == name:
                return dict(a["metrics"])
        ran = [a["name"] for a in self.data["attacks"]]
        raise KeyError(f"no attack {name!r} in this run; it ran {ran}")

    def __repr__(self) -> str:
        where = f", run_dir={str(self.run_dir)!r}" if self.run_dir is not None else ""
        return f"Report(id={self.data['run']['id']!r}, utility={self.data['utility']!r}{where})"


@dataclasses.dataclass(frozen=True)
class Study:
    """A study's results, read from its directory (`privrec sweep`, `privrec.sweep`).

    Attributes:
        root: the study directory.
        rows: one dict per finished run: ``run_dir``, ``point``, ``seed``, each axis, ``seconds``
            and every scalar of the run's report (the columns of `summary.csv`).
        points: per point: its axis values, runs, seeds and each numeric column's n, mean, sd
            and 95 % t interval (`study.json`'s ``points``).
        comparisons: the paired tests between points that differ in one axis value.
        failed: run name → error, for the runs whose last attempt failed.
        ran: runs executed by the sweep that returned this (0 when read back).
        skipped: runs found finished when it started.
    """

    root: Path
    rows: list[dict[str, Any]]
    points: list[dict[str, Any]]
    comparisons: list[dict[str, Any]]
    failed: dict[str, str]
    ran: int = 0
    skipped: int = 0

    @classmethod
    def read(cls, root: str | Path, *, ran: int = 0, skipped: int = 0) -> Study:
        """The results in `root` (written by the sweep, or by `privrec sweep --report`)."""
        from privrec.sim.study.results import collect
        from privrec.sim.study.store import STUDY_JSON, StudyDir

        study = StudyDir(root)
        _, rows, _ = collect(study)
        doc = json.loads((study.root / STUDY_JSON).read_text())
        return cls(
            study.root,
            rows,
            doc["points"],
            doc["comparisons"],
            dict(doc["study"]["failed"]),
            ran,
            skipped,
        )

    def to_dataframe(self) -> Any:
        """The table as a pandas DataFrame (one row per run; pandas is not a dependency).

        Raises:
            ImportError: pandas is not installed (the message says how to get it).
        """
        try:  # through importlib: pandas is optional and ships no types here
            pd = importlib.import_module("pandas")
        except ImportError as exc:
            raise ImportError(
                f"Study.to_dataframe needs pandas ({exc}): pip install pandas; "
                "Study.rows holds the same table as a list of dicts"
            ) from None
        return pd.DataFrame(self.rows)

    def __repr__(self) -> str:
        return (
            f"Study(root={str(self.root)!r}, runs={len(self.rows)}, points={len(self.points)}, "
            f"failed={len(self.failed)})"
        )


__all__ = ["Report", "Study"]
