"""`privrec sweep`'s parallel efficiency: a study's wall time against the sum of its runs' times.

A study of `configs/quickstart.toml` over σ_max ∈ {0.5, 1, 2, 4} × 3 seeds (12 runs) is run by
the command a user types, `privrec sweep ... --jobs N` (N = the cores), in a fresh directory and
a fresh process, and each run's own wall time is read from its `done.json` (measured in its
worker). The parallel efficiency is

    speed-up = Σ run seconds / the command's wall seconds        (ideal: the number of jobs)

measured in one sweep, so both sides see the same machine load. The command's wall includes
everything a user waits for: Python and privrec starting, the checks of every point, the workers
starting, and writing summary.csv, study.json, study.md and the figures. The same ratio over the
runs alone (the first run's start to the last run's end, from `done.json`) and the seconds before
and after are printed beside it, to show where the rest goes. Repeated (default 3) with the
median, and `uptime`'s 1-minute load before each repeat; `--ray` does the same with the runs as
tasks on a local Ray (`--ray-address local`, its start included in the wall time), or on a
running cluster with `--ray-address HOST:PORT` (a user's cluster: its start not included).

    python bench/sweep.py                 # 3 repeats, local workers
    python bench/sweep.py --ray           # and on a local Ray started by each sweep
    ray start --head --num-cpus 2 && python bench/sweep.py --ray --ray-address 127.0.0.1:6379
    python bench/sweep.py --repeats 1 --seeds 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = 0.8  # speed-up ≥ 0.8 × jobs


def one_sweep(args: argparse.Namespace, ray: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="privrec-bench-sweep-") as tmp:
        out = Path(tmp) / "study"
        argv = [sys.executable, "-m", "privrec.sim.cli", "sweep", "--config", args.config]
        argv += ["--grid", args.grid, "--seeds", str(args.seeds), "--jobs", str(args.jobs)]
        argv += ["--out", str(out)] + (["--ray-address", args.ray_address] if ray else [])
        load = os.getloadavg()[0]
        t0 = time.time()
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        end = time.time()
        if done.returncode != 0:
            sys.exit(f"bench/sweep.py: the sweep failed ({done.returncode}): {done.stderr}")
        records = [json.loads(p.read_text()) for p in out.glob("runs/*/done.json")]
    total = sum(r["seconds"] for r in records)
    first, last = min(r["started"] for r in records), max(r["finished"] for r in records)
    return {
        "runs": len(records),
        "wall": end - t0,
        "sum": total,
        "speedup": total / (end - t0),
        "before": first - t0,  # start-up, checks, workers (or Ray) starting
        "runs_wall": last - first,
        "runs_speedup": total / (last - first),
        "after": end - last,  # summary.csv, study.json/md, the figures
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
    parser.add_argument(
        "--ray-address", default="local", help="with --ray: a running cluster's HOST:PORT"
    )
    args = parser.parse_args()
    print(
        f"bench/sweep.py: privrec sweep --config {args.config} --grid {args.grid} --seeds "
        f"{args.seeds} --jobs {args.jobs} ({available_cores()} cores here; the machine may be "
        "shared: the 1-min load is printed beside each repeat)"
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
