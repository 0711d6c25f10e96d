r"""`privrec sweep`: a study (a base config, axes, seeds) run in parallel, resumable, summarised.

    privrec sweep --config configs/quickstart.toml \
        --grid mechanism.params.sigma_max=0.5,1,2,4 --seeds 3 --out runs/s
    privrec sweep --report runs/s        # rebuild the tables and figures from the runs

Exit status: 0 when every run finished, 1 when some failed (the others are done and
summarised), 2 for bad input (nothing written), 128 + the signal when stopped (continue by
running the same command again).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from privrec.shared.errors import ConfigError

LOCAL_RAY = "local"


def add_sweep_command(subparsers: Any, add_set_argument: Any) -> argparse.ArgumentParser:
    """Add `privrec sweep` to the parser."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "sweep",
        help="run a study: a grid of runs × seeds, in parallel, resumable, with intervals",
        description="Run every point of a study (a base config and its axes) for every seed, "
        "each as an ordinary `privrec sim` run in OUT/runs/HASH, then write OUT/summary.csv, "
        "study.json, study.md and plots/. Running it again continues a stopped study.",
    )
    p.add_argument(
        "--config", help="base experiment TOML; a [sweep] table in it gives axes and seeds"
    )
    add_set_argument(p)
    p.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2,...",
        help="an axis (repeatable; axes combine as a product): --grid "
        "mechanism.params.epsilon=0.5,1,2 --grid mechanism.name=blip,jlt",
    )
    p.add_argument(
        "--zip",
        action="append",
        default=[],
        metavar="KEY=V1,V2,...",
        help="a paired axis (repeatable): all --zip axes vary together, value i with value i",
    )
    p.add_argument(
        "--seeds",
        metavar="N|S1,S2,...",
        help="seeds per point: a count N (the config's seed + 0..N-1) or a list (default 1)",
    )
    p.add_argument("--out", help="the study directory (default: runs/NAME-study)")
    p.add_argument(
        "--jobs",
        metavar="N",
        help="runs at once (default: the cores, or the Ray cluster's CPUs); each worker's "
        "numeric threads are the cores shared out",
    )
    p.add_argument(
        "--launcher",
        choices=("inprocess", "processes"),
        default="inprocess",
        help="each run's launcher: inprocess (default, no network) or processes (real gRPC "
        "and OS processes per run); same numbers",
    )
    p.add_argument(
        "--mqtt",
        choices=("none", "embedded"),
        help="each run's broker (default: none for inprocess, embedded for processes)",
    )
    p.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="run the runs as tasks on the Ray cluster at HOST:PORT (or auto; 'local' starts "
        "a Ray here); --out must be on a filesystem every Ray node mounts at the same path",
    )
    p.add_argument(
        "--report",
        metavar="RUN_DIR",
        help="only rebuild summary.csv, study.json, study.md and plots/ from RUN_DIR's runs",
    )
    p.set_defaults(func=run_sweep)
    return p


def _jobs(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"--jobs must be an integer >= 1, got {text!r}") from None


def run_sweep(args: argparse.Namespace) -> int:
    """`privrec sweep`: run or resume a study, or rebuild its report."""
    from rich.console import Console

    from privrec.shared.overrides import parse_assignment, parse_value
    from privrec.sim.study.engine import Interrupted, SweepOptions, run_study
    from privrec.sim.study.spec import StudySpec

    console = Console(stderr=True, soft_wrap=True)  # a message is one line, whatever its length
    if args.report:
        return _report_only(args, console)
    overrides: dict[str, Any] = {}
    for text in args.set or ():
        key, value = parse_assignment(text)
        overrides[key] = parse_value(value)
    spec = StudySpec.load(
        args.config, overrides=overrides, grid=args.grid, zipped=args.zip, seeds=args.seeds
    )
    out = Path(args.out) if args.out else Path("runs") / f"{spec.base.run.name}-study"
    progress = SweepProgress(console)
    options = SweepOptions(
        jobs=_jobs(args.jobs),
        launcher=args.launcher,
        mqtt=args.mqtt,
        ray_address=args.ray_address,
        progress=progress,
        on_finished=progress.finished,
    )
    t0 = time.perf_counter()
    try:
        with progress:
            outcome = run_study(spec, out, options)
    except Interrupted as exc:
        console.print(
            f"privrec sweep stopped ({exc}): {progress.done} of {progress.total} runs finished "
            f"in {out}; run the same command to continue"
        )
        return 128 + exc.signum
    console.print(
        f"study {out}: {outcome.total} runs ({outcome.ran} ran now, {outcome.skipped} finished "
        f"before, {len(outcome.failed)} failed) in {time.perf_counter() - t0:.1f} s"
    )
    print(f"results: {', '.join(str(out / r) for r in outcome.results if '/' not in r)}, plots/")
    return 1 if outcome.failed else 0


def _report_only(args: argparse.Namespace, console: Any) -> int:
    from privrec.sim.study.results import write_results
    from privrec.sim.study.store import StudyDir

    options = {"--config": args.config, "--grid": args.grid, "--zip": args.zip}
    options |= {"--seeds": args.seeds, "--set": args.set, "--out": args.out}
    given = [option for option, value in options.items() if value]
    if given:
        raise ConfigError(f"--report rebuilds a study's results alone; drop {', '.join(given)}")
    study = StudyDir(args.report)
    study.read_spec()  # refuses a directory that is no study
    written = write_results(study)
    console.print(f"rebuilt {len(written)} files in {study.root}")
    print(f"results: {', '.join(str(study.root / w) for w in written)}")
    return 0


class SweepProgress:
    """The study's progress line (rich), and a line per failed run; plain lines, one per
    finished run, on a console that is not a terminal."""

    def __init__(self, console: Any) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        self.console = console
        self.done = self.total = 0
        self._bar = Progress(
            "[progress.description]{task.description}",
            BarColumn(bar_width=24),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
        )
        self._task: Any = None
        self._plain = not console.is_terminal

    def __enter__(self) -> SweepProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._task is not None and not self._plain:
            self._bar.stop()

    def __call__(self, status: Any) -> None:
        self.done, self.total = status.done, status.total
        eta = "" if status.eta_s is None else f" · about {_duration(status.eta_s)} left"
        text = (
            f"runs: {status.done} done ({status.skipped} before), {status.running} running, "
            f"{status.failed} failed, {status.left} left{eta}"
        )
        if self._plain:
            return
        if self._task is None:
            self._bar.start()
            self._task = self._bar.add_task(text, total=status.total)
        self._bar.update(self._task, description=text, completed=status.done + status.failed)

    def finished(self, job: Any, outcome: Mapping[str, Any]) -> None:
        where = f"run {job.name} ({job.label})"
        if not outcome["ok"]:
            self.console.print(f"[red]{where} failed[/]: {outcome['error']}")
        elif self._plain:
            self.console.print(f"{where} done in {outcome['seconds']:.1f} s")


def _duration(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    return f"{m} min {s:02d} s" if m else f"{s} s"


__all__ = ["add_sweep_command", "run_sweep"]
