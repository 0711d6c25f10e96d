"""The experiment behind Balu's Figures 3.2–3.5: four scorers against the ε grid, through the
protocol.

Balu §3.5 (MovieLens panel): ML-100K, 943 users, 600 auxiliary ("training") users whose raw
profiles give the item priors and 343 attacked ("testing") users, every rated movie in the
profile (Table 3.1's c_avg = 106). BLIP with K = 20, L = 5000 at ε ∈ {59, 28, 17, 8, 6, 5, 3,
2, 0}; JLT with L = 1000 and the thesis's σ table at ε ∈ {600, 6, 3, 2, 1, 0.75, 0.5, 0.25,
0.1} (`sigma_rule = "balu2016"`). For each (mechanism, ε) one `privrec sim` run (in-process
launcher): every user releases, the server stores the transcript and builds its kNN graph, the
adversary runs `balu_single`, `balu_popularity`, `balu_mcmc` and `balu_mcmc_flat` on the
transcript with the auxiliary users' raw profiles (`[adversary] auxiliary = "popularity"`,
`auxiliary_users = 600`), and the referee scores the 343 others: the set cosine (3.36) mean and
10 %/90 % quantiles, and mAP@10 (3.37).

A mechanism's ε grid is one study of the sweep engine (`sim.study.configs.run_configs`) in
OUT/balu-grid/MECHANISM-HASH/: its runs go at once on the cores, each in a run directory named by
a hash of its resolved config, and a later reproduction reuses them, so `balu-fig3.4-3.5` reads
what `balu-fig3.2` and `balu-fig3.3` computed in the same output folder; delete the folder to
recompute. `--quick` runs one ε per mechanism on a tiny synthetic population (the other ε
report NaN).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from privrec.shared.config import ExperimentConfig
from privrec.sim.reproduce.base import Published, RunContext
from privrec.sim.results import Report
from privrec.sim.study.configs import run_configs
from privrec.sim.study.store import read_done

BLIP_EPS: tuple[float, ...] = (59.0, 28.0, 17.0, 8.0, 6.0, 5.0, 3.0, 2.0, 0.0)
JLT_EPS: tuple[float, ...] = (600.0, 6.0, 3.0, 2.0, 1.0, 0.75, 0.5, 0.25, 0.1)
EPSILONS = {"blip": BLIP_EPS, "jlt": JLT_EPS}
QUICK_EPS = {"blip": (8.0,), "jlt": (1.0,)}
JLT_SMALL_EPS: tuple[float, ...] = (2.0, 1.0, 0.75, 0.5, 0.25, 0.1)
"""The JLT points where (3.10) holds (ε < ln(1/δ) = 2.25 at the table's implied δ)."""
BLIP_SMALL_EPS: tuple[float, ...] = (8.0, 6.0, 5.0, 3.0, 2.0, 0.0)
"""Balu §3.5.2: "by setting ε = 8, the designer is sure that the single attack is no longer a
threat"."""

SCORERS = ("mcmc_prior", "mcmc_flat", "single", "popularity")
ATTACK = {
    "mcmc_prior": "balu_mcmc",
    "mcmc_flat": "balu_mcmc_flat",
    "single": "balu_single",
    "popularity": "balu_popularity",
}
LABEL = {
    "mcmc_prior": "MCMC with prior",
    "mcmc_flat": "MCMC without prior",
    "single": "single decoder",
    "popularity": "popularity",
}
METRICS = {
    "cos": "cosine_mean",
    "cos_q10": "cosine_q10",
    "cos_q90": "cosine_q90",
    "map": "map_at_10",
    "c_hat": "c_hat_mean",
}
AUXILIARY_USERS = 600  # Balu Table 3.1: 600 training users of 943


def key(mechanism: str, scorer: str, metric: str, eps: float) -> str:
    """The measured value's key, e.g. ``"blip.mcmc_prior.cos@8"``."""
    return f"{mechanism}.{scorer}.{metric}@{eps:g}"


def grid_config(mechanism: str, eps: float, ctx: RunContext) -> ExperimentConfig:
    """The `privrec sim` configuration of one (mechanism, ε) point (module docstring)."""
    if ctx.quick:
        data: dict[str, Any] = {
            "dataset": "synthetic",
            "synthetic_users": 60,
            "synthetic_items": 80,
        }
        blip = {"n_bits": 500, "n_hashes": 20}
        jlt_dim, aux = 100, 40
    else:
        data = {"dataset": str(ctx.data) if ctx.data else "ml-100k"}
        blip = {"n_bits": 5000, "n_hashes": 20}
        jlt_dim, aux = 1000, AUXILIARY_USERS
    params: dict[str, Any] = (
        {"epsilon": eps, **blip}
        if mechanism == "blip"
        else {"epsilon": eps, "dim": jlt_dim, "sigma_rule": "balu2016"}
    )
    return ExperimentConfig.from_dict(
        {
            "run": {"name": f"balu-{mechanism}-eps{eps:g}", "seed": ctx.seed},
            "data": data,
            "population": {"shards": 1},
            "mechanism": {"name": mechanism, "params": params},
            "model": {"name": "sketch_knn", "k": 10, "baseline": False},
            "adversary": {
                "attacks": [ATTACK[s] for s in SCORERS],
                "auxiliary": "popularity",
                "auxiliary_users": aux,
            },
        }
    )


def _points(
    mechanism: str, grid: tuple[float, ...], ctx: RunContext
) -> dict[float, dict[str, Any]]:
    """Each (mechanism, ε) run's attack metrics and timings, from one study of the grid
    (module docstring)."""
    configs = [grid_config(mechanism, eps, ctx) for eps in grid]
    parent = ctx.work_dir.parent.parent / "balu-grid"
    reports = run_configs(configs, parent, mechanism)
    return {
        eps: {
            "attacks": {a["name"]: a["metrics"] for a in report["attacks"]},
            "attack_seconds": report["timings"].get("attack", float("nan")),
            "run_seconds": _run_seconds(report),
            "popularity_cos_all_items": _popularity_with_every_item(config, report.run_dir),
        }
        for eps, config, report in zip(grid, configs, reports, strict=True)
    }


def _run_seconds(report: Report) -> float:
    record = read_done(report.run_dir) if report.run_dir else None
    return float(record["seconds"]) if record else float("nan")


def _popularity_with_every_item(config: ExperimentConfig, run_dir: Path | None) -> float:
    """The popularity baseline's mean cosine had ĉ been N (every item): the evidence for
    what the ε = 0 point depends on, where (3.9) divides by zero and ĉ is a choice."""
    from privrec.adversary.replay import load_output
    from privrec.sim.referee import score_attacks

    assert run_dir is not None  # a study's reports know their run directory
    out = load_output(run_dir / "adversary" / "live" / "balu_popularity.npz")
    n_items = max(int(e.indices.size) for e in out.per_user.values())
    everything = dataclasses.replace(out, set_sizes={u: n_items for u in out.per_user})
    scored = score_attacks(config, {"balu_popularity": everything}, run_dir)
    return float(scored[0]["metrics"]["cosine_mean"])


def run_grid(mechanism: str, ctx: RunContext) -> dict[str, float]:
    """Every key of `mechanism`'s grid (NaN for the ε a quick run skips), plus the best of the
    four scorers per ε and the timings."""
    grid = EPSILONS[mechanism]
    todo = QUICK_EPS[mechanism] if ctx.quick else grid
    points = _points(mechanism, todo, ctx)
    out: dict[str, float] = {}
    seconds = attack_seconds = 0.0
    for eps in grid:
        point = points.get(eps)
        for scorer in SCORERS:
            metrics = point["attacks"][ATTACK[scorer]] if point else {}
            for short, name in METRICS.items():
                out[key(mechanism, scorer, short, eps)] = float(metrics.get(name, math.nan))
        for short in ("cos", "map"):
            vals = [out[key(mechanism, s, short, eps)] for s in SCORERS]
            out[key(mechanism, "best", short, eps)] = max(vals) if point else math.nan
        out[f"{mechanism}.popularity.cos_all_items@{eps:g}"] = (
            float(point["popularity_cos_all_items"]) if point else math.nan
        )
        if point:
            seconds += point["run_seconds"]
            attack_seconds += point["attack_seconds"]
    out[f"{mechanism}.grid_run_seconds"] = seconds
    out[f"{mechanism}.grid_attack_seconds"] = attack_seconds
    return out


# ------------------------------------------------------------------ rows and claims
def rows(
    mechanism: str,
    metric: str,
    metric_label: str,
    printed: Mapping[tuple[str, float], float],
    reason: Callable[[str, float], str],
) -> tuple[Published, ...]:
    """One published row per (scorer, ε), value from `printed` where the thesis gives one."""
    return tuple(
        Published(
            key(mechanism, scorer, metric, eps),
            f"{mechanism.upper()} {LABEL[scorer]}, ε = {eps:g}",
            printed.get((scorer, eps)),
            metric_label,
            reason(scorer, eps) if (scorer, eps) in printed else "",
        )
        for scorer in SCORERS
        for eps in EPSILONS[mechanism]
    )


def curves(mechanism: str, metric: str, prefix: str = "") -> dict[str, list[tuple[float, str]]]:
    """Series name → [(ε, key)] of one metric, one curve per scorer."""
    return {
        f"{prefix}{LABEL[s]}": [
            (eps, key(mechanism, s, metric, eps)) for eps in EPSILONS[mechanism]
        ]
        for s in SCORERS
    }


def quantile_bands(mechanism: str) -> dict[str, list[tuple[str, str]]]:
    """Series name → [(10 % key, 90 % key)] of the set cosine per ε, as Balu draws them."""
    return {
        LABEL[s]: [
            (key(mechanism, s, "cos_q10", eps), key(mechanism, s, "cos_q90", eps))
            for eps in EPSILONS[mechanism]
        ]
        for s in SCORERS
    }


def ordered_at_least(
    mechanism: str, metric: str, at_least: int
) -> Callable[[Mapping[str, float]], bool]:
    """MCMC with prior ≥ MCMC without ≥ single at ≥ `at_least` of the grid's ε."""

    def check(v: Mapping[str, float]) -> bool:
        hits = sum(
            v[key(mechanism, "mcmc_prior", metric, e)]
            >= v[key(mechanism, "mcmc_flat", metric, e)]
            >= v[key(mechanism, "single", metric, e)]
            for e in EPSILONS[mechanism]
        )
        return hits >= at_least

    return check


def below(
    mechanism: str, metric: str, low: str, high: str, eps_values: tuple[float, ...]
) -> Callable[[Mapping[str, float]], bool]:
    """Scorer `low` is below scorer `high` at every ε of `eps_values`."""

    def check(v: Mapping[str, float]) -> bool:
        return all(
            v[key(mechanism, low, metric, e)] < v[key(mechanism, high, metric, e)]
            for e in eps_values
        )

    return check


def between(name: str, lo: float, hi: float) -> Callable[[Mapping[str, float]], bool]:
    """The value of `name` lies in [lo, hi]."""

    def check(v: Mapping[str, float]) -> bool:
        return lo <= v[name] <= hi

    return check


def falls_to_the_smallest_eps(mechanism: str, metric: str) -> Callable[[Mapping[str, float]], bool]:
    """Every scorer that reads the release does worse at the grid's smallest ε than at its
    largest."""
    grid = EPSILONS[mechanism]

    def check(v: Mapping[str, float]) -> bool:
        return all(
            v[key(mechanism, s, metric, min(grid))] < v[key(mechanism, s, metric, max(grid))]
            for s in ("mcmc_prior", "mcmc_flat", "single")
        )

    return check


__all__ = [
    "ATTACK",
    "BLIP_EPS",
    "BLIP_SMALL_EPS",
    "EPSILONS",
    "JLT_EPS",
    "JLT_SMALL_EPS",
    "LABEL",
    "SCORERS",
    "below",
    "between",
    "curves",
    "falls_to_the_smallest_eps",
    "grid_config",
    "key",
    "ordered_at_least",
    "quantile_bands",
    "rows",
    "run_grid",
]
