"""A list of configurations as a study: what `privrec reproduce`'s grids of runs are.

A reproduction that runs `privrec sim` once per cell of its grid (Balu's ε grid, Xin &
Jaakkola's series) builds each cell's configuration itself. `study_of` turns such a list into a
study whose zipped axes are the keys in which the configurations differ (each its own point;
one seed), so `run_configs` runs them on the sweep engine like any study: at once on the cores,
each in a run directory named by its configuration's hash, resumed after an interruption, and
reused by the next reproduction that needs the same runs (e.g. `balu-fig3.4-3.5` reads the
runs `balu-fig3.2` made).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from privrec.shared.config import SECTIONS, ExperimentConfig
from privrec.shared.errors import PrivrecError
from privrec.sim.results import Report
from privrec.sim.study.spec import Axis, StudySpec, run_name


class StudyFailed(PrivrecError):
    """A run of a reproduction's study failed; the message names it."""


def _toml_value(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def study_of(configs: Sequence[ExperimentConfig]) -> StudySpec:
    """The study whose points are `configs`, in order (module docstring).

    Raises:
        ValueError: no configuration, or configurations of different seeds.
    """
    if not configs:
        raise ValueError("study_of needs at least one configuration")
    seeds = {c.run.seed for c in configs}
    if len(seeds) != 1:
        raise ValueError(f"the configurations of one study share a seed, got {sorted(seeds)}")
    axes = []
    for section, cls in SECTIONS.items():
        for field in dataclasses.fields(cls):
            values = [_toml_value(getattr(getattr(c, section), field.name)) for c in configs]
            if any(v != values[0] for v in values):
                axes.append(Axis(f"{section}.{field.name}", tuple(values)))
    return StudySpec(base=configs[0], zipped=tuple(axes), seeds=(configs[0].run.seed,))


def study_dir(spec: StudySpec, parent: Path, prefix: str) -> Path:
    """`parent/PREFIX-HASH`: one directory per distinct study."""
    digest = hashlib.sha256(spec.identity().encode()).hexdigest()[:12]
    return parent / f"{prefix}-{digest}"


def run_configs(
    configs: Sequence[ExperimentConfig], parent: Path, prefix: str, *, jobs: int | None = None
) -> list[Report]:
    """Run `configs` as one study in `study_dir(...)` (in-process launcher, no figures) and
    return their reports, in order.

    Raises:
        StudyFailed: a run failed (naming it and its error).
    """
    from privrec.sim.study.engine import SweepOptions, run_study

    spec = study_of(configs)
    names = [r.name for r in spec.runs()]
    expected = [run_name(c) for c in configs]
    assert names == expected, "a study's runs must be the configurations given"  # invariant
    outcome = run_study(
        spec, study_dir(spec, parent, prefix), SweepOptions(jobs=jobs, figures=False)
    )
    if outcome.failed:
        name, error = next(iter(outcome.failed.items()))
        raise StudyFailed(f"run {outcome.root / 'runs' / name} failed: {error}")
    return [Report.read(outcome.root / "runs" / name) for name in names]


__all__ = ["StudyFailed", "run_configs", "study_dir", "study_of"]
