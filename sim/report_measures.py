"""Bilge's privacy measures (2013, ch. 3) of the run's own users, for the report's privacy
section: the privacy level the thesis defines for the mechanisms it applies to.

* RPT (no DP guarantee; Bilge §3.1): for each private user, with g her genuine ratings and m
  the catalogue, H(S) the entropy of her apparent profile size (§3.1.1, Eq 3.1), and the
  probability that the server guesses her exact list of genuinely rated items,
  1/(β_max·C(g′, g)) (§3.1.1), averaged in log10 over β uniform on {1, …, β_max} (the draw
  of Procedure 1); the median over users of each. The average conditional privacy
  Π(P|U) = 2^{H(P|U)} of her z-scores (§3.1.2; σ_P = 1, the fair-coin Gaussian/uniform noise
  of Procedure 1), at σ = σ_max and averaged over σ uniform on (0, σ_max] (the per-user draw),
  with the privacy loss Pr(P|U) at σ_max. The estimators are `shared.privacy.measures`'.
* RRT (Bilge §2.2.2, after Kaleli & Polat 2007): the thesis's only statement of its privacy,
  "each value is correct with probability θ", with the M groups negated together; beside it
  (ours, not the thesis's) the binary entropy h2(θ) of a released bit about the true one.

Other mechanisms: None (their guarantee is stated by ε, or by their own attacks).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import special

from privrec.shared.privacy.measures import (
    apparent_size_entropy,
    conditional_privacy,
    fake_count,
    privacy_loss_fraction,
)
from privrec.shared.privacy.sketch_information import binary_entropy
from privrec.shared.run_config import PublicRunConfig

SIGMA_POINTS = 16
"""Midpoints of (0, σ_max] over which Π(P|U) is averaged (the per-user σ draw)."""
SOURCE = "Bilge 2013, ch. 3 (§3.1.1, §3.1.2) and §2.2.2"


def exact_list_log10(n_genuine: int, n_items: int, beta_max: int) -> float:
    """E_β[log10 P(exact genuine list)], β uniform on {1, …, β_max}: the server sees
    g′ = g + ⌊(m − g)·β/100⌋ filled cells and guesses β, then g of the g′ (Bilge §3.1.1)."""
    betas = np.arange(1, beta_max + 1)
    apparent = n_genuine + fake_count(n_items - n_genuine, betas)
    log_comb = (
        special.gammaln(apparent + 1)
        - special.gammaln(n_genuine + 1)
        - special.gammaln(apparent - n_genuine + 1)
    )
    return float(np.mean(-math.log(beta_max) - log_comb) / math.log(10.0))


def rpt_measures(params: dict[str, Any], genuine: Sequence[int], n_items: int) -> dict[str, Any]:
    """Bilge's measures of RPT for users with `genuine` ratings each (module docstring)."""
    sigma_max, beta_max = float(params["sigma_max"]), int(params["beta_max"])
    out: dict[str, Any] = {"mechanism": "rpt", "source": SOURCE, "users": len(genuine)}
    if beta_max >= 1 and genuine:
        per_g = {
            g: (apparent_size_entropy(g, n_items, beta_max), exact_list_log10(g, n_items, beta_max))
            for g in set(genuine)
        }
        out["apparent_size_entropy_bits"] = {
            "median": statistics.median(per_g[g][0] for g in genuine),
            "bound": math.log2(beta_max),
        }
        out["exact_list_log10_probability"] = {
            "median": statistics.median(per_g[g][1] for g in genuine)
        }
    sigmas = sigma_max * (np.arange(SIGMA_POINTS) + 0.5) / SIGMA_POINTS
    out["conditional_privacy"] = {
        "sigma_p": 1.0,
        "noise": "mixture",
        "at_sigma_max": conditional_privacy(1.0, sigma_max, "mixture"),
        "mean_over_sigma": float(np.mean([conditional_privacy(1.0, s, "mixture") for s in sigmas])),
        "privacy_loss_at_sigma_max": privacy_loss_fraction(1.0, sigma_max, "mixture"),
    }
    return out


def rrt_measures(params: dict[str, Any]) -> dict[str, Any]:
    """Bilge's statement of RRT's privacy (module docstring)."""
    theta = float(params["theta"])
    return {
        "mechanism": "rrt",
        "source": SOURCE,
        "value_correct_probability": theta,
        "groups": int(params["n_groups"]),
        "bit_entropy_bits": float(binary_entropy(theta)) / math.log(2.0),
    }


def privacy_measures(
    run_config: PublicRunConfig, genuine: Sequence[int], n_items: int
) -> dict[str, Any] | None:
    """Bilge's measures for the run's mechanism (None when they do not apply); `genuine`
    holds each private user's number of released genuine ratings."""
    params = dict(run_config.public_params)
    if run_config.mechanism_name == "rpt":
        return rpt_measures(params, genuine, n_items)
    if run_config.mechanism_name == "rrt":
        return rrt_measures(params)
    return None


def measures_text(m: dict[str, Any]) -> str:
    """The measures in one paragraph of report.md."""
    if m["mechanism"] == "rrt":
        return (
            f"Bilge's measure ({m['source']}): each released value is correct with "
            f"probability θ = {m['value_correct_probability']:g} ({m['groups']} groups negated "
            f"together); a released bit leaves h2(θ) = {m['bit_entropy_bits']:.3f} bits of "
            "uncertainty about the true one (ours)."
        )
    parts = []
    if "apparent_size_entropy_bits" in m:
        h = m["apparent_size_entropy_bits"]
        p = m["exact_list_log10_probability"]
        parts.append(
            f"H(S) = {h['median']:.3f} bits (median user; at most log2 β_max = "
            f"{h['bound']:.3f}), P(exact list of rated items) = 10^{p['median']:.1f}"
        )
    c = m["conditional_privacy"]
    parts.append(
        f"Π(P|U) = {c['at_sigma_max']:.3f} at σ = σ_max and {c['mean_over_sigma']:.3f} "
        f"averaged over σ ~ U(0, σ_max] (σ_P = 1, Procedure 1's coin of Gaussian and uniform "
        f"noise), privacy loss Pr(P|U) = {c['privacy_loss_at_sigma_max']:.3f} at σ_max"
    )
    return f"Bilge's measures ({m['source']}, {m['users']} users): " + "; ".join(parts) + "."


def measure_rows(m: dict[str, Any] | None) -> list[tuple[str, str, str]]:
    """(metric, value, beside) rows of the summary table."""
    if not m:
        return []
    if m["mechanism"] == "rrt":
        return [("P(released value correct) θ", f"{m['value_correct_probability']:g}", SOURCE)]
    rows = []
    if "apparent_size_entropy_bits" in m:
        h = m["apparent_size_entropy_bits"]
        rows.append(("H(S), median user (bits)", f"{h['median']:.3f}", f"max {h['bound']:.3f}"))
        p = m["exact_list_log10_probability"]["median"]
        rows.append(("P(exact rated list), median user", f"10^{p:.1f}", "Bilge §3.1.1"))
    c = m["conditional_privacy"]
    rows.append(
        ("Π(P|U) at σ_max", f"{c['at_sigma_max']:.3f}", f"mean over σ {c['mean_over_sigma']:.3f}")
    )
    return rows


__all__ = [
    "exact_list_log10",
    "measure_rows",
    "measures_text",
    "privacy_measures",
    "rpt_measures",
    "rrt_measures",
]
