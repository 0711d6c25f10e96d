"""One job of the engine, where it is executed: a local worker process or a Ray task.

A job is a plain dict (it crosses a pipe or Ray) with its ``kind``, its directory ``dir`` and
the ``record`` its `done.json` will hold. `execute(job)` clears whatever a previous, interrupted
attempt left in the directory, does the work, and writes `done.json` last (`sim.study.store`):

* ``"sim"``: one run of a study: `privrec sim`'s own `simulate` on the run's resolved
  configuration (``config``, TOML), with its ``launcher`` and ``mqtt``;
* ``"call"``: ``function`` (``"package.module:name"``) called with ``kwargs`` and
  ``work_dir=dir``; its result (a JSON-able dict) goes into `done.json` as ``result`` (a
  `privrec reproduce` repeat, `sim.reproduce.runner`).

A job that raises is recorded in `failed.json` and reported back; it never stops the others. An
interrupt (SIGTERM, Ctrl-C) is not caught: the half-written directory is redone next time.
`done.json` also holds the job's wall ``seconds`` and its ``started``/``finished`` times
(seconds since the epoch).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib
import json
import logging
import shutil
import time
import tomllib
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from privrec.shared.config import ExperimentConfig
from privrec.sim.study.store import DONE_FILE, FAILED_FILE, write_atomically

RUN_LOG = "sweep-run.log"
"""The job's log, inside its directory (warnings and errors of this process)."""


@dataclasses.dataclass(frozen=True)
class Job:
    """What the engine dispatches: a name, the dict a worker executes, and a label for people.

    Attributes:
        name: unique within one dispatch (a run's hash, ``repeat-2``).
        payload: the job dict (module docstring).
        label: what the job is, e.g. ``sigma_max=0.5, seed 2``.
    """

    name: str
    payload: Mapping[str, Any]
    label: str


def outcome(name: str, *, ok: bool, seconds: float = 0.0, error: str = "") -> dict[str, Any]:
    """What a worker reports of a job: ``{name, ok, seconds, error}``."""
    return {"name": name, "ok": ok, "seconds": seconds, "error": error}


def _call(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def _work(job: Mapping[str, Any], out: Path) -> Any:
    if job["kind"] == "sim":
        from privrec.sim.run import SimOptions, simulate

        config = ExperimentConfig.from_dict(tomllib.loads(job["config"]))
        simulate(config, SimOptions(out_dir=out, launcher=job["launcher"], mqtt=job["mqtt"]))
        return None
    if job["kind"] == "call":
        return _call(job["function"])(**job["kwargs"], work_dir=out)
    raise ValueError(f"unknown job kind {job['kind']!r}")


def execute(job: Mapping[str, Any]) -> dict[str, Any]:
    """Execute one job (module docstring); returns its `outcome`."""
    name = str(job["record"]["name"])
    out = Path(job["dir"])
    if out.exists():  # an earlier attempt's leftovers: the job starts again from nothing
        shutil.rmtree(out)
    out.mkdir(parents=True)
    handler = logging.FileHandler(out / RUN_LOG)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    logging.getLogger().addHandler(handler)
    t0, started = time.perf_counter(), time.time()
    try:
        result = _work(job, out)
    except Exception as exc:
        seconds = time.perf_counter() - t0
        error = f"{type(exc).__name__}: {exc}".splitlines()[0]
        logging.getLogger(__name__).exception("job %s failed", name)
        failure = {
            "name": name,
            "error": error,
            "traceback": traceback.format_exc(),
            "seconds": seconds,
            "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
        write_atomically(out / FAILED_FILE, json.dumps(failure, indent=2))
        return outcome(name, ok=False, seconds=seconds, error=error)
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()
    seconds = time.perf_counter() - t0
    record = {**job["record"], "seconds": seconds, "started": started, "finished": time.time()}
    if result is not None:
        record["result"] = result
    write_atomically(out / DONE_FILE, json.dumps(record, indent=2))
    return outcome(name, ok=True, seconds=seconds)


__all__ = ["RUN_LOG", "Job", "execute", "outcome"]
