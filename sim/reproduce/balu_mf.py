"""`balu-t4.2` and `balu-dpmf`: Balu's count-sketch factorization (thesis ch. 4).

* `balu-t4.2` — Table 4.2: test RMSE of regular MF, count sketch (k = 4) and feature hashing
  (k = 1) at d = 32 and γ = 1, i.e. the same memory for the three (Eq. (4.9)), T = 20 epochs,
  η_t = η/(1 + t/T), (η, λ) per method by the two-stage line search on validation. Printed for
  MovieLens-1M: 0.873 / 0.876 / 0.906. Run on ML-1M with ``--data path/to/ratings.dat``;
  without it the entry runs on ML-100K, for which the thesis prints no number: the ML-1M rows
  are then NaN ("differs", never compared across data sets) and the run's own rows and the
  claims carry the result.
* `balu-dpmf` — Figs. 4.7/4.8: test RMSE and the KL divergence (4.15) of the data-clipped
  count sketch (k = 4) against the clipping threshold ε ∈ {2, 4, 8, ∞}, T = 100 epochs, with
  regular MF as the benchmark; the thesis prints curves only (no numbers), so the verdicts are
  its claims: RMSE falls and KLD rises with ε, regular MF leaks more than the sketch, compact
  models (larger γ, smaller d) leak less, KLD stays far below ε. We run d ∈ {8, 32} and
  γ ∈ {1, 4} of the thesis's d ∈ {8, 16, 32}, γ ∈ {1, 2, 4} (time), and tune (η, λ) once per
  (method, d, γ) at ε = ∞ with a one-stage search (η ∈ {0.003, 0.01, 0.03} at λ = 0.03, then
  λ ∈ {0.01, 0.03, 0.1}) and keep them for every ε: ε is the privacy parameter, not a tuned
  one (the thesis tunes per configuration, grid not given).

Both go through the project's factorization core (`server.models.count_sketch`, the code the
`sgd_mf` / `count_sketch_mf` / `feature_hashing_mf` / `dp_count_sketch_mf` recommenders run)
and Balu's protocol (`sim.reproduce.balu_protocol`). `--quick` runs the same code on a small
synthetic set with tiny grids.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from collections.abc import Mapping
from typing import ClassVar

from privrec.server.models.count_sketch import SGDConfig
from privrec.shared.data.dataset import RatingData
from privrec.sim.reproduce import balu_protocol as bp
from privrec.sim.reproduce.base import Claim, Published, Reproduction, RunContext

_ML1M = (
    "published on MovieLens-1M; compared only when run with --data ML-1M's ratings.dat "
    "(without it the entry runs on ML-100K, for which the thesis prints no number)"
)
_METHODS = {
    "regular": SGDConfig(d=32, storage="dense", epochs=20),
    "count_sketch": SGDConfig(d=32, storage="sketch", depth=4, gamma=1.0, epochs=20),
    "feature_hashing": SGDConfig(d=32, storage="sketch", depth=1, gamma=1.0, epochs=20),
}
_QUICK_GRID = bp.SearchGrid(etas=(0.01, 0.03), regs=(0.01, 0.1), reg0=0.03, refine=False)


ML1M_SIZE = (6040, 3706, 1_000_209)
"""MovieLens-1M's users, rated movies and ratings (GroupLens README)."""


def is_ml1m(data: RatingData) -> bool:
    """Whether `data` is MovieLens-1M: its name and its exact size (a file in ML-1M's format
    holding other ratings is not compared with the thesis's ML-1M numbers)."""
    return data.name == "ml-1m" and (data.n_users, data.n_items, data.n_ratings) == ML1M_SIZE


def _quick(config: SGDConfig, d: int = 4, epochs: int = 5) -> SGDConfig:
    return dataclasses.replace(config, d=d, epochs=epochs)


class BaluTable42(Reproduction):
    """Balu Table 4.2: regular MF, count sketch and feature hashing at equal memory (RMSE)."""

    name: ClassVar[str] = "balu-t4.2"
    title: ClassVar[str] = (
        "Balu Table 4.2: regular MF vs count sketch (k = 4) vs feature hashing, d = 32, γ = 1"
    )
    source: ClassVar[str] = "Balu 2016, §4.1.5.2, Table 4.2 (MovieLens 1M row)"
    default_repeats: ClassVar[int] = 3
    published: ClassVar[tuple[Published, ...]] = (
        Published("ml1m_regular", "ML-1M: regular factorization", 0.873, "RMSE", _ML1M),
        Published("ml1m_count_sketch", "ML-1M: count sketch (k = 4)", 0.876, "RMSE", _ML1M),
        Published("ml1m_feature_hashing", "ML-1M: feature hashing (k = 1)", 0.906, "RMSE", _ML1M),
        Published("regular", "this run's data: regular factorization", None, "RMSE"),
        Published("count_sketch", "this run's data: count sketch (k = 4)", None, "RMSE"),
        Published("feature_hashing", "this run's data: feature hashing (k = 1)", None, "RMSE"),
    )
    claims: ClassVar[tuple[Claim, ...]] = (
        Claim(
            "feature hashing is the worst of the three at equal memory",
            lambda v: v["feature_hashing"] > max(v["regular"], v["count_sketch"]),
        ),
        Claim(
            "count sketch (k = 4) is close to regular factorization (within 1 % RMSE)",
            lambda v: abs(v["count_sketch"] - v["regular"]) <= 0.01 * v["regular"],
        ),
    )

    def run(self, ctx: RunContext) -> dict[str, float]:
        """One repeat: each method's test RMSE after its line search of (η, λ)."""
        data = bp.load(ctx.data, ctx.quick, ctx.seed)
        s = bp.split(data, ctx.seed)
        grid = _QUICK_GRID if ctx.quick else bp.SearchGrid()
        out: dict[str, float] = {}
        for i, (method, base) in enumerate(_METHODS.items()):
            ctx.progress(f"{self.name}: {method} (line search)", i, len(_METHODS))
            t0 = time.perf_counter()
            config, model = bp.tuned(s, _quick(base) if ctx.quick else base, grid, ctx.seed, method)
            out[method] = bp.score(model, s.test, s.scale)
            out[f"{method}_eta"], out[f"{method}_reg"] = config.eta, config.reg
            out[f"{method}_cells"] = float(model.cells)
            out[f"{method}_seconds"] = time.perf_counter() - t0
        out["test_ratings"] = float(len(s.test))
        # The printed numbers are ML-1M's: compared only on ML-1M (NaN, "differs", otherwise),
        # recognised by its size, not its file name (any ratings.dat reads as "ml-1m").
        on_ml1m = is_ml1m(data) and not ctx.quick
        for method in _METHODS:
            out[f"ml1m_{method}"] = out[method] if on_ml1m else math.nan
        return out


# --------------------------------------------------------------------------- balu-dpmf
EPSILONS = (2.0, 4.0, 8.0, math.inf)
DIMS = (8, 32)
GAMMAS = (1.0, 4.0)
_DP_GRID = bp.SearchGrid(etas=(0.003, 0.01, 0.03), regs=(0.01, 0.03, 0.1), refine=False)


def _eps(e: float) -> str:
    return "inf" if math.isinf(e) else f"{e:g}"


def _cs(d: int, g: float, e: float) -> str:
    return f"cs_d{d}_g{g:g}_eps{_eps(e)}"


def _rows() -> tuple[Published, ...]:
    rows = []
    for d in DIMS:
        rows.append(Published(f"mf_d{d}", f"regular MF, d = {d}", None, "RMSE"))
        for g in GAMMAS:
            for e in EPSILONS:
                label = f"count sketch d = {d}, γ = {g:g}, ε = {_eps(e)}"
                rows.append(Published(_cs(d, g, e), label, None, "RMSE"))
    for d in DIMS:
        rows.append(Published(f"kld_mf_d{d}", f"KLD regular MF, d = {d}", None, "KLD"))
        for g in GAMMAS:
            for e in EPSILONS:
                label = f"KLD count sketch d = {d}, γ = {g:g}, ε = {_eps(e)}"
                rows.append(Published("kld_" + _cs(d, g, e), label, None, "KLD"))
    return tuple(rows)


def _series_monotone(v: Mapping[str, float], prefix: str, *, increasing: bool) -> bool:
    """For every (d, γ): the values over ε = 2, 4, 8, ∞ never go the wrong way."""
    for d in DIMS:
        for g in GAMMAS:
            seq = [v[prefix + _cs(d, g, e)] for e in EPSILONS]
            pairs = itertools.pairwise(seq)
            if not all((b >= a) if increasing else (b <= a) for a, b in pairs):
                return False
    return True


def _regular_leaks_more(v: Mapping[str, float]) -> bool:
    """Regular MF's KLD above the sketch's (ε = ∞) in most (d, γ) cases."""
    cases = [v[f"kld_mf_d{d}"] > v["kld_" + _cs(d, g, math.inf)] for d in DIMS for g in GAMMAS]
    return sum(cases) > len(cases) / 2


def _compact_leaks_less(v: Mapping[str, float]) -> bool:
    """At ε = ∞: a larger γ leaks less at each d, and d = 8 less than d = 32 at each γ."""
    inf = math.inf
    by_gamma = all(
        v["kld_" + _cs(d, GAMMAS[-1], inf)] < v["kld_" + _cs(d, GAMMAS[0], inf)] for d in DIMS
    )
    by_d = all(v["kld_" + _cs(DIMS[0], g, inf)] < v["kld_" + _cs(DIMS[-1], g, inf)] for g in GAMMAS)
    return by_gamma and by_d


class BaluDPMF(Reproduction):
    """Balu Figs. 4.7/4.8: the data-clipped count sketch's RMSE and KLD against ε."""

    name: ClassVar[str] = "balu-dpmf"
    title: ClassVar[str] = "Balu Figs. 4.7/4.8: data-clipped count sketch, RMSE and KLD vs ε"
    source: ClassVar[str] = "Balu 2016, §4.2.4, Figs. 4.7 and 4.8 (curves, no printed numbers)"
    default_repeats: ClassVar[int] = 2
    x_label: ClassVar[str] = "ε (clipping threshold; ∞ drawn at 16)"
    published: ClassVar[tuple[Published, ...]] = _rows()
    claims: ClassVar[tuple[Claim, ...]] = (
        Claim(
            "RMSE does not rise as ε grows (Fig. 4.7), every (d, γ)",
            lambda v: _series_monotone(v, "", increasing=False),
        ),
        Claim(
            "KLD does not fall as ε grows (Fig. 4.8), every (d, γ)",
            lambda v: _series_monotone(v, "kld_", increasing=True),
        ),
        Claim("regular MF has the higher KLD in most cases (Fig. 4.8)", _regular_leaks_more),
        Claim("compact models (larger γ, smaller d) leak less (Fig. 4.8)", _compact_leaks_less),
        Claim(
            "KLD is far below the target ε (below ε/10, Fig. 4.8)",
            lambda v: all(
                v["kld_" + _cs(d, g, e)] < e / 10
                for d in DIMS
                for g in GAMMAS
                for e in EPSILONS
                if math.isfinite(e)
            ),
        ),
    )

    def curve(self) -> dict[str, list[tuple[float, str]]]:
        """One curve per (d, γ): the RMSE against ε (∞ drawn at 16)."""
        x = {e: (16.0 if math.isinf(e) else e) for e in EPSILONS}
        return {
            f"count sketch d = {d}, γ = {g:g}": [(x[e], _cs(d, g, e)) for e in EPSILONS]
            for d in DIMS
            for g in GAMMAS
        }

    def run(self, ctx: RunContext) -> dict[str, float]:
        """One repeat: the clipped count sketch's RMSE and KLD at every (d, γ, ε)."""
        data = bp.load(ctx.data, ctx.quick, ctx.seed)
        s = bp.split(data, ctx.seed)
        grid = _QUICK_GRID if ctx.quick else _DP_GRID
        epochs = 5 if ctx.quick else 100
        out: dict[str, float] = {}
        steps = len(DIMS) * (1 + len(GAMMAS))
        done = 0
        for d in DIMS:
            dd = 2 if ctx.quick and d == DIMS[0] else (4 if ctx.quick else d)
            ctx.progress(f"{self.name}: regular MF d = {d}", done, steps)
            base = SGDConfig(d=dd, storage="dense", epochs=epochs)
            _, model = bp.tuned(s, base, grid, ctx.seed, f"mf-d{d}")
            out[f"mf_d{d}"], out[f"kld_mf_d{d}"] = (
                bp.score(model, s.test, s.scale),
                bp.kld(model, s),
            )
            done += 1
            for g in GAMMAS:
                ctx.progress(f"{self.name}: count sketch d = {d}, γ = {g:g}", done, steps)
                base = SGDConfig(d=dd, storage="sketch", depth=4, gamma=g, epochs=epochs)
                tag = f"cs-d{d}-g{g:g}"
                config, unclipped = bp.tuned(s, base, grid, ctx.seed, tag)
                out[f"eta_{tag}"], out[f"reg_{tag}"] = config.eta, config.reg
                for e in EPSILONS:
                    model = unclipped
                    if not math.isinf(e):
                        model = bp.fit(s, dataclasses.replace(config, clip=e), ctx.seed, tag)
                        skipped = model.skipped[-1] / max(len(s.train), 1)
                        out[f"skipped_last_epoch_{_cs(d, g, e)}"] = skipped
                    out[_cs(d, g, e)] = bp.score(model, s.test, s.scale)
                    out["kld_" + _cs(d, g, e)] = bp.kld(model, s)
                done += 1
        return out


__all__ = ["ML1M_SIZE", "BaluDPMF", "BaluTable42", "is_ml1m"]
