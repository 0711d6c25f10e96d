"""`bilge-ch4`: Bilge Ch. 4 — target-item similarity (CF+, PPCF+) and τ item elimination (CF++,
PPCF++): the accuracy change and the online-time ratio over τ, as the thesis reports them.

Published (Bilge 2013, §4.5, MLM = MovieLens-1M, k = 10, 30 % of the users as test users with 5
withheld ratings each, σ_max = 2, β_max = 25, 100 repeats):

* Fig. 4.3: PPCF 0.818 → PPCF+ 0.790 (−3.42 %); PPCF++ better than PPCF+ at τ = 0.05 and 0.1,
  worse at τ = 0.5 (no numbers).
* Table 4.2, seconds for 9,060 predictions: PPCF 1,285, PPCF+ 1,351, PPCF++ τ = 0.05…0.5:
  416, 171, 70, 37, 28, 26 (the extraction's reconstruction; note §6 of 004_bilge.md). We
  compare ratios: PPCF+/PPCF and PPCF++(τ)/PPCF+.
* Fig. 4.1/4.2 (non-private, MLM): CF+ is 3.7 % more accurate than CF and 5.5 % slower; CF++ at
  τ = 0.5 is 2.96 % more accurate and saves about 98 % of the time.

How: `ProtocolRun` with Ch. 4's split (30 % test users, seeded) — the users' RPT releases and
fresh queries from `UserAgent` as in a `privrec sim` run, then every variant fitted on the *same*
releases and timed on the same queries (the model's `predict_block` per query, as `Predict`):
a τ sweep through `simulate` would redraw the releases per τ and time the transport with the
model. Item similarities for CF+ are the item PCC moved to [0, 1] (MLM's choice).
"""

from __future__ import annotations

from typing import ClassVar

from privrec.server.models import PPCF, PearsonKNN, TargetItemCF, TargetItemPPCF
from privrec.sim.reproduce.base import Claim, Published, Reproduction, RunContext, ordered
from privrec.sim.reproduce.bilge_common import entry_config, rpt
from privrec.sim.reproduce.protocol_run import ProtocolRun

TAUS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5)
PUBLISHED_SECONDS = {"ppcf": 1285, "ppcf_plus": 1351} | dict(
    zip(TAUS, (416, 171, 70, 37, 28, 26), strict=True)
)
_DATA = (
    "dataset differs: the thesis ran MLM (MovieLens-1M); this run is MLP (ML-100K) unless "
    "--data points at ML-1M's ratings.dat"
)
_TIME = (
    "timing model differs: MATLAB's dense products touch all m items for every user; ours "
    "touch only the active user's remaining columns of the sparse U′, plus a fixed per-query "
    "cost (neighbour sort, query handling) that τ cannot remove; on a shared 2-core machine "
    "single timings are noisy (see the spread)"
)
_FIGURE = "the thesis gives this only as a figure (Fig. 4.3), no number"
_IS_NOISE = (
    _DATA + "; and IS estimated on U′ from MLP's ~660 training users is dominated by the noise "
    "(its correlation with the true z-score cosine is about 0.1), so clipping it at 0 keeps a "
    "noisy subset of items: the shifted scale (extra key ppcf_plus_shift) stays near PPCF "
    "(docs/decisions/bilge_schemes.md, Ch. 4)"
)


def _tau_key(tau: float) -> str:
    return f"ppcf_pp_{tau:g}"


class BilgeCh4(Reproduction):
    """Bilge Ch. 4: PPCF+ and PPCF++ accuracy and online time over τ."""

    name: ClassVar[str] = "bilge-ch4"
    title: ClassVar[str] = "Bilge Ch. 4: PPCF+ and PPCF++ over τ (k = 10): accuracy and time"
    source: ClassVar[str] = "Bilge 2013, §4.5, Fig. 4.1–4.3 and Table 4.2 (MLM)"
    default_repeats: ClassVar[int] = 5
    x_label: ClassVar[str] = "τ"
    published: ClassVar[tuple[Published, ...]] = (
        Published("ppcf", "PPCF", 0.818, reason=_DATA),
        Published("ppcf_plus", "PPCF+", 0.790, reason=_IS_NOISE),
        Published("ppcf_plus_gain", "PPCF → PPCF+ MAE reduction", 3.42, "% of PPCF's MAE", _DATA),
        *(Published(_tau_key(t), f"PPCF++, τ = {t:g}", None, reason=_FIGURE) for t in TAUS),
        Published(
            "time_plus_over_ppcf",
            "T(PPCF+) / T(PPCF)",
            PUBLISHED_SECONDS["ppcf_plus"] / PUBLISHED_SECONDS["ppcf"],
            "time ratio",
            _TIME,
        ),
        *(
            Published(
                f"time_tau_{t:g}",
                f"T(PPCF++, τ = {t:g}) / T(PPCF+)",
                PUBLISHED_SECONDS[t] / PUBLISHED_SECONDS["ppcf_plus"],
                "time ratio",
                _TIME,
            )
            for t in TAUS
        ),
        Published("cf_plus_gain", "CF → CF+ MAE reduction", 3.7, "% of CF's MAE", _DATA),
        Published(
            "cf_plus_plus_gain", "CF → CF++ (τ = 0.5) MAE reduction", 2.96, "% of CF's MAE", _DATA
        ),
        Published("cf_time_plus", "T(CF+) / T(CF)", 1.055, "time ratio", _TIME),
        Published("cf_time_plus_plus", "T(CF++, τ = 0.5) / T(CF)", 0.02, "time ratio", _TIME),
    )
    claims: ClassVar[tuple[Claim, ...]] = (
        Claim("PPCF+ is more accurate than PPCF", ordered("ppcf_plus", "ppcf")),
        Claim(
            "PPCF++ beats PPCF+ at τ = 0.05 and τ = 0.1",
            lambda v: max(v[_tau_key(0.05)], v[_tau_key(0.1)]) < v["ppcf_plus"],
        ),
        Claim("PPCF++ at τ = 0.5 is worse than PPCF+", ordered("ppcf_plus", _tau_key(0.5))),
        Claim(
            "PPCF++'s online time falls as τ grows",
            ordered(*(f"time_tau_{t:g}" for t in TAUS), increasing=False),
        ),
        Claim("CF+ is more accurate than CF", lambda v: v["cf_plus_gain"] > 0),
    )

    def curve(self) -> dict[str, list[tuple[float, str]]]:
        """The online-time ratio T(PPCF++)/T(PPCF+) against τ."""
        return {"T(PPCF++) / T(PPCF+)": [(t, f"time_tau_{t:g}") for t in TAUS]}

    def run(self, ctx: RunContext) -> dict[str, float]:
        """One repeat: MAE and online time of PPCF, PPCF+ and PPCF++ at every τ."""
        config = entry_config(
            ctx, self.name, (120, 60), rpt(2.0, 25), {"name": "ppcf_plus", "k": 10}
        )
        protocol = ProtocolRun(config, test_fraction=0.3)
        train, queries = protocol.releases(), protocol.queries
        private = {"ppcf": PPCF(k=10), "ppcf_plus": TargetItemPPCF(k=10)} | {
            _tau_key(t): TargetItemPPCF(k=10, tau=t) for t in TAUS
        }
        ratings, true_queries = protocol.true_train("ratings"), protocol.true_queries("ratings")
        scale = protocol.data.rating_scale
        public = {
            "cf": PearsonKNN(k=10, clip=scale),
            "cf_plus": TargetItemCF(k=10, clip=scale),
            "cf_pp": TargetItemCF(k=10, tau=0.5, clip=scale),
        }
        mae, seconds = {}, {}
        steps = len(private) + len(public)
        for i, (key, model) in enumerate([*private.items(), *public.items()]):
            ctx.progress(f"{self.name}: {key}", i, steps)
            trained_on = (train, queries) if key in private else (ratings, true_queries)
            ev = protocol.evaluate(model, *trained_on)
            mae[key], seconds[key] = ev.metrics["mae"], ev.online_seconds
        out = dict(mae)
        out["ppcf_plus_gain"] = 100.0 * (mae["ppcf"] - mae["ppcf_plus"]) / mae["ppcf"]
        out["time_plus_over_ppcf"] = seconds["ppcf_plus"] / seconds["ppcf"]
        for t in TAUS:
            out[f"time_tau_{t:g}"] = seconds[_tau_key(t)] / seconds["ppcf_plus"]
        out["cf_plus_gain"] = 100.0 * (mae["cf"] - mae["cf_plus"]) / mae["cf"]
        out["cf_plus_plus_gain"] = 100.0 * (mae["cf"] - mae["cf_pp"]) / mae["cf"]
        out["cf_time_plus"] = seconds["cf_plus"] / seconds["cf"]
        out["cf_time_plus_plus"] = seconds["cf_pp"] / seconds["cf"]
        out |= {f"{k}_online_seconds": v for k, v in seconds.items()}
        # the other reading of the item-similarity scale (module docstring of target_item)
        ctx.progress(f"{self.name}: ppcf_plus (shift)", steps, steps + 1)
        out["ppcf_plus_shift"] = protocol.evaluate(
            TargetItemPPCF(k=10, scale="shift"), train, queries
        ).metrics["mae"]
        return out


__all__ = ["BilgeCh4"]
