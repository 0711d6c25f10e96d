"""privrec's Python API: `simulate` one run, `sweep` a study; each with an awaitable twin.

The synchronous calls work from a plain script and from inside a running event loop (a
Jupyter notebook), where `asyncio.run` would refuse (`shared.aio.run_blocking`); the ``_async``
variants run the same call in a worker thread, so ``await privrec.simulate_async(...)`` keeps
the notebook's loop free. Paths may be strings, and a configuration may be given as the path
of its TOML file, with `overrides` as `privrec sim --set` takes them::

    import privrec
    report = privrec.simulate("configs/quickstart.toml", privrec.SimOptions("runs/q"))
    report.utility["ppcf_mae"], report.attack("rpt_bayes")["rmse_z"]
    study = privrec.sweep("configs/quickstart.toml",
                          {"mechanism.params.sigma_max": [0.5, 1, 2, 4]}, seeds=3, out="runs/s")
    study.to_dataframe()  # with pandas; study.rows without
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from privrec.shared.config import ExperimentConfig
from privrec.shared.overrides import override
from privrec.sim.results import Report, Study
from privrec.sim.run import SimOptions, run_id_for
from privrec.sim.run import simulate as _run
from privrec.sim.study.engine import StudyStatus, SweepOptions, run_study
from privrec.sim.study.spec import StudySpec

ConfigLike = ExperimentConfig | str | os.PathLike[str]
"""An experiment: the configuration itself, or the path of its TOML file."""


def load_config(config: ConfigLike, overrides: Mapping[str, Any] | None = None) -> ExperimentConfig:
    """`config` (read from its file if it is a path) with `overrides` (dotted key → value,
    as `privrec sim --set`) applied.

    Raises:
        ConfigError: the file is missing or invalid, or an override is (naming the key).
    """
    loaded = config if isinstance(config, ExperimentConfig) else ExperimentConfig.load(Path(config))
    return override(loaded, overrides or {})


def simulate(
    config: ConfigLike,
    options: SimOptions | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
) -> Report:
    """Run one experiment end to end, as `privrec sim` does; returns its report.

    Args:
        config: the experiment, or the path of its TOML file.
        options: where and how to run (default: `runs/RUN_ID`, the `processes` launcher and an
            embedded broker, as `privrec sim`).
        overrides: dotted config key → value, e.g. ``{"mechanism.params.epsilon": 2}``.

    Returns:
        The report (also written to the run directory with report.md and the plots).
    """
    cfg = load_config(config, overrides)
    opts = options if options is not None else SimOptions(Path("runs") / run_id_for(cfg))
    return Report(_run(cfg, opts), Path(opts.out_dir))


async def simulate_async(
    config: ConfigLike,
    options: SimOptions | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
) -> Report:
    """`simulate`, awaitable: the run goes on in a worker thread, the caller's loop goes on."""
    return await asyncio.to_thread(simulate, config, options, overrides=overrides)


def sweep(
    config: ConfigLike,
    grid: Mapping[str, Sequence[Any]] | None = None,
    *,
    zipped: Mapping[str, Sequence[Any]] | None = None,
    seeds: int | Sequence[int] = 1,
    out: str | os.PathLike[str],
    jobs: int | None = None,
    launcher: str = "inprocess",
    ray_address: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    progress: Callable[[StudyStatus], None] | None = None,
) -> Study:
    """Run a study, as `privrec sweep` does: every point of `grid` (a product) and `zipped`
    (paired axes) for every seed, `jobs` at once; a study already in `out` is continued.

    Args:
        config: the base experiment, or the path of its TOML file (its ``[sweep]`` table, if
            any, is not read here: pass the axes).
        grid: dotted config key → values, e.g. ``{"mechanism.params.epsilon": [1, 2, 4]}``.
        zipped: keys whose values vary together (value i of each with value i of the others).
        seeds: a count N (the config's seed + 0..N-1) or the seeds themselves.
        out: the study directory.
        jobs: runs at once (default: the cores, or the Ray cluster's CPUs).
        launcher: each run's launcher, "inprocess" (default) or "processes".
        ray_address: run the runs as Ray tasks on this cluster ("local": a Ray started here).
        overrides: dotted key → value applied to the base config first.
        progress: told the study's `StudyStatus` as runs start and finish.

    Returns:
        The study's results (also in `out`: summary.csv, study.json, study.md, plots/).

    Raises:
        ConfigError: a bad axis, value, seed count or option, or an `out` holding another
            study (nothing is run or written then).
    """
    spec = StudySpec.from_axes(load_config(config, overrides), grid, zipped, seeds)
    options = SweepOptions(jobs=jobs, launcher=launcher, ray_address=ray_address, progress=progress)
    outcome = run_study(spec, out, options)
    return Study.read(outcome.root, ran=outcome.ran, skipped=outcome.skipped)


async def sweep_async(
    config: ConfigLike, grid: Mapping[str, Sequence[Any]] | None = None, **kwargs: Any
) -> Study:
    """`sweep`, awaitable: the study goes on in a worker thread, the caller's loop goes on."""
    return await asyncio.to_thread(functools.partial(sweep, config, grid, **kwargs))


__all__ = [
    "ConfigLike",
    "Report",
    "Study",
    "load_config",
    "simulate",
    "simulate_async",
    "sweep",
    "sweep_async",
]
