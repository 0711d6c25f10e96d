"""Offline, in-process check of the PPCF MAE figures on MovieLens-100K.

Protocol (Bilge 2013 §2.4 and Ch. 6: MLP, 5-fold cross-validation over users, 5 withheld ratings
per test user, k = 100; RPT with σ_max = 2, β_max = 25 %):

* Users are split into 5 folds at random (generator key ``("bench", "folds")``); every user is a
  test user once. Per user, 5 of her ratings are withheld at random (key
  ``("user", u, "withhold")``); her query vector is her other ratings.
* Training: every user's FULL profile, disguised once with `RandomizedPerturbation` and her
  generator ``rng_for(seed, "user", u, "profile")``, forms U′; the baseline trains on the true
  ratings. When a user of fold f queries, the rows of fold f are excluded (`exclude_group=f`).
* Query: a fresh disguise of her non-withheld ratings (key ``("user", u, "query")``); she
  de-normalises the server's P′ with the mean and deviation of those ratings (Bilge Eq 2.5).
* Printed: MAE (`shared.metrics.mae`) of PearsonKNN (Bilge Eq 2.1/2.2, true ratings), PPCF
  (Bilge Eq 2.4/2.6 on U′) and, as a diagnostic, the same z-score kNN on undisguised z-scores
  (σ → 0, β = 0), each raw and clipped to the rating scale, plus timings.

Run::

    .venv/bin/python bench/ppcf_mae.py [--seed 0] [--repeats 1] [--k 100]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from privrec.server.models import PPCF, PearsonKNN
from privrec.shared.data import load_dataset
from privrec.shared.data.dataset import RatingData
from privrec.shared.mechanisms import Profile, RandomizedPerturbation
from privrec.shared.metrics import mae
from privrec.shared.seeding import rng_for
from privrec.shared.zscores import denormalise, zscore


@dataclasses.dataclass(frozen=True)
class Split:
    """Fold of every user, and per user the withheld (items, ratings) and the kept profile."""

    folds: np.ndarray
    test_items: list[np.ndarray]
    test_ratings: list[np.ndarray]
    kept: list[Profile]


def make_split(ratings: sp.csr_matrix, seed: int, n_folds: int, n_withhold: int) -> Split:
    """Random user folds and `n_withhold` withheld ratings per user (see module docstring)."""
    n_users, n_items = ratings.shape
    folds = np.empty(n_users, dtype=np.int64)
    folds[rng_for(seed, "bench", "folds").permutation(n_users)] = np.arange(n_users) % n_folds
    test_items, test_ratings, kept = [], [], []
    for u in range(n_users):
        lo, hi = ratings.indptr[u], ratings.indptr[u + 1]
        items, vals = ratings.indices[lo:hi].astype(np.int64), ratings.data[lo:hi]
        if items.size <= n_withhold:
            raise ValueError(f"user {u} has {items.size} ratings; need > {n_withhold}")
        out = np.zeros(items.size, dtype=bool)
        out[rng_for(seed, "user", u, "withhold").choice(items.size, n_withhold, replace=False)] = (
            True
        )
        test_items.append(items[out])
        test_ratings.append(vals[out])
        kept.append(Profile(items[~out], vals[~out], n_items))
    return Split(folds, test_items, test_ratings, kept)


def disguise_all(ratings: sp.csr_matrix, mech: RandomizedPerturbation, seed: int) -> sp.csr_matrix:
    """U′: every user's full profile released once with her ("user", u, "profile") generator."""
    n_users, n_items = ratings.shape
    indptr, indices, data = [0], [], []
    for u in range(n_users):
        lo, hi = ratings.indptr[u], ratings.indptr[u + 1]
        prof = Profile(ratings.indices[lo:hi].astype(np.int64), ratings.data[lo:hi], n_items)
        rel = mech.release(prof, rng_for(seed, "user", u, "profile"))
        indices.append(rel.indices)
        data.append(rel.values)
        indptr.append(indptr[-1] + rel.indices.size)
    return sp.csr_matrix(
        (np.concatenate(data), np.concatenate(indices), np.array(indptr)), shape=(n_users, n_items)
    )


def run_once(
    data: RatingData,
    seed: int,
    *,
    k: int,
    sigma_max: float,
    beta_max: int,
    n_folds: int,
    n_withhold: int,
) -> dict[str, float]:
    """One repetition; returns metric name → value (MAEs, timings, neighbour statistics)."""
    ratings = sp.csr_matrix(data.ratings)
    lo, hi = data.rating_scale
    split = make_split(ratings, seed, n_folds, n_withhold)
    truth = np.concatenate(split.test_ratings)
    res: dict[str, float] = {}

    def record(name: str, raw: np.ndarray, counts: np.ndarray) -> None:
        res[f"{name} MAE"] = mae(raw, truth)
        res[f"{name} MAE clipped"] = mae(np.clip(raw, lo, hi), truth)
        res[f"{name} out-of-scale %"] = 100.0 * float(np.mean((raw < lo) | (raw > hi)))
        res[f"{name} no-neighbour %"] = 100.0 * float(np.mean(counts == 0))
        res[f"{name} mean neighbours"] = float(np.mean(counts))

    # ---- non-private baseline on true ratings
    t0 = time.perf_counter()
    base = PearsonKNN(k=k).fit(ratings, exclude_groups=split.folds)
    t1 = time.perf_counter()
    preds, counts = [], []
    for u, prof in enumerate(split.kept):
        p, c = base.predict(
            prof.items, prof.ratings, split.test_items[u], exclude_group=int(split.folds[u])
        )
        preds.append(p)
        counts.append(c)
    t2 = time.perf_counter()
    record("PearsonKNN", np.concatenate(preds), np.concatenate(counts))
    res["PearsonKNN fit s"], res["PearsonKNN predict s"] = t1 - t0, t2 - t1

    # ---- z-score kNN: PPCF on RPT with negligible noise and no fakes (diagnostic)
    # ---- PPCF on RPT(σ_max, β_max)
    for name, mech in (
        ("zkNN", RandomizedPerturbation(sigma_max=1e-12, beta_max=0)),
        ("PPCF", RandomizedPerturbation(sigma_max=sigma_max, beta_max=beta_max)),
    ):
        t0 = time.perf_counter()
        u_prime = disguise_all(ratings, mech, seed)
        t1 = time.perf_counter()
        model = PPCF(k=k).fit(u_prime, exclude_groups=split.folds)
        t2 = time.perf_counter()
        preds, counts = [], []
        for u, prof in enumerate(split.kept):
            q = mech.release(prof, rng_for(seed, "user", u, "query"))
            stats = zscore(prof.ratings)
            p_norm, c = model.predict(
                q.indices, q.values, split.test_items[u], exclude_group=int(split.folds[u])
            )
            preds.append(denormalise(p_norm, stats.mean, stats.std))
            counts.append(c)
        t3 = time.perf_counter()
        record(name, np.concatenate(preds), np.concatenate(counts))
        res[f"{name} disguise s"] = t1 - t0
        res[f"{name} fit s"], res[f"{name} predict+query s"] = t2 - t1, t3 - t2
        res[f"{name} U' density %"] = 100.0 * u_prime.nnz / np.prod(u_prime.shape)
    res["predictions"] = float(truth.size)
    return res


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point: run the repetitions and print a table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=1, help="seeds seed … seed+repeats−1")
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--sigma-max", type=float, default=2.0)
    ap.add_argument("--beta-max", type=int, default=25)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--withhold", type=int, default=5)
    args = ap.parse_args(argv)

    data = load_dataset("ml-100k")
    runs = []
    for r in range(args.repeats):
        t0 = time.perf_counter()
        runs.append(
            run_once(
                data,
                args.seed + r,
                k=args.k,
                sigma_max=args.sigma_max,
                beta_max=args.beta_max,
                n_folds=args.folds,
                n_withhold=args.withhold,
            )
        )
        print(f"seed {args.seed + r}: done in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    print(
        f"ML-100K, {args.folds}-fold over users, {args.withhold} withheld/user, k={args.k}, "
        f"RPT σ_max={args.sigma_max} β_max={args.beta_max}, seeds {args.seed}.."
        f"{args.seed + args.repeats - 1}"
    )
    width = max(len(key) for key in runs[0])
    for key in runs[0]:
        vals = np.array([run[key] for run in runs])
        spread = f" ± {vals.std(ddof=1):.4f} (sd)" if vals.size > 1 else ""
        print(f"  {key:<{width}}  {vals.mean():10.4f}{spread}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
