"""privrec's Python API: `simulate` one run, `sweep` a study; each with an awaitable twin.

The synchronous calls work from a plain script and from inside a running event loop (a
Jupyter notebook), where `asyncio.run` would refuse (`shared.aio.run_blocking`); the ``_async``
variants run the same call in a worker thread, so ``await privrec.simulate_async(...)`` keeps
the notebook's loop free. Paths may be strings, and a configuration may be given as the path
of its TOML file, with `overrides` as `privrec sim --set` takes them::

    import privrec
    report = privrec.simulate("configs/quickstart.toml", privrec.SimOptions("runs/q"))
    report.utility["ppcf_mae"], report.attack("rpt_bayes")["rmse_z"]
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from privrec.shared.config import ExperimentConfig
from privrec.shared.overrides import override
from privrec.sim.results import Report
from privrec.sim.run import SimOptions, run_id_for
from privrec.sim.run import simulate as _run

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


__all__ = ["ConfigLike", "Report", "load_config", "simulate", "simulate_async"]
