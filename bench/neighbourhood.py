"""Neighbourhood models at scale: RPT + PPCF + its attacks end to end, and the serve block
product against the per-query reference path, measured in the same run.

Target (issue 13, target 2): `privrec sim` on synthetic data (1,000 items, density 0.05) with
the processes launcher, RPT + PPCF + the three RPT attacks, at 100,000 users in <= 10 minutes.

1. The end-to-end run (`sim.run.simulate`, launcher `--launcher`): the time of each phase as
   the orchestrator reports it (load, enroll, collect, train, serve, attack, report and their
   sub-steps), the server's own time answering queries (`server_answer`), and the whole; then
   the CPU seconds of each process (orchestrator and referee = this process, server, shards,
   adversary) in each phase (`bench/procs.py`): a phase whose CPU seconds, summed over its
   processes, stay near its wall time used one core however many the machine has.
2. The serve block product in this process, on the same kind of population: PPCF fitted on the
   users' RPT releases (5 folds), `--sample` of them querying with a fresh release and 5 target
   items, answered with ``method="block"`` (`server.models.knn_block`, each block by the
   cheaper of its two weight passes), ``"scatter"`` (the scatter pass only, what "block" was
   before the pass over the rows) and ``"reference"`` (one query at a time), alternated,
   `--repeats` times; medians per query and their ratios, and whether the answers are equal
   bit for bit. The same for the referee's Pearson baseline
   (`PearsonKNN` on true ratings), and for `cosine_knn` (the published kNN graph of OUE and
   the referee's true graph: argpartition against the full sort) on `--graph-users` rows.

Issue 28 (item 3): a million users with 10,000 test users and 10,000 attack targets, in
<= 20 minutes and <= 16 GiB summed peak memory, every phase's growth exponent between 100,000
and 1,000,000 users <= 1.1; 100,000 users with every user tested in <= 10 minutes.
`--sizes 100000,1000000` runs each size and prints each phase's exponent (the slope of
log seconds, and of the CPU seconds summed over the processes, on log users).

Usage: python bench/neighbourhood.py [--users N | --sizes A,B] [--test-users N]
       [--candidates all|sampled] [--no-ranking] [--quick] [--skip-sim] [--skip-ratio]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from privrec.server.models.knn import PPCF, PearsonKNN
from privrec.server.models.sketch_knn import cosine_knn
from privrec.shared.config import ExperimentConfig
from privrec.shared.data import make_synthetic
from privrec.shared.data.dataset import RatingData
from privrec.shared.mechanisms.base import Profile
from privrec.shared.mechanisms.rpt import RandomizedPerturbation
from privrec.shared.seeding import rng_for
from privrec.sim.progress import split
from privrec.sim.run import SimOptions, simulate

sys.path.insert(0, str(Path(__file__).resolve().parent))
from population import slope  # bench/population.py: the exponent's fit
from procs import PeakSampler, cpu_table  # bench/procs.py, shared with population.py

SEED = 0
ATTACKS = ("rpt_spectral", "rpt_bayes", "rpt_fake_detection")


def uptime() -> str:
    try:
        return subprocess.run(
            ["uptime"], check=False, capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        return f"load {os.getloadavg()}"


def bench_config(args: argparse.Namespace, users: int) -> ExperimentConfig:
    """RPT + PPCF (k = 100) + the three RPT attacks on `users` synthetic users, with the
    bench's evaluation and attack sampling (`--test-users`, `--targets`, `--fit-users`,
    `--candidates`, `--no-ranking`)."""
    return ExperimentConfig.from_dict(
        {
            "run": {"name": f"neighbourhood-{users}", "seed": SEED},
            "data": {
                "dataset": "synthetic",
                "synthetic_users": users,
                "synthetic_items": args.items,
            },
            "mechanism": {"name": "rpt"},
            "model": {"name": "ppcf", "k": 100},
            "adversary": {
                "attacks": list(ATTACKS),
                "targets": args.targets,
                "fit_users": args.fit_users,
            },
            "evaluation": {
                "test_users": args.test_users,
                "ranking": not args.no_ranking,
                "candidates": args.candidates,
            },
        }
        | ({"population": {"concurrency": args.concurrency}} if args.concurrency else {})
    )


def end_to_end(
    args: argparse.Namespace, users: int
) -> tuple[dict[str, float], dict[tuple[str, str], float], dict[str, int]]:
    """One `privrec sim` run of `users` users; returns its timings (seconds, with "total"),
    the CPU seconds per (phase, process) and the peak memory per process."""
    config = bench_config(args, users)
    out = Path(args.out or tempfile.mkdtemp(prefix="privrec-neighbourhood-"))
    if args.out and len(args.sizes) > 1:
        out = out / f"n{users}"
    phase = ["before"]  # CPU the process used before this run: imports, earlier sizes

    def progress(text: str, _done: float, _total: float) -> None:
        phase[0] = split(text)[0]

    sampler = PeakSampler(os.getpid(), lambda: phase[0], root_role="orchestrator+referee")
    sampler.start()
    t = time.perf_counter()
    try:
        report = simulate(
            config,
            SimOptions(out_dir=out, launcher=args.launcher, mqtt=args.mqtt, progress=progress),
        )
    finally:
        peaks, _ = sampler.stop()
    total = time.perf_counter() - t
    timings: dict[str, float] = {k: float(v) for k, v in report["timings"].items()}
    timings["total"] = total
    print(f"\n{users:,} users: CPU seconds per process and phase (utime + stime; wall beside):")
    print("\n".join(cpu_table(sampler.by_phase, timings)))
    print("peak resident memory per process, GiB (VmHWM):")
    for role, peak in sorted(peaks.items()):
        print(f"  {role:32s} {peak / 1024**3:6.2f}")
    print(f"  {'total (sum of peaks)':32s} {sum(peaks.values()) / 1024**3:6.2f}")
    utility = report.get("utility", {})
    print(f"run directory: {out}")
    for key in ("ppcf_mae", "baseline_pearson_knn_mae", "ppcf_ndcg_at_10"):
        if key in utility:
            print(f"  {key} {float(utility[key]):.4f}")
    population = report.get("population", {})
    for key in ("attack_targets_rule", "attack_fit_users_rule"):
        if key in population:
            print(f"  {population[key]}")
    print(f"  test users: {report.get('evaluation', {}).get('split', {}).get('test_users')}")
    for attack in report.get("attacks", []):
        m = attack["metrics"]
        shown = ", ".join(f"{k} {m[k]:.4f}" for k in ("rmse_z", "auc", "n_users") if k in m)
        print(f"  {attack['name']}: {shown}")
    return timings, dict(sampler.by_phase), peaks


def releases(n_users: int, n_items: int, density: float) -> tuple[sp.csr_matrix, RatingData]:
    """Every synthetic user's RPT profile release (as clients release them), as rows."""
    data = make_synthetic(n_users, n_items, density=density, seed=SEED)
    mech = RandomizedPerturbation()
    rows, cols, vals = [], [], []
    for u in range(data.n_users):
        items, ratings = data.user_row(u)
        uid = str(int(data.user_ids[u]))
        rel = mech.release(
            Profile(items.astype(np.int64), ratings.astype(np.float64), n_items),
            rng_for(SEED, "user", uid, "rpt"),
        )
        rows.append(np.full(rel.indices.size, u))
        cols.append(rel.indices)
        vals.append(rel.values)
    z = sp.csr_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
        shape=(n_users, n_items),
    )
    return z, data


def timed(fn: Callable[[], object], repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def serve_ratio(args: argparse.Namespace) -> bool:
    """The serve block product against the reference, PPCF and the Pearson baseline."""
    t = time.perf_counter()
    z, data = releases(args.users, args.items, args.density)
    folds = np.arange(args.users) % 5
    rng = np.random.default_rng(SEED)
    sample = rng.choice(args.users, size=min(args.sample, args.users), replace=False)
    truth = data.ratings.tocsr()
    print(
        f"\nserve block product: {args.users} users x {args.items} items, {z.nnz} released "
        f"cells, {sample.size} queries (made in {time.perf_counter() - t:.1f} s)"
    )
    ok = True
    for name, model, train in (("ppcf", PPCF(k=100), z), ("pearson_knn", PearsonKNN(k=100), truth)):
        model.fit(train, exclude_groups=folds)
        queries, items = [], []
        for u in sample.tolist():
            row = train[u]
            idx, val = row.indices.astype(np.int64), row.data.astype(np.float64)
            if idx.size <= 5:
                continue
            queries.append((idx[5:], val[5:]))  # the first 5 cells are the targets
            items.append(idx[:5])
        groups = [int(folds[u]) for u in sample.tolist() if train[u].nnz > 5]
        methods = ("block", "scatter", "reference")
        for method in methods[:2]:  # compiled (or loaded) before the clock
            model.set_method(method).predict_block(
                queries[:2], items[:2], exclude_groups=groups[:2]
            )
        per: dict[str, list[float]] = {method: [] for method in methods}
        answers: dict[str, object] = {}
        for _ in range(args.repeats):  # alternated: load changes hit all alike
            for method in methods:
                model.set_method(method)
                t0 = time.perf_counter()
                answers[method] = model.predict_block(queries, items, exclude_groups=groups)
                per[method].append((time.perf_counter() - t0) / len(queries))
        equal = all(
            np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1])
            for other in methods[:2]
            for x, y in zip(answers[other], answers["reference"], strict=True)  # type: ignore[call-overload]
        )
        ok &= equal
        t_new, t_scat, t_ref = (statistics.median(per[m]) for m in methods)
        print(
            f"  {name:12s} block {t_new * 1e3:7.3f} ms/query  scatter only {t_scat * 1e3:7.3f}  "
            f"reference {t_ref * 1e3:7.3f}  block/scatter {t_new / t_scat:.3f} "
            f"({t_scat / t_new:.2f}x)  block/reference {t_new / t_ref:.3f} ({t_ref / t_new:.1f}x)"
            f"  equal bit for bit: {equal}  -> {args.users} queries: {t_new * args.users:.0f} s "
            f"vs {t_ref * args.users:.0f} s"
        )
    n = min(args.graph_users, args.users)
    x = (truth[:n].toarray() > 0) * 1.0  # what the referee's true graph of OUE ranks
    t_new, g_new = timed(lambda: cosine_knn(x, 10), args.repeats)
    t_ref, g_ref = timed(lambda: cosine_knn(x, 10, method="reference"), args.repeats)
    equal = bool(np.array_equal(g_new, g_ref))  # type: ignore[arg-type]
    ok &= equal
    print(
        f"  cosine_knn   {n} users (0/1 profiles, k = 10): partition {t_new:.2f} s  reference "
        f"{t_ref:.2f} s  ratio {t_new / t_ref:.3f}  equal: {equal}"
    )
    return ok


PHASES = ("load", "enroll", "collect", "train", "serve", "attack", "report", "total")


def growth(
    sizes: list[int],
    runs: list[tuple[dict[str, float], dict[tuple[str, str], float], dict[str, int]]],
) -> None:
    """Each phase's growth exponent between consecutive sizes: of its wall seconds and of
    the CPU seconds its processes used (the machine's load moves the first, not the second)."""
    print("\ngrowth exponents (slope of log seconds on log users; target <= 1.1)")
    print(f"  {'phase':10s} " + " ".join(f"{n:>12,}" for n in sizes) + "   wall exp.  CPU exp.")
    for phase in PHASES:
        wall = [r[0].get(phase, float("nan")) for r in runs]
        cpu = [sum(v for (p, _), v in r[1].items() if p == phase) for r in runs]
        w = [slope(sizes[i : i + 2], wall[i : i + 2]) for i in range(len(sizes) - 1)]
        c = [slope(sizes[i : i + 2], cpu[i : i + 2]) for i in range(len(sizes) - 1)]
        print(
            f"  {phase:10s} "
            + " ".join(f"{x:12.1f}" for x in wall)
            + "   "
            + " ".join(f"{x:5.2f}" for x in w)
            + "     "
            + (" ".join(f"{x:5.2f}" for x in c) if phase != "total" else "")
        )
    for size, run in zip(sizes, runs, strict=True):
        print(f"  {size:,} users: sum of peak memory {sum(run[2].values()) / 1024**3:.2f} GiB")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=int, default=10_000)
    ap.add_argument("--sizes", default="", help="comma-separated sizes (overrides --users)")
    ap.add_argument("--test-users", type=int, default=0, help="[evaluation] test_users (0: all)")
    ap.add_argument("--targets", type=int, default=0, help="[adversary] targets (0: the rule)")
    ap.add_argument("--fit-users", type=int, default=0, help="[adversary] fit_users (0: rule)")
    ap.add_argument("--candidates", default="all", choices=("all", "sampled"))
    ap.add_argument("--no-ranking", action="store_true", help="[evaluation] ranking = false")
    ap.add_argument("--skip-ratio", action="store_true", help="no serve block-vs-reference part")
    ap.add_argument("--quick", action="store_true", help="1,000 users (make bench)")
    ap.add_argument("--concurrency", type=int, default=0, help="[population] (0: default)")
    ap.add_argument("--items", type=int, default=1_000)
    ap.add_argument("--density", type=float, default=0.05)
    ap.add_argument("--launcher", default="processes", choices=("processes", "inprocess"))
    ap.add_argument("--mqtt", default="embedded", help="embedded | none | mqtt://host:port")
    ap.add_argument("--skip-sim", action="store_true", help="only the serve block ratios")
    ap.add_argument("--sample", type=int, default=300, help="queries timed for the ratio")
    ap.add_argument("--graph-users", type=int, default=3_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="", help="run directory (default: a temporary one)")
    args = ap.parse_args()
    if args.quick:
        args.users, args.sample, args.graph_users = 1_000, 100, 1_000
    args.sizes = [int(n) for n in args.sizes.split(",") if n.strip()] or [args.users]
    print(f"bench/neighbourhood.py sizes {args.sizes}; cpus {os.cpu_count()}; {uptime()}")
    if not args.skip_sim:
        runs = []
        for users in args.sizes:
            runs.append(end_to_end(args, users))
            print(f"\nend to end, {users:,} users (launcher {args.launcher}, mqtt {args.mqtt}):")
            for key, value in runs[-1][0].items():
                print(f"  {key:32s} {value:9.1f} s")
            print(f"  {uptime()}")
        if len(runs) > 1:
            growth(args.sizes, runs)
    ok = True if args.skip_ratio else serve_ratio(args)
    print(f"\n{uptime()}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
