"""One run of a study, where it is executed: a local worker process or a Ray task.

`execute(task)` takes a plain dict (it crosses a pipe or Ray), clears whatever a previous,
interrupted attempt left in the run directory, runs `privrec sim`'s own `simulate` on the run's
resolved configuration, and writes `done.json` last (`sim.study.store`). A run that raises is
recorded in `failed.json` and reported back; it never stops the other runs. An interrupt
(SIGTERM, Ctrl-C) is not caught: the half-written directory is redone next time.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import shutil
import time
import tomllib
import traceback
from pathlib import Path
from typing import Any

from privrec.shared.config import ExperimentConfig
from privrec.sim.study.store import DONE_FILE, FAILED_FILE, RunRecord, write_atomically

RUN_LOG = "sweep-run.log"
"""The run's log, inside its directory (warnings and errors of this process)."""


@dataclasses.dataclass(frozen=True)
class Task:
    """What a worker needs to execute one run (sent as a dict).

    Attributes:
        name: the run's name (its directory's).
        run_dir: the run directory, absolute.
        config: the run's resolved configuration as TOML.
        point: the point's index. axes: axis key → value. seed: the run's seed.
        launcher: "inprocess" or "processes". mqtt: "none" or "embedded".
        where: "local" or "ray" (recorded in done.json).
    """

    name: str
    run_dir: str
    config: str
    point: int
    axes: dict[str, Any]
    seed: int
    launcher: str
    mqtt: str
    where: str = "local"


def outcome(name: str, *, ok: bool, seconds: float = 0.0, error: str = "") -> dict[str, Any]:
    """What a worker reports of a run: ``{name, ok, seconds, error}``."""
    return {"name": name, "ok": ok, "seconds": seconds, "error": error}


def execute(raw: dict[str, Any]) -> dict[str, Any]:
    """Execute one run (module docstring); returns its `outcome`."""
    from privrec.sim.run import SimOptions, simulate

    task = Task(**raw)
    out = Path(task.run_dir)
    if out.exists():  # an earlier attempt's leftovers: the run starts again from nothing
        shutil.rmtree(out)
    out.mkdir(parents=True)
    handler = logging.FileHandler(out / RUN_LOG)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    logging.getLogger().addHandler(handler)
    t0 = time.perf_counter()
    try:
        config = ExperimentConfig.from_dict(tomllib.loads(task.config))
        simulate(config, SimOptions(out_dir=out, launcher=task.launcher, mqtt=task.mqtt))
    except Exception as exc:
        seconds = time.perf_counter() - t0
        error = f"{type(exc).__name__}: {exc}".splitlines()[0]
        logging.getLogger(__name__).exception("run %s failed", task.name)
        failure = {
            "name": task.name,
            "error": error,
            "traceback": traceback.format_exc(),
            "seconds": seconds,
            "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
        write_atomically(out / FAILED_FILE, json.dumps(failure, indent=2))
        return outcome(task.name, ok=False, seconds=seconds, error=error)
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()
    seconds = time.perf_counter() - t0
    record = RunRecord(
        task.name, task.point, task.axes, task.seed, seconds, task.launcher, task.where
    )
    write_atomically(out / DONE_FILE, json.dumps(dataclasses.asdict(record), indent=2))
    return outcome(task.name, ok=True, seconds=seconds)


__all__ = ["RUN_LOG", "Task", "execute", "outcome"]
