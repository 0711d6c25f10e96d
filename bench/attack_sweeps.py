"""Attack sweeps: each attack measured against the parameters that should stop it.

In-process, with the project's own mechanisms, models, attacks and referee scorers (the same
code paths a `privrec sim` run uses, without the processes around them):

* ``rpt``: the z-score reconstructions (`rpt_spectral`, `rpt_bayes`), fake detection and the
  rating recovery (`rpt_rating_recovery`, auxiliary users outside the attacked ones) against
  σ_max and β_max (Bilge Procedure 1).
* ``rrt``: recovered bits and flips (`rrt_flip_inference`) against θ and M (Bilge Procedure 2).
* ``second-order``: sign(r − µ) up to the global sign and "above her own mean"
  (`second_order_signs`) for PMC, PMD, Laplace and the exact-second-order reference
  (Xin & Jaakkola Sec. 4).
* ``knn``: the sybil attack (`knn_sybil`, Zhu §2.3 after Calandrino et al. 2011) against m
  (known items) and k (the model's neighbours; crowd k − 1), on the non-private z-score kNN
  (Bilge Eq 2.3: RPT with σ_max → 0, β_max = 0), PPCF on RPT (σ_max = 2, β_max = 25) and the
  non-private Pearson kNN on raw ratings (`sim.sybil_offline` answers the probes as the
  aggregator would).
* ``membership``: the loss classifier's AUC and Balu's KL (4.15) through sybil Predict probes,
  on the same three models.

Run::

    .venv/bin/python bench/attack_sweeps.py knn [--quick] [--seed 0] [--out FILE.json]

`--quick` uses a synthetic population (seconds); without it, MovieLens-100K. Prints one table
per sweep and writes the rows as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from privrec.adversary.attacks import make_attack
from privrec.adversary.observations import Observations
from privrec.adversary.sybils import SybilSettings
from privrec.server.models import MODELS
from privrec.shared.config import ExperimentConfig
from privrec.shared.data.dataset import RatingData
from privrec.shared.mechanisms import make_mechanism
from privrec.shared.mechanisms.base import Payload, Profile
from privrec.shared.population import load_population, user_id_of
from privrec.shared.run_config import PublicRunConfig
from privrec.shared.seeding import rng_for
from privrec.sim.adversary_knowledge import side_knowledge_plan
from privrec.sim.referee_attacks import score_attack
from privrec.sim.sybil_offline import answer_offline

Row = dict[str, Any]


def run_config_for(
    mechanism: str,
    params: dict[str, Any],
    model: str,
    model_params: dict[str, Any],
    data: RatingData,
) -> PublicRunConfig:
    """The public config a server of this scenario would publish (seed 0 folds)."""
    mech = make_mechanism(mechanism, params)
    caps = MODELS[model].capabilities
    return PublicRunConfig(
        run_id="bench",
        mechanism_name=mechanism,
        public_params=mech.public_params(),
        model_name=model,
        model_params=model_params,
        capabilities=caps,
        n_items=data.n_items,
        dataset=data.name,
        rating_scale=data.rating_scale,
        n_folds=5,
        fold_seed=0,
        withheld=5,
        max_release_bytes=1 << 22,
        tiers=("private", "public") if caps.public_tier else ("private",),
    )


def release_all(
    data: RatingData, mechanism: str, params: dict[str, Any], seed: int
) -> dict[str, Payload]:
    """Every user's profile release, with her ("user", id, "profile") generator as a client."""
    mech = make_mechanism(mechanism, params)
    out = {}
    for row in range(data.n_users):
        uid = user_id_of(data, row)
        items, ratings = data.user_row(row)
        prof = Profile(items.astype(np.int64), ratings.astype(np.float64), data.n_items)
        out[uid] = mech.release(prof, rng_for(seed, "user", uid, "profile"))
    return out


def truth_of(data: RatingData) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    return {user_id_of(data, r): data.user_row(r) for r in range(data.n_users)}


def population(quick: bool, seed: int, in_run: int) -> tuple[ExperimentConfig, RatingData]:
    """ML-100K (or a synthetic set with --quick) cut to `in_run` users; the rest stay outside
    the run for auxiliary profiles and non-member candidates."""
    data_section: dict[str, Any] = {"max_users": in_run}
    if quick:
        data_section |= {"dataset": "synthetic", "synthetic_users": 500, "synthetic_items": 300}
    config = ExperimentConfig.from_dict({"run": {"seed": seed}, "data": data_section})
    return config, load_population(config.data, seed)


# ---------------------------------------------------------------------------- kNN
KNN_MODELS = (
    ("z-score kNN, non-private (Eq 2.3)", "rpt", {"sigma_max": 1e-9, "beta_max": 0}, "ppcf"),
    ("PPCF, RPT σ_max=2 β_max=25", "rpt", {"sigma_max": 2.0, "beta_max": 25}, "ppcf"),
    ("Pearson kNN, raw ratings", "raw", {}, "pearson_knn"),
)


def sweep_knn(quick: bool, seed: int) -> list[Row]:
    """m × k for each model of `KNN_MODELS` (or the one `--model` names)."""
    config, data = population(quick, seed, 400 if quick else 943)
    truth = truth_of(data)
    rows = []
    ms = (8, 16) if quick else (8, 16, 32, 64)
    ks = (10,) if quick else (5, 10, 20)
    for label, mech, params, model in _models():
        releases = release_all(data, mech, params, seed)
        for k in ks:
            rc = run_config_for(mech, params, model, {"k": k} | EXTRA_MODEL_PARAMS, data)
            for m in ms:
                adv = {"knn_targets": 10 if quick else 20, "knn_known_items": m}
                cfg = config.replace("adversary", **adv)
                knowledge, _ = side_knowledge_plan(cfg, data)
                t0 = time.perf_counter()
                # each target attacked alone (one crowd in the model): the attack itself
                plan = answer_offline(releases, rc, knowledge, SybilSettings(), isolate=True)
                obs = Observations(rc, dict(releases), knowledge=knowledge, sybils=plan)
                out = make_attack("knn_sybil").fit(obs).output()
                metrics = score_attack("knn_sybil", out, truth, run_config=rc, knowledge=knowledge)
                rows.append(
                    {"model": label, "k": k, "m": m, "seconds": time.perf_counter() - t0} | metrics
                )
                _print_row(
                    rows[-1], ("precision_at_10", "precision_at_10_popularity", "recall_inferred")
                )
    return rows


CUSTOM: list[tuple[str, str, dict[str, Any], str]] = []
"""Set by --model/--mechanism: the one case the kNN and membership sweeps run instead (e.g.
Zhu's PNCF at several ε once that model is registered)."""


EXTRA_MODEL_PARAMS: dict[str, Any] = {}
"""--model-params: merged into every model's parameters (besides k)."""


def _models() -> list[tuple[str, str, dict[str, Any], str]]:
    return CUSTOM or list(KNN_MODELS)


# ---------------------------------------------------------------------------- membership
def sweep_membership(quick: bool, seed: int) -> list[Row]:
    config, data = population(quick, seed, 300 if quick else 743)
    rows = []
    for label, mech, params, model in _models():
        releases = release_all(data, mech, params, seed)
        for k in (10,) if quick else (10, 50):
            rc = run_config_for(mech, params, model, {"k": k} | EXTRA_MODEL_PARAMS, data)
            cfg = config.replace(
                "adversary", membership_candidates=40 if quick else 100, membership_known_items=20
            )
            knowledge, truth = side_knowledge_plan(cfg, data)
            plan = answer_offline(releases, rc, knowledge, SybilSettings())
            obs = Observations(rc, dict(releases), knowledge=knowledge, sybils=plan)
            out = make_attack("membership_inference").fit(obs).output()
            metrics = score_attack(
                "membership_inference", out, {}, knowledge=knowledge, members=truth.members
            )
            rows.append({"model": label, "k": k} | metrics)
            _print_row(rows[-1], ("auc", "kld", "loss_members", "loss_non_members"))
    return rows


# ---------------------------------------------------------------------------- RRT
def sweep_rrt(quick: bool, seed: int) -> list[Row]:
    _, data = population(quick, seed, 400 if quick else 943)
    truth = truth_of(data)
    rows = []
    thetas = (0.6, 0.7, 0.9) if quick else (0.55, 0.6, 0.7, 0.8, 0.9)
    groups = (1, 3, 10) if quick else (1, 3, 10, 30, 100, data.n_items)
    for theta in thetas:
        for m_groups in groups:
            params = {"theta": theta, "n_groups": m_groups}
            releases = release_all(data, "rrt", params, seed)
            rc = run_config_for("rrt", params, "sketch_knn", {"k": 10}, data)
            out = make_attack("rrt_flip_inference").fit(Observations(rc, releases)).output()
            metrics = score_attack(
                "rrt_flip_inference", out, truth, releases=releases, run_config=rc
            )
            rows.append({"theta": theta, "M": m_groups} | metrics)
            _print_row(rows[-1], ("bit_accuracy", "bit_accuracy_released", "flip_accuracy"))
    return rows


# ---------------------------------------------------------------------------- RPT
def sweep_rpt(quick: bool, seed: int) -> list[Row]:
    config, data = population(quick, seed, 400 if quick else 743)
    truth = truth_of(data)
    knowledge, _ = side_knowledge_plan(
        config.replace("adversary", outside_users=100 if quick else 200), data
    )
    grid = (
        [(1.0, 10), (2.0, 25), (4.0, 25)]
        if quick
        else [(s, 25) for s in (0.5, 1.0, 2.0, 4.0)] + [(2.0, b) for b in (0, 10, 50)]
    )
    attacks = ("rpt_spectral", "rpt_bayes", "rpt_fake_detection", "rpt_rating_recovery")
    rows = []
    for sigma_max, beta_max in grid:
        params = {"sigma_max": sigma_max, "beta_max": beta_max}
        releases = release_all(data, "rpt", params, seed)
        rc = run_config_for("rpt", params, "ppcf", {"k": 10}, data)
        obs = Observations(rc, releases, auxiliary=knowledge.auxiliary, knowledge=knowledge)
        row: Row = {"sigma_max": sigma_max, "beta_max": beta_max}
        for name in attacks:
            if name == "rpt_fake_detection" and beta_max == 0:
                continue
            t0 = time.perf_counter()
            out = make_attack(name).fit(obs).output()
            metrics = score_attack(name, out, truth, releases=releases)
            row |= {f"{name}.{k}": v for k, v in metrics.items()}
            row[f"{name}.seconds"] = time.perf_counter() - t0
        rows.append(row)
        _print_row(
            row,
            (
                "rpt_spectral.rmse_z",
                "rpt_bayes.rmse_z",
                "rpt_bayes.rmse_z_naive",
                "rpt_fake_detection.auc",
                "rpt_rating_recovery.rmse",
                "rpt_rating_recovery.rmse_global_mean",
            ),
        )
    return rows


# ---------------------------------------------------------------------------- second order
def sweep_second_order(quick: bool, seed: int) -> list[Row]:
    """PMC (per-user and shared h), PMD, Laplace ε = 1 and the exact reference on one
    population: 100 public users (most ratings), everybody else private, rank 10."""
    from privrec.shared.mechanisms.base import SparsePayload
    from privrec.shared.mechanisms.completion import fit_public_model, public_ratings_matrix
    from privrec.shared.population import public_rows

    _, data = population(quick, seed, 300 if quick else 943)
    n_public, rank = (60, 5) if quick else (100, 10)
    pub = public_rows(data, n_public, "most-ratings", seed)
    truth = {}
    public: dict[str, Payload] = {}
    private_rows = []
    for row in range(data.n_users):
        uid = user_id_of(data, row)
        items, ratings = data.user_row(row)
        if row in pub:
            public[uid] = SparsePayload(data.n_items, items.astype(np.int64), ratings.astype(float))
        else:
            private_rows.append(row)
            truth[uid] = (items, ratings)
    csr = public_ratings_matrix(dict(sorted(public.items())), data.n_items)
    mu, V = fit_public_model(csr, rank=rank, n_iter=2)
    cases = (
        ("exact_second_order", {}),
        ("pmc", {"h_mode": "per-user"}),
        ("pmc", {"h_mode": "shared"}),
        ("pmd", {}),
        ("laplace_second_order", {"epsilon": 1.0}),
    )
    rows = []
    for name, params in cases:
        mech = make_mechanism(name, params)
        mech.bind(mu, V, **mech.public_binding(csr, mu, V))  # type: ignore[attr-defined]
        releases = {}
        for row in private_rows:
            uid = user_id_of(data, row)
            items, ratings = data.user_row(row)
            prof = Profile(items.astype(np.int64), ratings.astype(np.float64), data.n_items)
            releases[uid] = mech.release(prof, rng_for(seed, "user", uid, "profile"))
        rc = run_config_for(
            name, mech.public_params(), "two_tier_lowrank", {"k": rank, "em_iters": 2}, data
        )
        obs = Observations(rc, dict(sorted(releases.items())), dict(sorted(public.items())))
        t0 = time.perf_counter()
        out = make_attack("second_order_signs").fit(obs).output()
        metrics = score_attack("second_order_signs", out, truth, public=obs.public)
        rows.append(
            {"mechanism": name, "params": json.dumps(params), "seconds": time.perf_counter() - t0}
            | metrics
            | {f"diag.{k}": v for k, v in out.diagnostics.items()}
        )
        _print_row(
            rows[-1],
            (
                "sign_accuracy",
                "sign_accuracy_global",
                "sign_accuracy_global_permuted",
                "above_mean_auc_global",
                "above_mean_auc_global_permuted",
            ),
        )
    return rows


# ---------------------------------------------------------------------------- helpers
def _print_row(row: Row, keys: Iterable[str]) -> None:
    head = ", ".join(f"{k}={v}" for k, v in row.items() if "." not in k)  # the setting
    vals = ", ".join(f"{k}={row[k]:.3f}" for k in keys if k in row)
    print(f"{head}: {vals}", flush=True)


SWEEPS: dict[str, Callable[[bool, int], list[Row]]] = {
    "knn": sweep_knn,
    "membership": sweep_membership,
    "rrt": sweep_rrt,
    "rpt": sweep_rpt,
    "second-order": sweep_second_order,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep", choices=sorted(SWEEPS))
    parser.add_argument("--quick", action="store_true", help="synthetic data, small grid")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="write the rows as JSON here")
    parser.add_argument(
        "--model",
        help="knn/membership: attack this registered model instead of the built-in three "
        "(with --mechanism, --mechanism-params)",
    )
    parser.add_argument(
        "--model-params", default="{}", help="its other parameters as JSON (e.g. an ε)"
    )
    parser.add_argument("--mechanism", default="raw", help="its mechanism (default raw)")
    parser.add_argument(
        "--mechanism-params", default="{}", help="the mechanism's parameters as JSON"
    )
    args = parser.parse_args(argv)
    if args.model:
        params = json.loads(args.mechanism_params)
        CUSTOM.append(
            (f"{args.model} on {args.mechanism} {params}", args.mechanism, params, args.model)
        )
    t0 = time.perf_counter()
    rows = SWEEPS[args.sweep](args.quick, args.seed)
    print(f"{args.sweep}: {len(rows)} settings in {time.perf_counter() - t0:.1f}s")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["SWEEPS", "main", "release_all", "run_config_for"]
