"""Speed of Balu's MCMC joint decoder: Gibbs steps per second, and the whole Fig. 3.2–3.5 grid.

Set-up (Balu §3.5.1): ML-100K (or `--quick`: a small synthetic population), every user releases
with BLIP (K = 20, L = 5000) or JLT (L = 1000, the thesis's σ), the adversary holds the raw
profiles of 600 auxiliary users (`sim.auxiliary`, seed 0) and attacks the other 343 with
`JointDecoder` (T = 1,000 burn-in + M = 19,000 single-slot Gibbs steps, f = 4).

Printed:

1. **Steps per second** at one ε per mechanism (BLIP ε = 8, JLT ε = 1): the compiled sampler
   over all attacked users (one chain per user, numba `prange` over users; wall and process
   CPU time, so the figure is honest on a shared machine), beside the plain-numpy single-chain
   reference (`gibbs_reference.reference_chain_*`) measured in the same run on the first users'
   chains for `--reference-steps` steps each.
2. With `--grid`: the whole grid of Figures 3.2–3.5, 343 users × 9 ε × 2 priors × 2
   mechanisms with T + M = 20,000, each cell timed (set-up: size estimates, single decoder,
   prefilter; chains), against the 15-minute target. This is the attacks' computation only
   (releases are drawn directly with the mechanism classes, no protocol run).

Run::

    .venv/bin/python bench/mcmc.py [--grid] [--quick] [--reference-steps 300]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from collections.abc import Sequence

import numba
import numpy as np

from privrec.adversary.attacks.balu_mcmc import JointDecoder
from privrec.adversary.observations import Observations
from privrec.shared.data import load_dataset, make_synthetic
from privrec.shared.data.dataset import RatingData
from privrec.shared.mechanisms import make_mechanism
from privrec.shared.mechanisms.base import Profile
from privrec.shared.run_config import PublicRunConfig
from privrec.shared.seeding import rng_for
from privrec.sim.auxiliary import auxiliary_rows
from privrec.sim.reproduce.balu_grid import BLIP_EPS, JLT_EPS

TARGET_S = 15 * 60.0


def observations(
    data: RatingData, mechanism: str, eps: float, n_aux: int, quick: bool
) -> Observations:
    """Every user's release at `eps`, and the auxiliary users' raw profiles."""
    if mechanism == "blip":
        params = {"epsilon": eps, "n_bits": 500 if quick else 5000, "n_hashes": 20}
    else:
        params = {
            "epsilon": eps,
            "dim": 100 if quick else 1000,
            "sigma_rule": "balu2016",
            "n_items": data.n_items,
        }
    mech = make_mechanism(mechanism, params)
    uids = [str(int(u)) for u in data.user_ids]
    profiles = [
        Profile(items.astype(np.int64), ratings, data.n_items)
        for items, ratings in (data.user_row(u) for u in range(data.n_users))
    ]
    rngs = [rng_for(0, "user", uid, "release") for uid in uids]
    releases = mech.release_many(profiles, rngs)
    rows = auxiliary_rows(data.n_users, n_aux, 0)
    aux = dataclasses.replace(
        data, ratings=data.ratings[rows].tocsr(), user_ids=np.asarray(data.user_ids)[rows]
    )
    from privrec.server.models import MODELS

    run_config = PublicRunConfig(
        run_id="bench-mcmc",
        mechanism_name=mechanism,
        public_params=mech.public_params(),
        model_name="sketch_knn",
        model_params={},
        capabilities=MODELS["sketch_knn"].capabilities,
        n_items=data.n_items,
        dataset=data.name,
        rating_scale=data.rating_scale,
        n_folds=5,
        fold_seed=0,
        withheld=5,
        max_release_bytes=1 << 22,
    )
    return Observations(run_config, dict(sorted(zip(uids, releases, strict=True))), auxiliary=aux)


def steps_per_second(
    obs: Observations, prior: str, reference_users: int, reference_steps: int
) -> dict[str, float]:
    attack = JointDecoder(prior=prior)  # type: ignore[arg-type]
    prepared = attack.prepare(obs)
    n = len(prepared.specs)
    steps = n * (attack.burn_in + attack.samples)
    w0, c0 = time.perf_counter(), time.process_time()
    prepared.run()
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    w0 = time.perf_counter()
    for u in range(min(reference_users, n)):
        prepared.reference(u, steps=reference_steps)
    ref_steps = min(reference_users, n) * (attack.burn_in + reference_steps)
    ref_wall = time.perf_counter() - w0
    return {
        "chains": float(n),
        "candidates": float(np.mean([s.candidates.size for s in prepared.specs])),
        "steps": float(steps),
        "wall_s": wall,
        "cpu_s": cpu,
        "steps_per_s_wall": steps / wall,
        "steps_per_cpu_s": steps / cpu,
        "reference_steps_per_s": ref_steps / ref_wall,
    }


def grid(data: RatingData, n_aux: int, quick: bool) -> float:
    total_wall = total_cpu = 0.0
    setup_wall = 0.0
    print(
        f"{'mech':5s} {'eps':>6s} {'prior':10s} {'cands':>6s} {'setup s':>8s} "
        f"{'chains s':>8s} {'cpu s':>8s}"
    )
    for mechanism, epsilons in (("blip", BLIP_EPS), ("jlt", JLT_EPS)):
        for eps in epsilons:
            obs = observations(data, mechanism, eps, n_aux, quick)
            for prior in ("popularity", "flat"):
                w0, c0 = time.perf_counter(), time.process_time()
                prepared = JointDecoder(prior=prior).prepare(obs)  # type: ignore[arg-type]
                w1 = time.perf_counter()
                prepared.run()
                w2, c2 = time.perf_counter(), time.process_time()
                total_wall += w2 - w0
                total_cpu += c2 - c0
                setup_wall += w1 - w0
                cands = np.mean([s.candidates.size for s in prepared.specs])
                print(
                    f"{mechanism:5s} {eps:6g} {prior:10s} {cands:6.0f} {w1 - w0:8.2f} "
                    f"{w2 - w1:8.2f} {c2 - c0:8.2f}",
                    flush=True,
                )
    print(
        f"grid: {total_wall:.0f} s wall ({setup_wall:.0f} s set-up), {total_cpu:.0f} s CPU; "
        f"target {TARGET_S:.0f} s -> {'met' if total_wall <= TARGET_S else 'MISSED'}"
    )
    return total_wall


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grid", action="store_true", help="time the whole Fig. 3.2–3.5 grid")
    ap.add_argument("--quick", action="store_true", help="small synthetic population")
    ap.add_argument("--reference-users", type=int, default=2)
    ap.add_argument("--reference-steps", type=int, default=300)
    args = ap.parse_args(argv)
    if args.quick:
        data, n_aux = make_synthetic(120, 150, seed=0), 70
    else:
        data, n_aux = load_dataset("ml-100k"), 600
    print(
        f"{data.name}: {data.n_users} users ({data.n_users - n_aux} attacked), "
        f"{data.n_items} items; numba threads {numba.get_num_threads()}, "
        f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    for mechanism, eps in (("blip", 8.0), ("jlt", 1.0)):
        obs = observations(data, mechanism, eps, n_aux, args.quick)
        JointDecoder(prior="flat", burn_in=1, samples=1).prepare(obs).run()  # compile/load
        r = steps_per_second(obs, "popularity", args.reference_users, args.reference_steps)
        print(
            f"{mechanism} eps={eps:g}: {r['chains']:.0f} chains x 20,000 steps, "
            f"{r['candidates']:.0f} candidates on average: "
            f"{r['steps_per_s_wall']:,.0f} steps/s wall ({r['wall_s']:.1f} s), "
            f"{r['steps_per_cpu_s']:,.0f} steps per CPU-second; numpy single-chain reference "
            f"{r['reference_steps_per_s']:,.0f} steps/s "
            f"(x{r['steps_per_s_wall'] / r['reference_steps_per_s']:.0f} wall)",
            flush=True,
        )
    if args.grid:
        grid(data, n_aux, args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
