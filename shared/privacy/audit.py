"""Black-box distinguishing audit: a Clopper–Pearson lower bound on a mechanism's ε.

An (ε, δ)-DP mechanism M satisfies P[M(D′) ∈ E] ≤ e^ε·P[M(D) ∈ E] + δ for every event E and
neighbouring profiles D, D′ (Dwork & Roth 2014, Def 2.4). So for any fixed E,

    ε ≥ ln((P[M(D′) ∈ E] − δ) / P[M(D) ∈ E]),

and replacing the two probabilities by a Clopper–Pearson lower bound of the numerator and an
upper bound of the denominator gives a lower confidence bound ε_lcb on the mechanism's true
privacy loss (Jagielski, Ullman & Oprea 2020; Nasr et al. 2021, "Adversary instantiation").
A correct mechanism gives ε_lcb ≤ ε_claimed except with probability ≤ 1 − confidence; a
mechanism that leaks more than it claims gives ε_lcb > ε_claimed once enough samples are drawn.

The audit only calls `Mechanism.release_many` (black box). Procedure, with N releases of each
of D and D′ drawn from generators seeded by `seed`:

1. *The statistic.* By default ("auto") the mechanism's likelihood-ratio statistic under its
   stated parameters (`shared.privacy.audit_statistics`: the ones at the added item's K
   positions for BLIP, the projection on its codeword for JLT, the differing bits for OUE, the
   changed element for the Laplace baseline): by Neyman–Pearson its level sets are the most
   powerful events, and it is fixed before sampling. For a mechanism without one, or with
   `method="learned"`, the statistic is *learned* on 20% of the samples: per-coordinate means
   and variances under D and D′ give three candidates T = w·x, the diagonal linear
   discriminant over all coordinates ("lda-all"), the same on the Bonferroni-significant
   coordinates ("lda-significant") and the single most significant coordinate
   ("top-coordinate").
2. *Select* (25% of the samples with a fixed statistic, 30% with learned ones): for each
   candidate and threshold t, the events {T ≥ t} and {T < t} in both directions (D′ over D and
   D over D′); keep the one whose Clopper–Pearson bound on this part is largest.
3. *Evaluate* (the other 75%, or 50%): fresh samples, the chosen event only. Selection never
   sees these, so the bound is not biased by the search (the union bound is only over the two
   CP bounds).

ε_lcb = max(0, ln((p_low − δ)/q_up)), each CP bound one-sided at level (1 − confidence)/2, so
`confidence` is the probability that ε_lcb is a valid lower bound on the true ε: the
false-failure rate of "ε_lcb ≤ ε_claimed" for a correct mechanism is at most 1 − confidence.

Beside ε_lcb the result reports ε_tight, the exact ε at the claim's δ of the mechanism as its
public parameters configure it (`audit_statistics.tight_epsilon`; for JLT's Gaussian the
privacy-loss distribution of σ/Δ: the default σ at ε = 1 is ε ≈ 0.26), so a loose claim is
visible. With a likelihood-ratio statistic the audit also knows the statistic's law under the
configured mechanism, hence ε_config(E) = ln((P_config[E | D′] − δ)/P_config[E | D]), the most
an honest implementation leaks on an event E (≤ ε_tight). A second event is selected for the
largest excess of the bound over ε_config (the *conformance* event) and bounded on the same
evaluation samples (each of the four CP bounds then at level (1 − confidence)/4, so both
statements hold together with probability ≥ confidence). Verdicts: "violation of the claim"
(ε_lcb > ε_claimed) and "leaks more than its parameters allow" (ε_lcb > ε_tight, or the
conformance bound above its ε_config).

Power: an event with ratio e^ε must also have enough mass to be seen. ε_lcb can exceed a value
ε′ only if some event E has P[E | D] ≲ e^(−ε′)·P[E | D′] and N ≳ e^ε′·ln(2/(1 − confidence))
/P[E | D′] evaluation samples see it. For BLIP at its defaults (ε = 8, K = 20) the tight event
"all K bits are 1" has mass 3.5e−5 under D′, so ε_lcb stays well below 8 at any affordable N
(a BLIP flipping for 2ε, truly 16, needs ≈ 3e5 evaluation samples to show ε_lcb > 8), and for
JLT's default the event-level ratios of a Gaussian are small where its mass is (its σ/2 twin,
truly ε ≈ 0.56, needs ≈ 1e6 to show ε_lcb > 0.26). The conformance event needs far fewer: the
same BLIP twin is caught at N = 2e4 (ε_lcb 5.3 on {S < 8}, which allows 2.9) and the JLT twin
at N ≈ 1e5. `default_samples` gives each mechanism enough to catch its 2× twin at the default
parameters of its config (tests/unit/shared/privacy/test_privacy_audit_power.py).

Neighbouring pairs (worst case for each stated relation; `shared.privacy.audit_neighbours`):
  * "one item added or removed" (BLIP, OUE add-remove, JLT): the empty profile (the added
    item collides with nothing) vs one item — for BLIP an item with K distinct hash positions,
    for JLT the item of largest codeword norm (it attains the sensitivity).
  * "one item replaced by another" (OUE): {j} vs {j′}.
  * "one element … changed" (the Laplace second-order baseline): {j} rated 1 vs rated 5, with
    the mechanism bound to a public model (µ = 3, V = 0) under which the completed vectors
    differ in exactly that element, by the full range.
Mechanisms without a DP claim (RPT, RRT, exact second order; PMD and PMC, which are only
element-wise private) are refused with a ConfigError: there is no ε to audit.

Sampling draws every release of one neighbour from one generator (sequential draws are
independent releases) and streams them in chunks, keeping only the scalar statistics, so
memory stays ~O(chunk × dim) whatever N is.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from privrec.shared.errors import ConfigError
from privrec.shared.mechanisms import make_mechanism
from privrec.shared.mechanisms.base import Mechanism
from privrec.shared.privacy.audit_events import (
    Event,
    Progress,
    Sampler,
    Statistic,
    clopper_pearson,
    configured_epsilon,
    epsilon_lower_bound,
    learn_candidates,
    select_event,
)
from privrec.shared.privacy.audit_neighbours import NeighbourPair, audit_setup
from privrec.shared.privacy.audit_statistics import configured, strongest_statistic, tight_epsilon
from privrec.shared.types import FloatArray

#: Fractions of the samples used to learn the statistic, select the event, evaluate it.
SPLIT = (0.2, 0.3, 0.5)
#: Fraction used to select the event when the statistic is fixed (the rest evaluates it).
SELECT_FIXED = 0.25
#: Releases of each neighbour by default: enough to catch the 2× twin of each mechanism at the
#: default parameters of its config (see the module docstring); others get DEFAULT_SAMPLES.
SAMPLES_BY_MECHANISM = {
    "blip": 50_000,
    "jlt": 150_000,
    "oue": 100_000,
    "laplace_second_order": 20_000,
}
DEFAULT_SAMPLES = 100_000


@dataclasses.dataclass(frozen=True)
class AuditResult:
    """Outcome of one audit.

    Attributes:
        mechanism: the mechanism's config name.
        params: its public parameters.
        epsilon_claimed: ε the mechanism states for one release.
        delta: δ the mechanism states (0 for pure ε-DP).
        epsilon_lcb: lower confidence bound on the true ε (≥ 0).
        epsilon_hat: the point estimate ln((p̂ − δ)/q̂) on the evaluation part (may be ∞).
        n_samples: releases of each neighbour (all three parts).
        n_evaluation: releases of each neighbour in the evaluation part.
        confidence: P[ε_lcb ≤ true ε] ≥ confidence.
        event: the chosen distinguishing event, in words.
        neighbours: the neighbouring pair, in words.
        p_lower: CP lower bound of P[E | numerator profile].
        q_upper: CP upper bound of P[E | denominator profile].
        seed: the seed the samples were drawn with.
        epsilon_tight: the exact ε at δ of the mechanism as its public parameters configure
            it (`audit_statistics.tight_epsilon`), or None when it cannot be evaluated.
        statistic: how the statistic was chosen: "likelihood-ratio", "learned" or "given".
        conformance_event: the event chosen to test the implementation against its
            configuration (the largest excess of the bound over ε_config), or "".
        epsilon_lcb_conformance: the lower bound on that event.
        epsilon_event_configured: ε_config of that event, the most an honest implementation
            of the configured parameters leaks on it (≤ ε_tight).
    """

    mechanism: str
    params: dict[str, Any]
    epsilon_claimed: float
    delta: float
    epsilon_lcb: float
    epsilon_hat: float
    n_samples: int
    n_evaluation: int
    confidence: float
    event: str
    neighbours: str
    p_lower: float
    q_upper: float
    seed: int
    epsilon_tight: float | None = None
    statistic: str = "learned"
    conformance_event: str = ""
    epsilon_lcb_conformance: float | None = None
    epsilon_event_configured: float | None = None

    @property
    def consistent(self) -> bool:
        """True iff the audit found no violation of the claim (ε_lcb ≤ ε_claimed)."""
        return self.epsilon_lcb <= self.epsilon_claimed

    @property
    def matches_parameters(self) -> bool:
        """True iff no bound exceeds what the configured mechanism allows: ε_lcb ≤ ε_tight
        and, on the conformance event, ε_lcb ≤ ε_config (unknown figures pass)."""
        if self.epsilon_tight is not None and self.epsilon_lcb > self.epsilon_tight:
            return False
        return (
            self.epsilon_lcb_conformance is None
            or self.epsilon_event_configured is None
            or self.epsilon_lcb_conformance <= self.epsilon_event_configured
        )

    @property
    def verdict(self) -> str:
        """The verdict: "violation of the claim", "leaks more than its parameters allow" or
        "no violation found"."""
        if not self.consistent:
            return "violation of the claim"
        if not self.matches_parameters:
            return "leaks more than its parameters allow"
        return "no violation found"

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict (a non-finite point estimate becomes None)."""
        out = dataclasses.asdict(self) | {
            "consistent": self.consistent,
            "matches_parameters": self.matches_parameters,
            "verdict": self.verdict,
        }
        for key in ("epsilon_hat", "epsilon_event_configured", "epsilon_tight"):
            if out[key] is not None and not math.isfinite(out[key]):
                out[key] = None
        return out


# ---------------------------------------------------------------------------- the audit
def default_samples(mechanism: Mechanism) -> int:
    """Releases of each neighbour the audit draws by default (`SAMPLES_BY_MECHANISM`)."""
    return SAMPLES_BY_MECHANISM.get(mechanism.name, DEFAULT_SAMPLES)


def audit(
    mechanism: Mechanism,
    *,
    pair: NeighbourPair | None = None,
    n_samples: int | None = None,
    confidence: float = 0.999,
    seed: int = 0,
    statistic: Statistic | None = None,
    method: str = "auto",
    n_items: int = 100,
    progress: Progress | None = None,
) -> AuditResult:
    """Audit `mechanism`'s claimed ε on a neighbouring pair (module docstring for the method).

    Args:
        mechanism: the mechanism under audit (its `privacy()` gives ε_claimed and δ).
        pair: neighbouring profiles; default from `audit_setup(mechanism, n_items)`.
        n_samples: releases of each neighbour; None takes `default_samples(mechanism)`. Split
            25/75 into select/evaluate with a fixed statistic, 20/30/50 into
            learn/select/evaluate with learned ones.
        confidence: probability that ε_lcb is a valid lower bound, in (0, 1).
        seed: seed of the samples (≥ 0); the same seed gives the same result.
        statistic: optional map from an (n, dim) release matrix to n scalars, replacing the
            mechanism's statistic (e.g. a known projection).
        method: "auto" (the likelihood-ratio statistic of `audit_statistics` when the
            mechanism has one, else learned) or "learned" (always learn it from samples).
        n_items: catalogue size of the default neighbouring pair.
        progress: called as progress(done, total) while sampling.

    Raises:
        ConfigError: the mechanism makes no DP claim, or bad arguments.
    """
    claim = mechanism.privacy()
    if claim.kind == "none" or claim.epsilon is None:
        why = " (element-wise privacy only, no ε)" if claim.kind == "element-wise" else ""
        raise ConfigError(f"mechanism {mechanism.name} makes no DP claim{why}; nothing to audit")
    if n_samples is None:
        n_samples = default_samples(mechanism)
    if not 0.0 < confidence < 1.0:
        raise ConfigError(f"audit.confidence must be in (0, 1), got {confidence!r}")
    if int(n_samples) != n_samples or n_samples < 100:
        raise ConfigError(f"audit.samples must be an integer >= 100, got {n_samples!r}")
    if seed < 0:
        raise ConfigError(f"audit.seed must be >= 0, got {seed!r}")
    if method not in ("auto", "learned"):
        raise ConfigError(f"audit.method must be 'auto' or 'learned', got {method!r}")
    delta = float(claim.delta or 0.0)
    if pair is None:
        mechanism, pair = audit_setup(mechanism, n_items)
    sampler = Sampler(mechanism, pair, seed, 2 * n_samples, progress)
    # the statistic comes from the configured (honest) mechanism: a lying implementation does
    # not get to choose how it is tested
    fixed = (
        strongest_statistic(configured(mechanism), pair.d, pair.d_prime)
        if statistic is None and method == "auto"
        else None
    )
    conform = configured_epsilon(fixed, delta) if fixed is not None and fixed.tail else None
    # four one-sided CP bounds (two events) with a configured law, else two
    alpha = (1.0 - confidence) / (4.0 if conform is not None else 2.0)

    def draw(n: int, which: int) -> Iterator[FloatArray]:
        return sampler.gathered(n, which, fixed) if fixed is not None else sampler.each(n, which)

    if fixed is not None:
        how = "likelihood-ratio"
        n_learn, n_select = 0, int(SELECT_FIXED * n_samples)
        cands: list[tuple[str, Statistic]] = [(f"{fixed.name}: {fixed.description}", fixed)]
    elif statistic is not None:
        how = "given"
        n_learn, n_select = 0, int(SELECT_FIXED * n_samples)
        cands = [("given statistic", statistic)]
    else:
        how = "learned"
        n_learn = int(SPLIT[0] * n_samples)
        n_select = int(SPLIT[1] * n_samples)
        cands = [(c.describe(), c) for c in learn_candidates(sampler, n_learn)]
    n_eval = n_samples - n_learn - n_select

    # Only the scalar statistics are kept: the releases are streamed chunk by chunk.
    stats_sel: list[list[list[FloatArray]]] = [[[], []] for _ in cands]
    for which in (0, 1):
        for x in draw(n_select, which):
            for i, (_, cand) in enumerate(cands):
                stats_sel[i][which].append(cand(x))
    scored = []
    for (name, cand), (t0, t1) in zip(cands, stats_sel, strict=True):
        event, eps_sel = select_event(np.concatenate(t0), np.concatenate(t1), delta, alpha)
        scored.append((eps_sel, name, cand, event))
    _, name, cand, event = max(scored, key=lambda s: s[0])
    events = [event]
    if conform is not None:
        sel0, sel1 = np.concatenate(stats_sel[0][0]), np.concatenate(stats_sel[0][1])
        events.append(select_event(sel0, sel1, delta, alpha, conform)[0])

    counts = np.zeros((len(events), 2), dtype=np.int64)
    for w in (0, 1):
        for x in draw(n_eval, w):
            t = cand(x)
            for e, ev in enumerate(events):
                counts[e, w] += ev.count(t)

    def bound(ev: Event, row: np.ndarray) -> tuple[int, int, float]:
        k_num, k_den = int(row[ev.numerator]), int(row[1 - ev.numerator])
        return k_num, k_den, float(epsilon_lower_bound(k_num, k_den, n_eval, delta, alpha))

    def describe(ev: Event, k_num: int, k_den: int) -> str:
        num, den = ("D′", "D") if ev.numerator == 1 else ("D", "D′")
        where = "≥" if ev.upper else "<"
        return (
            f"E = {{T {where} {ev.threshold:.6g}}}, {name}; "
            f"P[E|{num}] = {k_num}/{n_eval}, P[E|{den}] = {k_den}/{n_eval}"
        )

    k_num, k_den, eps_lcb = bound(event, counts[0])
    low, _ = clopper_pearson(k_num, n_eval, alpha)
    _, up = clopper_pearson(k_den, n_eval, alpha)
    p_hat, q_hat = k_num / n_eval, k_den / n_eval
    eps_hat = (
        math.inf
        if q_hat == 0
        else (math.log(p_hat - delta) - math.log(q_hat) if p_hat > delta else -math.inf)
    )
    conformance: dict[str, Any] = {}
    if conform is not None:
        ev = events[1]
        c_num, c_den, c_lcb = bound(ev, counts[1])
        eps_conf = float(conform(np.array([ev.threshold]), ev.upper, ev.numerator)[0])
        conformance = {
            "conformance_event": describe(ev, c_num, c_den),
            "epsilon_lcb_conformance": c_lcb,
            "epsilon_event_configured": eps_conf,
        }
    try:
        eps_tight: float | None = tight_epsilon(mechanism, delta, pair.d.n_items)
    except (ValueError, TypeError):
        eps_tight = None
    return AuditResult(
        mechanism=mechanism.name,
        params=dict(mechanism.public_params()),
        epsilon_claimed=float(claim.epsilon),
        delta=delta,
        epsilon_lcb=eps_lcb,
        epsilon_hat=float(eps_hat),
        n_samples=int(n_samples),
        n_evaluation=n_eval,
        confidence=float(confidence),
        event=describe(event, k_num, k_den),
        neighbours=pair.description,
        p_lower=float(low),
        q_upper=float(up),
        seed=int(seed),
        epsilon_tight=eps_tight,
        statistic=how,
        **conformance,
    )


def audit_by_name(name: str, params: Mapping[str, Any] | None = None, **kwargs: Any) -> AuditResult:
    """`audit(make_mechanism(name, params), **kwargs)`.

    Raises:
        ConfigError: unknown mechanism or parameter, or a mechanism without a DP claim.
    """
    return audit(make_mechanism(name, params), **kwargs)


__all__ = [
    "DEFAULT_SAMPLES",
    "SAMPLES_BY_MECHANISM",
    "AuditResult",
    "NeighbourPair",
    "audit",
    "audit_by_name",
    "audit_setup",
    "clopper_pearson",
    "default_samples",
    "epsilon_lower_bound",
]
