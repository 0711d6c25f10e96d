"""Attack benchmark: the RPT attacks' compiled path against the numpy reference, same run.

Target (issue 13, target 3): `fit_rpt_posterior` and every RPT attack at least 10x faster than
the reference path on a 10,000-user run. A synthetic population (`make_synthetic`, 1,000 items,
density 0.05) is released with RPT (σ_max = 2, β_max = 25, the defaults) exactly as clients
release it; then each timed step runs with ``method="reference"`` and ``method="fast"``,
alternated, `--repeats` times, and the medians are printed with their ratio. Each line also
prints the largest difference between the two outputs (relative to max(1, |reference|)), the
evidence that the fast path computes the same thing (stated tolerance 1e-8, `rpt_bayes`).
The reference is numpy and scipy on one core (BLAS on one thread, as in every privrec node);
the fast kernels run on numba's threads (one per core by default; ``NUMBA_NUM_THREADS=1`` times
them on one).

Timed steps: `fit_rpt_posterior` (the model behind ``rpt_bayes`` and ``rpt_fake_detection``),
and the attacks ``rpt_bayes``, ``rpt_spectral`` and ``rpt_fake_detection`` built through the
registry (`make_attack`), fit on the same `Observations`.

`--busy N` runs N CPU-bound processes (a Python busy loop each) beside the measurement for its
whole duration: the machine then has more runnable threads than cores, as in a CI job, a sweep
or on a shared workstation (target of issue 28: the fast path >= 3x the reference at `--quick`
size with `--busy 2`). The bench sets numba's threads up as `privrec` does
(`shared.threads.configure_threads`); ``NUMBA_THREADING_LAYER`` and ``OMP_WAIT_POLICY`` in the
environment override that choice, which is how the layers were compared.

Usage: python bench/attacks.py [--quick] [--users N] [--items M] [--density D] [--repeats R]
                               [--steps NAME,...] [--busy N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from privrec.shared.threads import configure_threads, thread_environment

# BLAS on one thread and numba's layer as in every privrec node, before numpy loads BLAS
os.environ.update(thread_environment())

import numba
import numpy as np

from privrec.adversary.attacks import make_attack
from privrec.adversary.attacks.rpt_bayes import fit_rpt_posterior
from privrec.adversary.attacks.rpt_kernels import PRUNE
from privrec.adversary.attacks.rpt_matrix import KERNELS, Kernels, disguised_matrix
from privrec.adversary.observations import Observations
from privrec.shared.data import make_synthetic
from privrec.shared.mechanisms.base import Profile, SparsePayload
from privrec.shared.mechanisms.rpt import RandomizedPerturbation
from privrec.shared.seeding import rng_for
from tests.run_configs import make_run_config

SEED = 0


def rpt_observations(n_users: int, n_items: int, density: float, seed: int) -> Observations:
    """What the aggregator observes: one RPT profile release per synthetic user."""
    data = make_synthetic(n_users, n_items, density=density, seed=seed)
    mech = RandomizedPerturbation()
    profiles: dict[str, SparsePayload] = {}
    for u in range(data.n_users):
        items, ratings = data.user_row(u)
        uid = str(int(data.user_ids[u]))
        profile = Profile(items.astype(np.int64), ratings.astype(np.float64), n_items)
        profiles[uid] = mech.release(profile, rng_for(seed, "user", uid, "rpt"))
    config = make_run_config("rpt", mech.public_params(), n_items)
    return Observations(config, dict(profiles))


def flat(out: object) -> np.ndarray:
    """The numbers a step returns, as one vector (to compare the two paths)."""
    if hasattr(out, "z_hat"):  # RptPosterior
        fields = ("z_hat", "log_odds", "mu", "sigma2", "p_uniform", "genuine")
        return np.concatenate([np.ravel(getattr(out, f)) for f in fields])
    per_user = out.output().per_user  # type: ignore[attr-defined]
    return np.concatenate([per_user[u].values for u in sorted(per_user)])


STEPS = ("fit_rpt_posterior", "rpt_bayes", "rpt_spectral", "rpt_fake_detection")


def steps(obs: Observations) -> dict[str, Callable[[Kernels], object]]:
    dm = disguised_matrix(obs)
    return {
        "fit_rpt_posterior": lambda method: fit_rpt_posterior(dm, method=method),
        "rpt_bayes": lambda method: make_attack("rpt_bayes", method=method).fit(obs),
        "rpt_spectral": lambda method: make_attack("rpt_spectral", method=method).fit(obs),
        "rpt_fake_detection": lambda method: make_attack("rpt_fake_detection", method=method).fit(
            obs
        ),
    }


def start_busy(n: int) -> list[subprocess.Popen[bytes]]:
    """`n` processes that each keep one core busy until killed."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="400 users x 200 items (CI size)")
    ap.add_argument("--users", type=int, default=10_000)
    ap.add_argument("--items", type=int, default=1_000)
    ap.add_argument("--density", type=float, default=0.05)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--busy", type=int, default=0, help="CPU-bound processes run beside it")
    ap.add_argument(
        "--steps",
        default=",".join(STEPS),
        help=f"comma-separated steps to time (default all: {','.join(STEPS)})",
    )
    args = ap.parse_args()
    chosen = args.steps.split(",")
    unknown = sorted(set(chosen) - set(STEPS))
    if unknown:
        ap.error(f"--steps: unknown {unknown}; known: {list(STEPS)}")
    if args.quick:
        args.users, args.items = 400, 200
    if args.busy < 0:
        ap.error(f"--busy must be >= 0, got {args.busy}")
    configure_threads()
    busy = start_busy(args.busy)
    try:
        return measure(args, chosen)
    finally:
        for p in busy:
            p.kill()
            p.wait()


def measure(args: argparse.Namespace, chosen: list[str]) -> int:
    """Time the chosen steps on both paths; 0 when every output is within tolerance."""
    t = time.perf_counter()
    obs = rpt_observations(args.users, args.items, args.density, SEED)
    dm = disguised_matrix(obs)
    print(
        f"population: {dm.n_users} users x {dm.n_items} items, {dm.matrix.nnz} filled cells "
        f"(RPT, sigma_max 2, beta_max 25), made in {time.perf_counter() - t:.1f} s; "
        f"cpus {os.cpu_count()}, numba threads {numba.get_num_threads()} (NUMBA_NUM_THREADS), "
        f"load {os.getloadavg()[0]:.1f}, repeats {args.repeats}, busy processes {args.busy}"
    )
    # compile the kernels outside the timings (numba caches them on disk after the first run)
    small = rpt_observations(60, 40, 0.3, SEED)
    for step in steps(small).values():
        step("fast")
    print(
        f"threading layer {numba.threading_layer()}, "
        f"OMP_WAIT_POLICY {os.environ.get('OMP_WAIT_POLICY', '(unset)')}"
    )
    print(f"{'step':20s} {'reference':>11s} {'fast':>9s} {'ratio':>7s}  max rel diff")
    worst = 0.0
    for name, step in steps(obs).items():
        if name not in chosen:
            continue
        times: dict[str, list[float]] = {m: [] for m in KERNELS}
        outs: dict[str, object] = {}
        for _ in range(args.repeats):
            for method in ("reference", "fast"):  # alternated: load changes hit both alike
                t = time.perf_counter()
                outs[method] = step(method)
                times[method].append(time.perf_counter() - t)
        ref, fast = flat(outs["reference"]), flat(outs["fast"])
        diff = float(np.max(np.abs(fast - ref) / np.maximum(1.0, np.abs(ref))))
        worst = max(worst, diff)
        t_ref, t_fast = statistics.median(times["reference"]), statistics.median(times["fast"])
        print(f"{name:20s} {t_ref:10.2f}s {t_fast:8.2f}s {t_ref / t_fast:6.1f}x  {diff:.1e}")
    print(
        f"target: ratio >= 10x at 10,000 users idle, >= 3x at --quick with --busy 2; "
        f"outputs equal to 1e-8 (pruning threshold {PRUNE:g}); "
        f"load at the end {os.getloadavg()[0]:.1f}"
    )
    return 0 if worst <= 1e-8 else 1


if __name__ == "__main__":
    sys.exit(main())
