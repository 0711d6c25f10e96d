"""`privrec sweep`'s parallel efficiency: a study's wall time against the sum of its runs' times.

A study of `configs/quickstart.toml` over σ_max ∈ {0.5, 1, 2, 4} × 3 seeds (12 runs) is run in
a fresh directory with `--jobs` = the cores (`run_study`, the engine `privrec sweep` drives), and
each run's own wall time is read from its `done.json` (measured in its worker). The parallel
efficiency is

    speed-up = Σ run seconds / study wall seconds        (ideal: the number of jobs)

measured in one sweep, so both sides see the same machine load; the study's wall includes
everything a user waits for: the checks of every point, starting the workers, and writing
summary.csv, study.json, study.md and the figures. The same ratio over the runs alone (the
first run's start to the last run's end) and the seconds before and after are printed beside
it, to show where the rest goes. Repeated (default 3) with the median, and
`uptime`'s 1-minute load before each repeat; `--ray` does the same with the runs as tasks on a
local Ray (`--ray-address local`, its start included in the wall time).

    python bench/sweep.py                 # 3 repeats, local workers
    python bench/sweep.py --ray           # and on a local Ray
    python bench/sweep.py --repeats 1 --seeds 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = 0.8  # speed-up ≥ 0.8 × jobs


def load_1min() -> float:
    return os.getloadavg()[0]


def one_sweep(args: argparse.Namespace, ray: bool) -> dict[str, float]:
    from privrec.sim.study.engine import StudyStatus, SweepOptions, run_study
    from privrec.sim.study.spec import StudySpec
    from privrec.sim.study.store import StudyDir

    spec = StudySpec.load(args.config, grid=[args.grid], seeds=str(args.seeds))
    marks: dict[str, float] = {}

    def progress(status: StudyStatus) -> None:  # when the first run starts, the last ends
        now = time.perf_counter()
        if status.running and "first" not in marks:
            marks["first"] = now
        if status.done + status.failed == status.total and "last" not in marks:
            marks["last"] = now

    with tempfile.TemporaryDirectory(prefix="privrec-bench-sweep-") as tmp:
        load = load_1min()
        t0 = time.perf_counter()
        outcome = run_study(
            spec,
            Path(tmp) / "study",
            SweepOptions(jobs=args.jobs, ray_address="local" if ray else None, progress=progress),
        )
        wall = time.perf_counter() - t0
        if outcome.failed:
            sys.exit(f"bench/sweep.py: runs failed: {outcome.failed}")
        records = StudyDir(outcome.root).records()
        total = sum(r.seconds for r in records)
        assert len(records) == outcome.total == outcome.ran
    runs_wall = marks["last"] - marks["first"]
    return {
        "runs": len(records),
        "wall": wall,
        "sum": total,
        "speedup": total / wall,
        "before": marks["first"] - t0,  # checks, workers (or Ray) starting
        "runs_wall": runs_wall,
        "runs_speedup": total / runs_wall,
        "after": wall - (marks["last"] - t0),  # summary.csv, study.json/md, the figures
        "load": load,
    }


def main() -> int:
    from privrec.sim.study.pool import available_cores

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "configs" / "quickstart.toml"))
    parser.add_argument("--grid", default="mechanism.params.sigma_max=0.5,1,2,4")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=available_cores())
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ray", action="store_true", help="also on a local Ray")
    args = parser.parse_args()
    print(
        f"bench/sweep.py: {args.config} --grid {args.grid} --seeds {args.seeds} "
        f"--jobs {args.jobs} ({available_cores()} cores here; the machine may be shared: "
        "the 1-min load is printed beside each repeat)"
    )
    summary = {}
    for backend in ("local", "ray") if args.ray else ("local",):
        rows = []
        for i in range(args.repeats):
            r = one_sweep(args, ray=backend == "ray")
            rows.append(r)
            print(
                f"  {backend} #{i + 1}: {r['runs']:.0f} runs, wall {r['wall']:.1f} s, "
                f"Σ runs {r['sum']:.1f} s, speed-up {r['speedup']:.2f} "
                f"(= {r['speedup'] / args.jobs:.2f} × {args.jobs} jobs); the runs alone: "
                f"{r['runs_wall']:.1f} s, speed-up {r['runs_speedup']:.2f}; before the first "
                f"run {r['before']:.1f} s, after the last {r['after']:.1f} s; load {r['load']:.1f}",
                flush=True,
            )
        med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        ok = med["speedup"] >= TARGET * args.jobs
        print(
            f"{backend}: median of {args.repeats}: wall {med['wall']:.1f} s, Σ runs "
            f"{med['sum']:.1f} s, speed-up {med['speedup']:.2f} on {args.jobs} jobs "
            f"(target ≥ {TARGET * args.jobs:.1f}: {'met' if ok else 'NOT met'}); the runs "
            f"alone {med['runs_speedup']:.2f}; before {med['before']:.1f} s, after "
            f"{med['after']:.1f} s; load {med['load']:.1f}"
        )
        summary[backend] = med
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
