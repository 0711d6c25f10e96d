"""`zhu-pncf` and `zhu-eps`: Zhu's PNCF against its baselines (thesis Ch. 3, Figs 3.1–3.6).

Protocol (Zhu §3.5.1): All-But-One — one rating per user, drawn at random, is predicted from
all the others (`shared.data.splits.withhold`, k = 1); MAE (Eq 3.5.1). The thesis's data are
Netflix and MovieLens-1M; **no ML-100K number exists**, so these entries check the thesis's
*orderings and trends* (`Claim`s), never a number (every row's published value is None). The
ML-1M profile runs with `--data path/to/ratings.dat`.

* `zhu-pncf`: MAE against k = 5, 10, …, 50 at ε = 1, item-based, PCC and COS, for the
  non-private top-k, PNCF, RS&NM and GS&NM (Table 3.1; Figs 3.1–3.5), with Algorithm 1's noise
  scale Lap(2k·RS/ε) — the scale under which one prediction is ε-DP. A fifth series, PNCF with
  Eq 3.4.1's scale Lap(2·RS/ε) (which spends (k + 1)·ε/2 per prediction), shows which reading
  the thesis's "PNCF very close to non-private" needs.
* `zhu-eps`: PNCF's MAE against ε = 0.1, 0.2, …, 1 at k = 35, PCC, item- and user-based
  (Fig. 3.6), Algorithm 1's scale.

The models are the protocol's own (`server.models.pncf`); each prediction is one
`Recommender.predict`, answered exactly as the aggregator answers a test user. The fitted
similarity and sensitivity matrices are shared across k, ε and variant (`adopt_fit`), which act
only when answering.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import ClassVar

import numpy as np
import scipy.sparse as sp

from privrec.server.models import PNCF, CoRatedKNN
from privrec.server.models.foldwise import FoldwiseRecommender
from privrec.shared.data import load_dataset, make_synthetic
from privrec.shared.data.dataset import RatingData
from privrec.shared.data.splits import withhold
from privrec.shared.types import FloatArray, IntArray
from privrec.sim.reproduce.base import Claim, Published, Reproduction, RunContext

_NO_NUMBER = "the thesis has no ML-100K number (its MovieLens is ML-1M, figures only)"
KS = (5, 10, 15, 20, 25, 30, 35, 40, 45, 50)
QUICK_KS = (5, 10)
EPSILONS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
SIMS = ("pcc", "cos")
METHODS = {  # key → (label, model factory)
    "np": "Non-private",
    "pncf": "PNCF",
    "rs_nm": "RS&NM",
    "gs_nm": "GS&NM",
    "pncf_eq": "PNCF, Eq 3.4.1 scale",
}


def load(ctx: RunContext, n_users: int = 80, n_items: int = 40) -> RatingData:
    """ML-100K (or `--data`), or with `--quick` a small synthetic set."""
    if ctx.quick:
        return make_synthetic(n_users, n_items, seed=ctx.seed, density=0.3)
    return load_dataset(str(ctx.data) if ctx.data else "ml-100k")


Test = tuple[IntArray, FloatArray, int, float]
"""One All-But-One test: her query (items, ratings), the held-out item and its rating."""


def all_but_one(ratings: sp.csr_matrix, seed: int) -> tuple[sp.csr_matrix, list[Test]]:
    """Zhu's All-But-One split: train, and per user (her query, the held-out item, rating)."""
    users = np.flatnonzero(np.diff(ratings.indptr) >= 2)
    train, held = withhold(ratings, users, 1, seed)
    tests: list[Test] = []
    for u, i, r in zip(held.user_idx, held.item_idx, held.rating, strict=True):
        lo, hi = train.indptr[u], train.indptr[u + 1]
        items = train.indices[lo:hi].astype(np.int64)
        tests.append((items, np.asarray(train.data[lo:hi], np.float64), int(i), float(r)))
    return train, tests


def mae(model: FoldwiseRecommender, tests: list[Test], scale: tuple[float, float]) -> float:
    """MAE (Zhu Eq 3.5.1) of the held-out ratings, predictions clipped to the scale as the
    protocol's clients do."""
    errors = []
    for q_idx, q_val, item, rating in tests:
        score = model.predict(q_idx, q_val, np.array([item]))[0][0]
        errors.append(abs(float(np.clip(score, *scale)) - rating))
    return float(np.mean(errors))


def _variant(method: str, k: int, eps: float, sim: str, seed: int) -> PNCF:
    """The item-based PNCF model of one method of `METHODS` (not "np")."""
    variant = {"pncf": "pncf", "pncf_eq": "pncf", "rs_nm": "rs_nm", "gs_nm": "gs_nm"}[method]
    perturbation = "eq-3.4.1" if method == "pncf_eq" else "algorithm-1"
    return PNCF(
        k,
        epsilon=eps,
        variant=variant,
        similarity=sim,
        perturbation=perturbation,
        random_state=seed,
    )


def _key(sim: str, method: str, k: int) -> str:
    return f"{sim}_{method}_k{k}"


Check = Callable[[Mapping[str, float]], bool]


def _below(a: float, b: float) -> bool:
    return a < b


def _close(a: float, b: float) -> bool:
    """Within 5 % above b ("very close", Zhu §3.5.2)."""
    return a <= 1.05 * b


def _at_every_k(sim: str, a: str, b: str, test: Callable[[float, float], bool]) -> Check:
    """The claim `test(value of method a, value of method b)` at every k of `KS`."""

    def check(values: Mapping[str, float]) -> bool:
        return all(test(values[_key(sim, a, k)], values[_key(sim, b, k)]) for k in KS)

    return check


def _gs_improves(sim: str) -> Check:
    def check(values: Mapping[str, float]) -> bool:
        return values[_key(sim, "gs_nm", 50)] < values[_key(sim, "gs_nm", 5)]

    return check


_PAIR_CLAIMS = (
    ('PNCF beats GS&NM ("DP") at every k (Table 3.2)', "pncf", "gs_nm", _below),
    ("RS&NM beats GS&NM at every k (Table 3.3, Figs 3.2–3.3)", "rs_nm", "gs_nm", _below),
    ("PNCF beats RS&NM at every k (Figs 3.4–3.5)", "pncf", "rs_nm", _below),
    ("PNCF is very close to non-private (within 5 % at every k)", "pncf", "np", _close),
    ("PNCF with Eq 3.4.1's scale is within 5 % of non-private", "pncf_eq", "np", _close),
)
"""(claim, method a, method b, how a compares with b at every k), per similarity (Zhu Ch. 3)."""


class ZhuPNCF(Reproduction):
    """Zhu Ch. 3: MAE against k of non-private CF, PNCF and the two noisy baselines."""

    name: ClassVar[str] = "zhu-pncf"
    title: ClassVar[str] = (
        "Zhu Ch. 3: MAE vs k for Non-private, PNCF, RS&NM, GS&NM (ε = 1, item-based)"
    )
    source: ClassVar[str] = "Zhu 2014, Table 3.1–3.3, Figs 3.1–3.5 (orderings; no ML-100K numbers)"
    published: ClassVar[tuple[Published, ...]] = tuple(
        Published(_key(sim, m, k), f"{sim.upper()} {label}, k = {k}", None, "MAE", _NO_NUMBER)
        for sim in SIMS
        for m, label in METHODS.items()
        for k in KS
    )
    claims: ClassVar[tuple[Claim, ...]] = tuple(
        c
        for sim in SIMS
        for c in (
            *(
                Claim(f"{sim.upper()}: {text}", _at_every_k(sim, a, b, check))
                for text, a, b, check in _PAIR_CLAIMS
            ),
            Claim(f"{sim.upper()}: GS&NM improves with k (k = 50 below k = 5)", _gs_improves(sim)),
        )
    )
    default_repeats: ClassVar[int] = 3
    x_label: ClassVar[str] = "k (neighbours)"

    def run(self, ctx: RunContext) -> dict[str, float]:
        """One repeat: every method's All-But-One MAE at every k."""
        data = load(ctx)
        train, tests = all_but_one(data.ratings, ctx.seed)
        ks = QUICK_KS if ctx.quick else KS
        out: dict[str, float] = {}
        steps, done = len(SIMS) * len(METHODS) * len(ks), 0
        for sim in SIMS:
            plain = CoRatedKNN(ks[0], similarity=sim).fit(train)
            private = PNCF(ks[0], similarity=sim, random_state=ctx.seed).fit(train)
            for method in METHODS:
                for k in ks:
                    if method == "np":
                        model: FoldwiseRecommender = CoRatedKNN(k, similarity=sim).adopt_fit(plain)
                    else:
                        model = _variant(method, k, 1.0, sim, ctx.seed).adopt_fit(private)
                    out[_key(sim, method, k)] = mae(model, tests, data.rating_scale)
                    done += 1
                    ctx.progress(f"{self.name}: {sim} {method} k={k}", done, steps)
        for p in self.published:  # quick: the small k grid stands in for the rest
            if p.key not in out:
                out[p.key] = out[f"{p.key.rsplit('_k', 1)[0]}_k{ks[-1]}"]
        return out

    def curve(self) -> dict[str, list[tuple[float, str]]]:
        """MAE against k, one curve per similarity and method."""
        return {
            f"{sim.upper()} {label}": [(float(k), _key(sim, m, k)) for k in KS]
            for sim in SIMS
            for m, label in METHODS.items()
        }


def _eps_key(mode: str, eps: float) -> str:
    return f"{mode}_pncf_eps{eps:g}"


def _decreasing(mode: str) -> Check:
    def check(v: Mapping[str, float]) -> bool:
        return v[_eps_key(mode, 0.1)] > v[_eps_key(mode, 0.4)] > v[_eps_key(mode, 1.0)]

    return check


def _steeper_first(mode: str) -> Check:
    def check(v: Mapping[str, float]) -> bool:
        first = v[_eps_key(mode, 0.1)] - v[_eps_key(mode, 0.4)]
        return first > v[_eps_key(mode, 0.4)] - v[_eps_key(mode, 1.0)]

    return check


def _stable(mode: str) -> Check:
    def check(v: Mapping[str, float]) -> bool:
        return abs(v[_eps_key(mode, 0.7)] - v[_eps_key(mode, 1.0)]) <= 0.01 * v[_eps_key(mode, 1.0)]

    return check


class ZhuEps(Reproduction):
    """Zhu Fig. 3.6: PNCF's MAE against ε, item- and user-based."""

    name: ClassVar[str] = "zhu-eps"
    title: ClassVar[str] = "Zhu Fig. 3.6: PNCF's MAE vs ε (k = 35, PCC, item- and user-based)"
    source: ClassVar[str] = "Zhu 2014, Fig. 3.6 (trends; no ML-100K numbers)"
    published: ClassVar[tuple[Published, ...]] = tuple(
        Published(_eps_key(mode, e), f"{mode}-based PNCF, ε = {e:g}", None, "MAE", _NO_NUMBER)
        for mode in ("item", "user")
        for e in EPSILONS
    )
    claims: ClassVar[tuple[Claim, ...]] = tuple(
        c
        for mode in ("item", "user")
        for c in (
            Claim(f"{mode}-based: MAE decreases as ε grows (ε = 0.1 > 0.4 > 1)", _decreasing(mode)),
            Claim(
                f"{mode}-based: the drop is steeper from 0.1 to 0.4 than from 0.4 to 1",
                _steeper_first(mode),
            ),
            Claim(
                f"{mode}-based: stable for ε ≥ 0.7 (MAE at 0.7 within 1 % of MAE at 1)",
                _stable(mode),
            ),
        )
    )
    default_repeats: ClassVar[int] = 3
    x_label: ClassVar[str] = "ε"

    def run(self, ctx: RunContext) -> dict[str, float]:
        """One repeat: PNCF's All-But-One MAE at every ε."""
        data = load(ctx)
        train, tests = all_but_one(data.ratings, ctx.seed)
        k = 5 if ctx.quick else 35
        epsilons = (0.1, 0.4, 0.7, 1.0) if ctx.quick else EPSILONS
        out: dict[str, float] = {}
        done = 0
        for mode in ("item", "user"):
            fitted = PNCF(k, mode=mode, similarity="pcc", random_state=ctx.seed).fit(train)
            for eps in epsilons:
                model = PNCF(k, epsilon=eps, mode=mode, similarity="pcc", random_state=ctx.seed)
                out[_eps_key(mode, eps)] = mae(model.adopt_fit(fitted), tests, data.rating_scale)
                done += 1
                ctx.progress(f"{self.name}: {mode} ε={eps:g}", done, 2 * len(epsilons))
            for eps in EPSILONS:  # quick: fill the grid from the nearest value run
                if _eps_key(mode, eps) not in out:
                    near = min(epsilons, key=lambda e, x=eps: abs(e - x))
                    out[_eps_key(mode, eps)] = out[_eps_key(mode, near)]
        return out

    def curve(self) -> dict[str, list[tuple[float, str]]]:
        """MAE against ε, item- and user-based."""
        return {
            f"{mode}-based PNCF": [(e, _eps_key(mode, e)) for e in EPSILONS]
            for mode in ("item", "user")
        }


__all__ = ["ZhuEps", "ZhuPNCF", "all_but_one", "load", "mae"]
