"""`bilge-t6.3`, `bilge-t6.4`, `bilge-t6.5`: clustering-based CF and PPCF (Bilge Ch. 6, MLP).

Protocol (Bilge §6.5): MovieLens-100K, 5-fold cross-validation over users, 5 withheld ratings
per test user (4,715 predictions), k = 100; FBPs from the 19 genre flags; c ∈ {1, 2, 3, 5, 7,
10}; PPCF with β_max = 25 and σ_max = 1 (Tables 6.3, 6.4) or σ_max ∈ {0.5, 1, 2, 3, 4} at c = 2
with PBP (Table 6.5). c = 1 is "no clustering at all": one model, the same for every method and
profile, scored once per repeat. Models: `cluster_cf` (true ratings through the `raw`
mechanism) and `cluster_ppcf` (RPT releases); every cell runs through `sim.reproduce.protocol_run`
(see `sim.reproduce.bilge_common` for why), with the models' default neighbour rule ("raters").

Extras per cell: `…_seconds` (online time of all queries), `…_comparisons` (similarity
computations per query), `…_coverage`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from privrec.sim.reproduce.base import Claim, Published, Reproduction, RunContext, ordered
from privrec.sim.reproduce.bilge_common import (
    CF_GAP,
    PPCF_GAP,
    PROTOCOL_REASON,
    RAW,
    TIME_REASON,
    protocol_run,
    rpt,
)
from privrec.sim.reproduce.protocol_run import ProtocolRun

CLUSTERS = (1, 2, 3, 5, 7, 10)
SCHEMES = (
    ("pbp", "kmeans", "PBP KMC"),
    ("pbp", "fcm", "PBP FCM"),
    ("pbp", "som", "PBP SOM"),
    ("rbp", "kmeans", "RBP KMC"),
    ("rbp", "fcm", "RBP FCM"),
    ("rbp", "som", "RBP SOM"),
)

TABLE_6_3 = {  # CF, k = 100 (Bilge Table 6.3)
    "PBP KMC": (0.7519, 0.7561, 0.7635, 0.7732, 0.7881, 0.8054),
    "PBP FCM": (0.7519, 0.7543, 0.7586, 0.7595, 0.7588, 0.7620),
    "PBP SOM": (0.7519, 0.7549, 0.7668, 0.7800, 0.7886, 0.8103),
    "RBP KMC": (0.7519, 0.7604, 0.7708, 0.7837, 0.8114, 0.8293),
    "RBP FCM": (0.7519, 0.7603, 0.7634, 0.7706, 0.7774, 0.7803),
    "RBP SOM": (0.7519, 0.7604, 0.7748, 0.8050, 0.8151, 0.8379),
}
TABLE_6_4 = {  # PPCF, σ_max = 1, β_max = 25, k = 100 (Bilge Table 6.4)
    "PBP KMC": (0.7976, 0.7956, 0.8010, 0.8170, 0.8328, 0.8580),
    "PBP FCM": (0.7977, 0.7943, 0.7930, 0.7957, 0.7941, 0.7944),
    "PBP SOM": (0.7977, 0.7946, 0.7979, 0.8128, 0.8321, 0.8661),
    "RBP KMC": (0.7980, 0.8033, 0.8164, 0.8488, 0.8529, 0.8630),
    "RBP FCM": (0.7973, 0.8734, 0.9005, 0.9027, 0.9029, 0.9047),
    "RBP SOM": (0.7967, 0.9157, 0.9139, 0.9153, 0.9154, 0.9167),
}


def key(profile: str, method: str, c: int) -> str:
    return f"{profile}_{method}_c{c}"


def _rows(
    table: Mapping[str, tuple[float, ...]], reasons: Mapping[str, str]
) -> tuple[Published, ...]:
    return tuple(
        Published(
            key(profile, method, c),
            f"{label}, c = {c}",
            table[label][i],
            reason=reasons.get(label, reasons["*"]) if c > 1 else reasons["c1"],
        )
        for profile, method, label in SCHEMES
        for i, c in enumerate(CLUSTERS)
    )


def _curves() -> dict[str, list[tuple[float, str]]]:
    return {
        label: [(float(c), key(profile, method, c)) for c in CLUSTERS]
        for profile, method, label in SCHEMES
    }


def _mean_over_c(values: Mapping[str, float], profile: str, method: str) -> float:
    return sum(values[key(profile, method, c)] for c in CLUSTERS[1:]) / (len(CLUSTERS) - 1)


def _fcm_lowest(values: Mapping[str, float]) -> bool:
    """PBP FCM has the lowest MAE of the three methods at every c >= 3."""
    return all(
        values[key("pbp", "fcm", c)]
        < min(values[key("pbp", "kmeans", c)], values[key("pbp", "som", c)])
        for c in CLUSTERS[2:]
    )


def _pbp_not_worse(values: Mapping[str, float]) -> bool:
    """For every method, PBP's mean MAE over c >= 2 is at most RBP's."""
    return all(
        _mean_over_c(values, "pbp", m) <= _mean_over_c(values, "rbp", m)
        for m in ("kmeans", "fcm", "som")
    )


def score_table(run: ProtocolRun, model: str) -> dict[str, float]:
    """Every cell of a Table 6.3/6.4 layout on one protocol run (c = 1 scored once), plus the
    c = 1 model under the other neighbour rules (`c1_top-k`, `c1_absolute`: diagnostics of the
    protocol choice, never compared)."""
    out: dict[str, float] = {}
    base = run.score(model, {"clusters": 1})
    for profile, method, _ in SCHEMES:
        out[key(profile, method, 1)] = base.mae
    _extras(out, "c1", base)
    for rule in ("top-k", "absolute"):
        out[f"c1_{rule}"] = run.score(model, {"clusters": 1, "neighbours": rule}).mae
    for profile, method, _ in SCHEMES:
        for c in CLUSTERS[1:]:
            s = run.score(model, {"clusters": c, "method": method, "profile": profile})
            out[key(profile, method, c)] = s.mae
            _extras(out, key(profile, method, c), s)
    return out


def _extras(out: dict[str, float], name: str, s: object) -> None:
    for attr in ("online_seconds", "comparisons", "coverage", "mae_other_clip"):
        out[f"{name}_{attr}"] = float(getattr(s, attr))


_KMC_SOM_GROW: tuple[Claim, ...] = (
    Claim(
        "KMC's MAE (PBP) grows with c from 3 clusters on",
        ordered(*(key("pbp", "kmeans", c) for c in CLUSTERS[2:])),
    ),
    Claim(
        "SOM's MAE (PBP) grows with c from 3 clusters on",
        ordered(*(key("pbp", "som", c) for c in CLUSTERS[2:])),
    ),
    Claim("FCM (PBP) has the lowest MAE of the three methods at every c >= 3", _fcm_lowest),
    Claim("PBP is at least as accurate as RBP (mean over c >= 2, each method)", _pbp_not_worse),
)


class BilgeTable63(Reproduction):
    """Bilge Table 6.3: clustered CF on genre profiles against the number of clusters."""

    name: ClassVar[str] = "bilge-t6.3"
    title: ClassVar[str] = "Bilge Table 6.3: clustered CF on genre profiles (MLP, k = 100)"
    source: ClassVar[str] = "Bilge 2013, Ch. 6, Table 6.3"
    published: ClassVar[tuple[Published, ...]] = _rows(
        TABLE_6_3,
        {
            "c1": "CF (Pearson kNN) without clustering; " + CF_GAP,
            "*": "the base differs (" + CF_GAP + "); " + PROTOCOL_REASON,
        },
    )
    claims: ClassVar[tuple[Claim, ...]] = _KMC_SOM_GROW
    default_repeats: ClassVar[int] = 3
    x_label: ClassVar[str] = "number of clusters c"

    def run(self, ctx: RunContext) -> dict[str, float]:
        """One repeat: `cluster_cf` on raw ratings at every (method, profile, c)."""
        run = protocol_run(ctx, self.name, RAW, n_folds=5, k=100)
        return score_table(run, "cluster_cf")

    def curve(self) -> dict[str, list[tuple[float, str]]]:
        """MAE against c, one curve per method and profile."""
        return _curves()


class BilgeTable64(Reproduction):
    """Bilge Table 6.4: clustered PPCF on genre profiles against the number of clusters."""

    name: ClassVar[str] = "bilge-t6.4"
    title: ClassVar[str] = (
        "Bilge Table 6.4: clustered PPCF on genre profiles (MLP, k = 100, σ_max = 1, β_max = 25)"
    )
    source: ClassVar[str] = "Bilge 2013, Ch. 6, Table 6.4"
    published: ClassVar[tuple[Published, ...]] = _rows(
        TABLE_6_4,
        {
            "c1": "PPCF without clustering; " + PPCF_GAP,
            "RBP FCM": "RBP on U′ is under-specified (which values, how a negative sum is "
            "normalised); " + PPCF_GAP,
            "RBP SOM": "RBP on U′ is under-specified (which values, how a negative sum is "
            "normalised); " + PPCF_GAP,
            "*": PPCF_GAP,
        },
    )
    claims: ClassVar[tuple[Claim, ...]] = (
        *_KMC_SOM_GROW,
        Claim(
            "RBP breaks down under RPT: RBP FCM and RBP SOM are worse than PBP FCM and PBP SOM "
            "at every c >= 2",
            lambda v: all(
                v[key("rbp", m, c)] > v[key("pbp", m, c)]
                for m in ("fcm", "som")
                for c in CLUSTERS[1:]
            ),
        ),
    )
    default_repeats: ClassVar[int] = 3
    x_label: ClassVar[str] = "number of clusters c"

    def run(self, ctx: RunContext) -> dict[str, float]:
        """One repeat: `cluster_ppcf` on RPT releases at every (method, profile, c)."""
        run = protocol_run(ctx, self.name, rpt(1.0, 25), n_folds=5, k=100)
        return score_table(run, "cluster_ppcf")

    def curve(self) -> dict[str, list[tuple[float, str]]]:
        """MAE against c, one curve per method and profile."""
        return _curves()


SIGMAS = (0.5, 1.0, 2.0, 3.0, 4.0)
TABLE_6_5 = {  # c = 2, PBP, k = 100, β_max = 25 (Bilge Table 6.5)
    "kmeans": (0.7884, 0.7935, 0.8135, 0.8622, 0.9143),
    "fcm": (0.7853, 0.7915, 0.8080, 0.8519, 0.9079),
    "som": (0.7868, 0.7918, 0.8108, 0.8562, 0.9055),
}
T_6_5 = {"kmeans": 116.0, "fcm": 91.0, "som": 104.0}  # seconds; Base 199
METHOD_LABEL = {"kmeans": "KMC", "fcm": "FCM", "som": "SOM"}


def _sigma_key(method: str, sigma: float) -> str:
    return f"{method}_sigma_{sigma:g}"


class BilgeTable65(Reproduction):
    """Bilge Table 6.5: clustered PPCF against σ_max (c = 2, PBP)."""

    name: ClassVar[str] = "bilge-t6.5"
    title: ClassVar[str] = (
        "Bilge Table 6.5: clustered PPCF against σ_max (MLP, k = 100, c = 2, PBP, β_max = 25)"
    )
    source: ClassVar[str] = "Bilge 2013, Ch. 6, Table 6.5"
    published: ClassVar[tuple[Published, ...]] = (
        Published("base", "Base (CF, no clustering, no privacy)", 0.7519, reason=CF_GAP),
        *(
            Published(
                _sigma_key(m, s),
                f"{METHOD_LABEL[m]}, σ_max = {s:g}",
                TABLE_6_5[m][i],
                reason=PPCF_GAP,
            )
            for m in ("kmeans", "fcm", "som")
            for i, s in enumerate(SIGMAS)
        ),
        *(
            Published(
                f"{m}_time_ratio",
                f"T({METHOD_LABEL[m]}) / T(Base) (ours: similarity computations)",
                T_6_5[m] / 199.0,
                metric="time ratio",
                reason=TIME_REASON + "; ours: c = 2 over c = 1, both private at σ_max = 1",
            )
            for m in ("kmeans", "fcm", "som")
        ),
    )
    claims: ClassVar[tuple[Claim, ...]] = (
        *(
            Claim(
                f"{METHOD_LABEL[m]}'s MAE grows with σ_max",
                ordered(*(_sigma_key(m, s) for s in SIGMAS)),
            )
            for m in ("kmeans", "fcm", "som")
        ),
        Claim(
            "privacy costs accuracy: every private scheme is worse than Base at every σ_max",
            lambda v: all(
                v[_sigma_key(m, s)] > v["base"] for m in ("kmeans", "fcm", "som") for s in SIGMAS
            ),
        ),
        Claim(
            "clustering saves similarity computations: c = 2 needs fewer than c = 1",
            lambda v: all(v[f"{m}_time_ratio"] < 1.0 for m in TABLE_6_5),
        ),
        Claim(
            "FCM performs the best in online performance: fewest similarity computations of "
            "the three (c = 2)",
            lambda v: v["fcm_time_ratio"] < min(v["kmeans_time_ratio"], v["som_time_ratio"]),
        ),
        Claim(
            "FCM performs the best in accuracy: lowest MAE of the three at every σ_max <= 3 "
            "(the thesis's own σ_max = 4 row has SOM lowest)",
            lambda v: all(
                v[_sigma_key("fcm", s)] < min(v[_sigma_key("kmeans", s)], v[_sigma_key("som", s)])
                for s in SIGMAS[:4]
            ),
        ),
    )
    default_repeats: ClassVar[int] = 3
    x_label: ClassVar[str] = "σ_max"

    def run(self, ctx: RunContext) -> dict[str, float]:
        """One repeat: the CF base and `cluster_ppcf` at every (method, σ_max)."""
        out: dict[str, float] = {}
        base = protocol_run(ctx, self.name, RAW, n_folds=5, k=100).score(
            "cluster_cf", {"clusters": 1}
        )
        out["base"] = base.mae
        for i, sigma in enumerate(SIGMAS):
            ctx.progress(f"{self.name}: σ_max = {sigma:g}", i, len(SIGMAS))
            run = protocol_run(ctx, self.name, rpt(sigma, 25), n_folds=5, k=100)
            flat = run.score("cluster_ppcf", {"clusters": 1}) if sigma == 1.0 else None
            for method in ("kmeans", "fcm", "som"):
                s = run.score("cluster_ppcf", {"clusters": 2, "method": method})
                out[_sigma_key(method, sigma)] = s.mae
                if flat is not None:
                    out[f"{method}_time_ratio"] = s.comparisons / flat.comparisons
                    out[f"{method}_wall_ratio"] = s.online_seconds / flat.online_seconds
                    out[f"{method}_comparisons"] = s.comparisons
                    out["c1_comparisons"] = flat.comparisons
            if flat is not None:
                out["c1_seconds"] = flat.online_seconds
                out["ppcf_c1_sigma_1"] = flat.mae
        return out

    def curve(self) -> dict[str, list[tuple[float, str]]]:
        """MAE against σ_max, one curve per clustering method."""
        curves = {
            METHOD_LABEL[m]: [(s, _sigma_key(m, s)) for s in SIGMAS]
            for m in ("kmeans", "fcm", "som")
        }
        curves["Base"] = [(s, "base") for s in SIGMAS]
        return curves


__all__ = ["BilgeTable63", "BilgeTable64", "BilgeTable65"]
