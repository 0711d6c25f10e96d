"""A population end to end: time per phase and peak memory per process, with growth exponents.

Runs `privrec sim --launcher processes --mqtt none` (a server process, `--shards` client shard
processes, the adversary process, the orchestrator/referee) on synthetic data
(`shared.data.synthetic.make_synthetic`: 1,000 items, density 0.05, about 50 ratings per
user) for each population size, with the model and attack whose cost is linear in users:

* mechanism OUE (ε = 8, Wang et al. 2017): each user releases her item set as m bits, about
  |P|/2 + m·q ≈ 26 of them set — the smallest release of the item-set mechanisms (BLIP sets
  ≈ 40 % of its 5,000 bits at ε = 8; the second-order mechanisms of the two-tier model send a
  dense m-vector per user, 8 kB, 8 GB at a million users);
* model `item_frequency` (`server.models.frequency`): OUE's frequency oracle, one column sum
  of the de-biased releases summed block by block (`ModelInput.ESTIMATE_SUM`): O(N·m) time,
  O(m) memory, nothing to serve (published; the serve phase is the shards downloading it);
  the factorisation and neighbourhood models are not linear on the server (kNN: N², a query
  against N releases) or need a training pass per epoch over every rating;
* attack `oue_decoder` (`adversary.attacks.oue_decoder`): per-user Bayes decoding in blocks.

For each size it prints the seconds of every phase (from report.json's `timings`) and the peak
resident memory (VmHWM, sampled from /proc every 0.2 s) of every process of the run, then the
growth exponent of each phase: the slope of log(seconds) on log(users) between consecutive
sizes, and fitted over the sizes where the phase's start-up is under 10 % of its time (target
≤ 1.1), and the totals against the targets (a million users in ≤ 10 minutes, the sum of every
process's peak ≤ 8 GiB). A phase's start-up is its time in a run of `STARTUP_USERS` users, made
first (processes starting, connections, the first batch): fitted on sizes where that fixed cost
dominates, an exponent says nothing about growth (issue 28: the old "extrapolated to 1M" line).
The CPU seconds of every process are printed beside each size's wall time.

    python bench/population.py --quick                  # 10,000 and 30,000 users (make bench)
    python bench/population.py --sizes 10000,100000,1000000
    python bench/population.py --users 100000 --shards 2
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from procs import PeakSampler, cpu_table  # bench/procs.py, shared with neighbourhood.py

PHASES = ("load", "enroll", "collect", "train", "serve", "attack", "report")
TARGET_SECONDS_1M = 600.0
TARGET_RSS_BYTES = 8 * 1024**3
TARGET_EXPONENT = 1.1
STARTUP_USERS = 200  # the run whose phase times are taken as the phases' start-up
STARTUP_SHARE = 0.1  # a size enters a phase's fit when start-up < 10 % of the phase

CONFIG = """\
[run]
name = "population"
seed = {seed}

[data]
dataset = "synthetic"
synthetic_users = {users}
synthetic_items = {items}

[population]
shards = {shards}

[mechanism]
name = "oue"

[mechanism.params]
epsilon = 8.0

[model]
name = "item_frequency"
k = 10

[adversary]
attacks = ["oue_decoder"]
"""


def phase_from_log(path: Path) -> Callable[[], str]:
    """The run's current phase, read from the progress lines `privrec sim` prints ("enroll
    users enrolled 448/100000 (1.2 s)"): the first word of the last one that names a phase."""

    def current() -> str:
        try:
            with open(path, "rb") as f:
                f.seek(max(0, f.seek(0, 2) - 4096))
                tail = f.read().decode(errors="replace").splitlines()
        except OSError:
            return "start"
        for line in reversed(tail):
            word = line.split(" ", 1)[0]
            if word in PHASES:
                return word
        return "start"

    return current


def run_once(users: int, items: int, shards: int, seed: int, work: Path) -> dict[str, Any]:
    """One `privrec sim` run of `users` users: wall seconds, phase seconds, peaks per role."""
    out = work / f"n{users}"
    shutil.rmtree(out, ignore_errors=True)
    config = work / f"population-{users}.toml"
    config.write_text(CONFIG.format(users=users, items=items, shards=shards, seed=seed))
    cmd = [sys.executable, "-m", "privrec.sim.cli", "sim", "--config", str(config)]
    cmd += ["--out", str(out), "--launcher", "processes", "--mqtt", "none"]
    t0 = time.perf_counter()
    with open(work / f"sim-{users}.log", "wb") as log:
        # unbuffered: the sampler tells the phase from the log's last progress line
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        sampler = PeakSampler(proc.pid, phase_from_log(work / f"sim-{users}.log"))
        sampler.start()
        code = proc.wait()
        peaks, cpu = sampler.stop()
    wall = time.perf_counter() - t0
    if code != 0:
        tail = (work / f"sim-{users}.log").read_text(errors="replace")[-3000:]
        raise SystemExit(f"privrec sim failed at {users} users (exit {code}):\n{tail}")
    report = json.loads((out / "report.json").read_text())
    timings = report["timings"]
    phases = {p: float(timings.get(p, 0.0)) for p in PHASES}
    return {
        "users": users,
        "wall": wall,
        "phases": phases,
        "details": {k: float(v) for k, v in timings.items() if k not in PHASES},
        "peaks": peaks,
        "together": sampler.together,
        "cpu": cpu,
        "cpu_by_phase": dict(sampler.by_phase),
        "utility": report["utility"],
        "attacks": {a["name"]: a["metrics"] for a in report["attacks"]},
    }


def _uptime() -> str:
    done = subprocess.run(["uptime"], capture_output=True, text=True, check=False)
    return done.stdout.strip()


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of log(y) on log(x) (NaN with < 2 points or a y <= 0)."""
    if len(xs) < 2 or min(ys) <= 0:
        return float("nan")
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def _gib(b: float) -> str:
    return f"{b / 1024**3:.2f}"


def seconds_of(r: dict[str, Any], phase: str) -> float:
    return float(r["wall"] if phase == "wall" else r["phases"][phase])


def growth_sizes(
    results: list[dict[str, Any]], startup: dict[str, Any] | None, phase: str
) -> list[int]:
    """Indices of the results whose `phase` took more than 10 x its start-up (all without a
    start-up run)."""
    if startup is None:
        return list(range(len(results)))
    floor = seconds_of(startup, phase) / STARTUP_SHARE
    return [i for i, r in enumerate(results) if seconds_of(r, phase) > floor]


def report(results: list[dict[str, Any]], startup: dict[str, Any] | None = None) -> bool:
    """Print the tables; True when every measured target holds. `startup`: the run of
    `STARTUP_USERS` users whose phase times are the phases' start-up."""
    sizes = [r["users"] for r in results]
    print("\nseconds per phase (report.json timings; wall = the whole `privrec sim`)")
    head = "".join(f"{n:>12,}" for n in sizes)
    if startup is not None:
        head = f"{'start-up':>12}" + head
    print(f"{'phase':<10}" + head + "   exponent(s)   fit (sizes with start-up < 10 %)")
    ok = True
    fits: dict[str, float] = {}
    for phase in (*PHASES, "wall"):
        ys = [seconds_of(r, phase) for r in results]
        steps = [slope(sizes[i : i + 2], ys[i : i + 2]) for i in range(len(sizes) - 1)]
        keep = growth_sizes(results, startup, phase)
        fit = slope([sizes[i] for i in keep], [ys[i] for i in keep])
        fits[phase] = fit
        first = f"{seconds_of(startup, phase):>12.2f}" if startup is not None else ""
        print(
            f"{phase:<10}"
            + first
            + "".join(f"{y:>12.2f}" for y in ys)
            + "   "
            + " ".join(f"{s:.2f}" for s in steps)
            + (f"   {fit:.2f} on {len(keep)}" if len(keep) >= 2 else "   n/a (start-up)")
            + ("" if math.isnan(fit) or fit <= TARGET_EXPONENT else "  > 1.1")
        )
        ok &= math.isnan(fit) or fit <= TARGET_EXPONENT or phase == "wall"
    roles = sorted({role for r in results for role in r["peaks"]})
    print("\npeak resident memory per process, GiB (VmHWM)")
    print(f"{'process':<32}" + "".join(f"{n:>12,}" for n in sizes))
    for role in roles:
        print(f"{role:<32}" + "".join(f"{_gib(r['peaks'].get(role, 0)):>12}" for r in results))
    totals = [sum(r["peaks"].values()) for r in results]
    print(f"{'total (sum of peaks)':<32}" + "".join(f"{_gib(t):>12}" for t in totals))
    print(
        f"{'held at once (largest sample)':<32}"
        + "".join(f"{_gib(r['together']):>12}" for r in results)
    )
    print("\nCPU seconds per process (utime + stime, last sample; load-independent work)")
    print(f"{'process':<32}" + "".join(f"{n:>12,}" for n in sizes) + "   fit")
    print(f"{'(wall seconds)':<32}" + "".join(f"{r['wall']:>12.1f}" for r in results))
    for role in roles:
        ys = [r["cpu"].get(role, 0.0) for r in results]
        print(f"{role:<32}" + "".join(f"{y:>12.1f}" for y in ys) + f"   {slope(sizes, ys):.2f}")
    cpu_totals = [sum(r["cpu"].values()) for r in results]
    print(
        f"{'total':<32}"
        + "".join(f"{y:>12.1f}" for y in cpu_totals)
        + f"   {slope(sizes, cpu_totals):.2f}"
    )
    for r in results:
        print(f"\nCPU seconds per process and phase at {r['users']:,} users (wall beside)")
        print("\n".join(cpu_table(r["cpu_by_phase"], r["phases"] | {"start": float("nan")})))
    print("\nutility and attack")
    for r in results:
        util = ", ".join(f"{k} {v:.4f}" for k, v in r["utility"].items())
        att = ", ".join(
            f"{name}: cosine {m.get('cosine_mean', float('nan')):.3f}"
            for name, m in r["attacks"].items()
        )
        print(f"  {r['users']:>9,}: {util}; {att}")
    big = [r for r in results if r["users"] >= 1_000_000]
    wall_fit = fits["wall"]
    rss_fit = slope(sizes, totals)
    if big:
        r = big[-1]
        print(
            f"\n1M users: {r['wall']:.0f} s (target <= {TARGET_SECONDS_1M:.0f}), "
            f"total peak RSS {_gib(sum(r['peaks'].values()))} GiB (target <= 8)"
        )
        ok &= r["wall"] <= TARGET_SECONDS_1M and sum(r["peaks"].values()) <= TARGET_RSS_BYTES
    elif len(sizes) >= 2 and not math.isnan(wall_fit):
        n0 = sizes[-1]
        wall_1m = results[-1]["wall"] * (1e6 / n0) ** wall_fit
        rss_1m = totals[-1] * (1e6 / n0) ** rss_fit
        print(
            f"\nextrapolated to 1M users with the fitted exponents (not measured): "
            f"{wall_1m:.0f} s (exponent {wall_fit:.2f}; target <= {TARGET_SECONDS_1M:.0f}), "
            f"total peak RSS {_gib(rss_1m)} GiB (exponent {rss_fit:.2f}; target <= 8)"
        )
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, help="one population size")
    parser.add_argument("--sizes", default="10000,100000,1000000", help="comma-separated sizes")
    parser.add_argument("--quick", action="store_true", help="10,000 and 30,000 users")
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--no-startup", action="store_true", help="fit every size (no start-up run first)"
    )
    parser.add_argument("--work", type=Path, help="keep the runs here (default: a temp dir)")
    args = parser.parse_args(argv)
    if args.users:
        sizes = [args.users]
    elif args.quick:
        sizes = [10_000, 30_000]
    else:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if not sizes or min(sizes) < 100:
        parser.error(f"--sizes/--users: need sizes >= 100, got {sizes}")
    print(f"uptime: {_uptime()}")
    print(f"OUE (eps 8) + item_frequency + oue_decoder, {args.items} items, {args.shards} shards")
    work = args.work or Path(tempfile.mkdtemp(prefix="privrec-population-"))
    work.mkdir(parents=True, exist_ok=True)
    results = []
    startup = None
    try:
        if not args.no_startup:
            startup = run_once(STARTUP_USERS, args.items, args.shards, args.seed, work)
            print(f"  start-up run ({STARTUP_USERS} users): {startup['wall']:.1f} s", flush=True)
        for n in sorted(sizes):
            t = time.perf_counter()
            results.append(run_once(n, args.items, args.shards, args.seed, work))
            print(f"  {n:,} users: {time.perf_counter() - t:.1f} s", flush=True)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    ok = report(results, startup)
    print(f"targets: {'met' if ok else 'MISSED (see above)'}")
    print(f"uptime: {_uptime()}")
    return 0  # a missed target is a figure, not a failure (a failed run exits non-zero)


if __name__ == "__main__":
    sys.exit(main())
