"""`privrec sweep`'s engine: check a study, run what is not finished, write the results.

1. Every run's configuration is resolved and every point passes the checks a run makes before
   it starts (`sim.run.preflight`: parameters, DP claim, attacks, side knowledge), and the
   `--out` directory is checked to hold this study or nothing (`StudyDir.check`); a refusal
   changes nothing on disk.
2. The runs without a `done.json` go to the backend (`sim.study.pool`): local workers, or Ray
   tasks. Runs finished earlier are skipped, runs left half-written are redone from nothing; a
   run that fails is recorded and reported and the others go on.
3. Progress (`StudyStatus`: done, running, failed, left, and the time left estimated from the
   runs finished so far) is told to a callback as events arrive.
4. The results are written from the run directories (`sim.study.results`); with local
   workers, they save the figures (`sim.study.drawing`) before they are stopped.

SIGTERM and SIGINT stop the sweep (`Interrupted`): the workers are stopped, each stopping its
run's nodes, and the same command continues the study later.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from privrec.shared.errors import ConfigError
from privrec.sim.study.execute import Job
from privrec.sim.study.pool import (
    Backend,
    InlineBackend,
    LocalPool,
    RayPool,
    available_cores,
    keep_logs,
    threads_per_worker,
)
from privrec.sim.study.spec import Run, StudySpec
from privrec.sim.study.store import RunRecord, StudyDir

LAUNCHERS = ("inprocess", "processes")
POLL_S = 0.5


class Interrupted(KeyboardInterrupt):
    """The sweep was stopped by a signal (SIGINT or SIGTERM); `signum` says which."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@dataclasses.dataclass
class StudyStatus:
    """Where a sweep is: runs done (this sweep or before), running, failed, left."""

    total: int
    done: int = 0
    running: int = 0
    failed: int = 0
    skipped: int = 0  # finished before this sweep started
    eta_s: float | None = None  # estimated seconds left (None until a run has finished)

    @property
    def left(self) -> int:
        """Runs not started yet."""
        return self.total - self.done - self.running - self.failed


@dataclasses.dataclass(frozen=True)
class SweepOptions:
    """How to run a study.

    Attributes:
        jobs: runs at once (default: the cores here, or the Ray cluster's CPUs).
        launcher: each run's launcher: "inprocess" (default) or "processes" (real gRPC).
        mqtt: "none" or "embedded" (default: none for inprocess, embedded for processes).
        ray_address: send the runs to this Ray cluster ("local": a Ray started here).
        progress: told the `StudyStatus` as it changes.
        on_finished: told each job (`sim.study.execute.Job`) and its outcome
            ``{name, ok, seconds, error}``.
        figures: draw the study's figures (a study run for its numbers alone skips them).
    """

    jobs: int | None = None
    launcher: str = "inprocess"
    mqtt: str | None = None
    ray_address: str | None = None
    progress: Callable[[StudyStatus], None] | None = None
    on_finished: Callable[[Job, Mapping[str, Any]], None] | None = None
    figures: bool = True

    def resolved_mqtt(self) -> str:
        """The broker to use: the given one, else none in-process and an embedded one otherwise."""
        if self.mqtt is not None:
            return self.mqtt
        return "none" if self.launcher == "inprocess" else "embedded"

    def check(self) -> None:
        """Raises `ConfigError` naming the bad option."""
        if self.jobs is not None and (isinstance(self.jobs, bool) or self.jobs < 1):
            raise ConfigError(f"--jobs must be >= 1, got {self.jobs}")
        if self.launcher not in LAUNCHERS:
            raise ConfigError(
                f"--launcher must be one of {', '.join(LAUNCHERS)} for a sweep (to spread the "
                f"runs over a Ray cluster use --ray-address), got {self.launcher!r}"
            )
        if self.resolved_mqtt() not in ("none", "embedded"):
            raise ConfigError(
                "--mqtt: a sweep runs each run with its own embedded broker or none (runs at "
                f"once would share an external broker's topics), got {self.mqtt!r}"
            )
        if self.launcher == "inprocess" and self.resolved_mqtt() != "none":
            raise ConfigError("--mqtt embedded needs --launcher processes (inprocess has no nodes)")


@dataclasses.dataclass(frozen=True)
class SweepOutcome:
    """What a sweep did: runs in the study, skipped as finished, run now, failed (name →
    error), its wall time, and the results written."""

    root: Path
    total: int
    skipped: int
    ran: int
    failed: dict[str, str]
    seconds: float
    results: tuple[str, ...]


def check_points(runs: list[Run]) -> None:
    """`sim.run.preflight` for every point, on its first seed's population.

    Raises:
        ConfigError, UnsupportedEventError: naming the point and the key.
    """
    from privrec.shared.errors import PrivrecError
    from privrec.shared.population import load_population
    from privrec.sim.run import preflight

    datasets: dict[tuple[str, int], Any] = {}
    checked: set[int] = set()
    for run in runs:
        if run.point in checked:
            continue
        checked.add(run.point)
        key = (repr(run.config.data), run.seed if run.config.data.dataset == "synthetic" else 0)
        try:
            if key not in datasets:
                datasets[key] = load_population(run.config.data, run.seed)
            preflight(run.config, datasets[key])
        except PrivrecError as exc:
            where = run.describe().rsplit(", seed", 1)[0] if run.axes else "the base config"
            raise type(exc)(f"point {where}: {exc}") from exc


@contextlib.contextmanager
def signals_interrupt() -> Iterator[None]:
    """SIGTERM and SIGINT raise `Interrupted` in the main thread for the block's duration
    (elsewhere, signals are left alone: only the main thread can handle them)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: Any) -> None:
        raise Interrupted(signum)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def run_study(spec: StudySpec, out: str | os.PathLike[str], options: SweepOptions) -> SweepOutcome:
    """Check, run and summarise the study `spec` in `out` (module docstring).

    Raises:
        ConfigError: a bad option, point or `--out` (nothing on disk changed).
        Interrupted: SIGTERM or SIGINT (the workers are stopped first).
    """
    t0 = time.perf_counter()
    options.check()
    runs = spec.runs()
    study = StudyDir(Path(out).resolve())
    study.check(spec)
    todo = [r for r in runs if not study.is_done(r)]
    status = StudyStatus(total=len(runs), done=len(runs) - len(todo), skipped=len(runs) - len(todo))
    failed: dict[str, str] = {}
    with contextlib.ExitStack() as stack:
        stack.enter_context(signals_interrupt())
        if todo:  # forked once `sim.run` is imported here, or started to import it meanwhile
            backend, jobs, where = stack.enter_context(
                open_backend(options, study.root / "logs", len(todo), study.study_file)
            )
        if todo:  # (a study with nothing left to run was checked when it ran)
            check_points(runs)
        stack.enter_context(study.opened(spec))
        if todo:
            work = [run_job(study, r, options, where) for r in todo]
            dispatch(backend, work, options, status, failed, jobs)
        if todo or not study.results_written():
            # imported here, not before the workers start: matplotlib and scipy take ~2 s,
            # and by now `check_points` has imported them (through `sim.run`) beside the workers
            from privrec.sim.study.drawing import in_turn, in_workers
            from privrec.sim.study.results import write_results

            render = in_workers(backend) if todo and isinstance(backend, LocalPool) else in_turn
            results = write_results(study, figures=options.figures, render=render)
        else:  # nothing ran: the results written last time stand (`--report` redraws them)
            results = study.results_written()
    return SweepOutcome(
        study.root,
        len(runs),
        status.skipped,
        len(todo) - len(failed),
        failed,
        time.perf_counter() - t0,
        tuple(results),
    )


def run_job(study: StudyDir, run: Run, options: SweepOptions, where: str) -> Job:
    """The job that executes `run` (`sim.study.execute`, kind "sim")."""
    record = RunRecord.of(run, 0.0, options.launcher, where)
    payload = {
        "kind": "sim",
        "dir": str(study.run_dir(run)),
        "record": {k: v for k, v in dataclasses.asdict(record).items() if k != "seconds"},
        "config": run.config.to_toml(),
        "launcher": options.launcher,
        "mqtt": options.resolved_mqtt(),
    }
    return Job(run.name, payload, run.describe())


@contextlib.contextmanager
def open_backend(
    options: SweepOptions, log_dir: Path, n_jobs: int, keep_if: Path | None = None
) -> Iterator[tuple[Backend, int, str]]:
    """The backend jobs go to (local workers, this process for a lone job, or Ray), with its
    bound on jobs at once and its name ("local" or "ray"). The local workers' logs are kept
    in `log_dir` at the end, when `keep_if` exists (an accepted study) or is None."""
    if options.ray_address is None and n_jobs == 1:
        yield InlineBackend(), 1, "local"
        return
    if options.ray_address is None:
        jobs = min(options.jobs or available_cores(), n_jobs)
        with tempfile.TemporaryDirectory(prefix="privrec-sweep-") as scratch:
            pool = LocalPool(jobs, threads_per_worker(jobs), Path(scratch))
            try:
                yield pool, jobs, "local"
            except BaseException:
                pool.stop()
                raise
            else:
                pool.close()
            finally:
                if keep_if is None or keep_if.exists():  # (not into a refused study)
                    keep_logs(Path(scratch), log_dir)
        return
    from privrec.sim.ray_launcher import ray_cluster

    local = options.ray_address == "local"
    want = options.jobs or (available_cores() if local else 1)
    with ray_cluster(None if local else options.ray_address, want) as ray:
        jobs = options.jobs or max(1, int(ray.cluster_resources().get("CPU", 1)))
        ray_pool = RayPool(ray, min(jobs, n_jobs), threads=1)
        try:
            yield ray_pool, jobs, "ray"
        except BaseException:
            ray_pool.stop()
            raise


def dispatch(
    backend: Backend,
    work: list[Job],
    options: SweepOptions,
    status: StudyStatus,
    failed: dict[str, str],
    jobs: int,
) -> None:
    """Submit every job of `work` and follow the events until all have finished, telling
    `options.progress` the status and `options.on_finished` each outcome."""
    by_name = {job.name: job for job in work}
    for job in work:
        backend.submit(job.payload)
    started: dict[str, float] = {}
    durations: list[float] = []
    finished = 0
    tell = options.progress or (lambda _status: None)
    tell(status)
    while finished < len(work):
        for kind, payload in backend.events(POLL_S):
            if kind == "started":
                started[payload] = time.monotonic()
                status.running += 1
                continue
            name = payload["name"]
            started.pop(name, None)
            status.running -= 1
            finished += 1
            durations.append(float(payload.get("seconds") or 0.0))
            if payload["ok"]:
                status.done += 1
            else:
                status.failed += 1
                failed[name] = payload["error"]
            if options.on_finished is not None:
                options.on_finished(by_name[name], payload)
        status.eta_s = _eta(durations, started, status.left, jobs)
        tell(status)


def _eta(durations: list[float], started: dict[str, float], left: int, jobs: int) -> float | None:
    """Seconds left: the mean time of the runs finished so far, for each run not started and
    what remains of it for each running one, shared by the `jobs` runs at once."""
    times = [d for d in durations if d > 0]
    if not times:
        return None
    mean = sum(times) / len(times)
    now = time.monotonic()
    work = left * mean + sum(max(mean - (now - t), 0.0) for t in started.values())
    return work / max(1, min(jobs, left + len(started)))


__all__ = [
    "Interrupted",
    "StudyStatus",
    "SweepOptions",
    "SweepOutcome",
    "check_points",
    "dispatch",
    "open_backend",
    "run_job",
    "run_study",
    "signals_interrupt",
]
