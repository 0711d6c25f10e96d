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

Neighbouring pairs (worst case for each stated relation; see `neighbour_pair`, `audit_setup`):
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

import copy
import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
from scipy import stats

from privrec.shared.errors import ConfigError
from privrec.shared.mechanisms import (
    Blip,
    JohnsonLindenstrauss,
    SecondOrderMechanism,
    make_mechanism,
)
from privrec.shared.mechanisms.base import (
    BitPayload,
    DensePayload,
    Mechanism,
    Payload,
    Profile,
    SparsePayload,
)
from privrec.shared.privacy.audit_statistics import (
    LinearStatistic,
    configured,
    strongest_statistic,
    tight_epsilon,
)
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
#: Rating scale used to build neighbouring profiles (MovieLens: 1–5).
RATING_LOW, RATING_HIGH = 1.0, 5.0
#: Thresholds tried per candidate statistic in the selection step.
MAX_THRESHOLDS = 2000
#: Bytes of float64 release matrix held in memory at once while sampling.
CHUNK_BYTES = 32 * 2**20

Statistic = Callable[[FloatArray], FloatArray]
Progress = Callable[[int, int], None]


@dataclasses.dataclass(frozen=True)
class NeighbourPair:
    """Two neighbouring profiles and how they differ.

    Attributes:
        d: the profile in the denominator of the privacy-loss ratio (e.g. without the item).
        d_prime: its neighbour (e.g. with the item).
        description: one line, e.g. "item 0 added (rated 5) to the empty profile".
    """

    d: Profile
    d_prime: Profile
    description: str


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
        """ "violation of the claim", "leaks more than its parameters allow" or "no violation
        found"."""
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


# ---------------------------------------------------------------------------- bounds
def clopper_pearson(k: np.ndarray | int, n: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """One-sided Clopper–Pearson bounds on a binomial proportion, each at level `alpha`.

    lower = Beta⁻¹(α; k, n − k + 1) (0 if k = 0), upper = Beta⁻¹(1 − α; k + 1, n − k)
    (1 if k = n). Clopper & Pearson 1934.

    Returns:
        (lower, upper), arrays shaped like `k`.
    """
    k = np.asarray(k, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        lower = np.where(k > 0, stats.beta.ppf(alpha, k, n - k + 1), 0.0)
        upper = np.where(k < n, stats.beta.ppf(1.0 - alpha, k + 1, n - k), 1.0)
    return lower, upper


def epsilon_lower_bound(
    k_num: np.ndarray | int, k_den: np.ndarray | int, n: int, delta: float, alpha: float
) -> np.ndarray:
    """max(0, ln((CP_low(k_num/n) − δ)/CP_up(k_den/n))) with each bound at level α."""
    low, _ = clopper_pearson(k_num, n, alpha)
    _, up = clopper_pearson(k_den, n, alpha)
    with np.errstate(divide="ignore", invalid="ignore"):
        eps = np.log(np.clip(low - delta, 0.0, None)) - np.log(up)
    return np.asarray(np.maximum(np.nan_to_num(eps, nan=0.0, neginf=0.0), 0.0))


# ---------------------------------------------------------------------------- sampling
def payload_vector(payload: Payload) -> FloatArray:
    """Flatten a release to a float vector (sparse: values then a presence indicator)."""
    if isinstance(payload, BitPayload):
        return np.asarray(payload.bits, dtype=np.float64).ravel()
    if isinstance(payload, DensePayload):
        return np.asarray(payload.values, dtype=np.float64).ravel()
    if isinstance(payload, SparsePayload):
        out = np.zeros(2 * payload.dim)
        out[payload.indices] = payload.values
        out[payload.dim + np.asarray(payload.indices)] = 1.0
        return out
    raise TypeError(f"cannot audit payload of type {type(payload).__name__}")


def sample_releases(
    mechanism: Mechanism, profile: Profile, n: int, rng: np.random.Generator
) -> FloatArray:
    """n releases of `profile` as an (n, dim) matrix, all drawn from one generator.

    Sequential draws from one generator are independent releases; sharing it avoids creating
    n generators (the expensive part for cheap mechanisms).
    """
    payloads = mechanism.release_many([profile] * n, [rng] * n)
    return np.stack([payload_vector(p) for p in payloads]) if n else np.zeros((0, 0))


def _chunks(total: int, dim: int) -> list[int]:
    size = max(1, min(total, CHUNK_BYTES // (8 * max(dim, 1))))
    return [min(size, total - i) for i in range(0, total, size)]


class _Sampler:
    """Draws releases of D and D′ in chunks, reporting progress."""

    def __init__(
        self,
        mechanism: Mechanism,
        pair: NeighbourPair,
        seed: int,
        total: int,
        progress: Progress | None,
    ) -> None:
        ss = np.random.SeedSequence([seed, 0x61756469])  # "audi"
        g0, g1 = ss.spawn(2)
        self.mechanism, self.pair = mechanism, pair
        self.rngs = (np.random.default_rng(g0), np.random.default_rng(g1))
        self.dim = payload_vector(mechanism.release(pair.d, np.random.default_rng(0))).size
        self.done, self.total, self.progress = 0, total, progress

    def each(self, n: int, which: int) -> Iterator[FloatArray]:
        """n releases of D (which = 0) or D′ (1), as (chunk, dim) matrices, lazily."""
        prof = self.pair.d if which == 0 else self.pair.d_prime
        for size in _chunks(n, self.dim):
            yield sample_releases(self.mechanism, prof, size, self.rngs[which])
            self._count(size)

    def gathered(self, n: int, which: int, stat: LinearStatistic) -> Iterator[FloatArray]:
        """n releases of D (which = 0) or D′ (1), only the coordinates `stat` reads, as
        (chunk, k) matrices: the rest of each release is never flattened."""
        prof = self.pair.d if which == 0 else self.pair.d_prime
        for size in _chunks(n, self.dim):
            rng = self.rngs[which]
            yield stat.gather(self.mechanism.release_many([prof] * size, [rng] * size))
            self._count(size)

    def _count(self, size: int) -> None:
        self.done += size
        if self.progress is not None:
            self.progress(self.done, self.total)


# ---------------------------------------------------------------------------- statistics
@dataclasses.dataclass(frozen=True)
class _Candidate:
    name: str
    weights: FloatArray  # shape (dim,)

    def __call__(self, x: FloatArray) -> FloatArray:
        return x @ self.weights

    def describe(self) -> str:
        """E.g. "lda-significant T = w·x over 2 coordinates [28, 59]"."""
        nz = np.flatnonzero(self.weights)
        shown = ", ".join(str(i) for i in nz[:6]) + (", …" if nz.size > 6 else "")
        what = "coordinate" if nz.size == 1 else "coordinates"
        return f"{self.name}: T = w·x over {nz.size} {what} [{shown}]"


def _learn(sampler: _Sampler, n: int) -> list[_Candidate]:
    """Candidate linear statistics from per-coordinate moments under D and D′."""
    moments = []
    for which in (0, 1):
        s = np.zeros(sampler.dim)
        s2 = np.zeros(sampler.dim)
        for x in sampler.each(n, which):
            s += x.sum(axis=0)
            s2 += (x * x).sum(axis=0)
        mean = s / n
        moments.append((mean, np.maximum(s2 / n - mean * mean, 0.0)))
    (m0, v0), (m1, v1) = moments
    diff = m1 - m0
    var = 0.5 * (v0 + v1)
    live = var > 1e-12
    w_all = np.where(live, diff / np.where(live, var, 1.0), 0.0)
    z = np.where(live, diff / np.sqrt(np.where(live, var, 1.0) * 2.0 / n), 0.0)
    # Coordinates with zero variance but a different constant are a perfect distinguisher.
    exact = ~live & (np.abs(diff) > 0)
    z_crit = stats.norm.isf(0.025 / max(sampler.dim, 1))
    sig = (np.abs(z) > z_crit) | exact
    w_sig = np.where(sig, np.where(exact, np.sign(diff), w_all), 0.0)
    best = int(np.argmax(np.where(exact, np.inf, np.abs(z))))
    w_top = np.zeros(sampler.dim)
    w_top[best] = 1.0 if diff[best] >= 0 else -1.0
    cands = [
        _Candidate("lda-significant", w_sig),
        _Candidate("lda-all", w_all),
        _Candidate("top-coordinate", w_top),
    ]
    return [c for c in cands if np.any(c.weights)] or [_Candidate("top-coordinate", w_top)]


@dataclasses.dataclass(frozen=True)
class _Event:
    """{T ≥ t} ("upper") or {T < t} ("lower"), with the profile in the numerator."""

    threshold: float
    upper: bool
    numerator: int  # 1: D′ over D, 0: D over D′

    def count(self, t: FloatArray) -> int:
        return int(np.count_nonzero(t >= self.threshold if self.upper else t < self.threshold))


ConfiguredEpsilon = Callable[[FloatArray, bool, int], FloatArray]
"""(thresholds, upper, numerator) → ε_config of each event under the configured mechanism."""


def _select(
    t0: FloatArray,
    t1: FloatArray,
    delta: float,
    alpha: float,
    configured: ConfiguredEpsilon | None = None,
) -> tuple[_Event, float]:
    """Best event on the selection part, and its score there: the bound itself, or, with
    `configured`, the bound's excess over what the configured mechanism allows on the event
    (`audit_statistics` module docstring)."""
    n = t0.size
    pooled = np.unique(np.concatenate([t0, t1]))
    if pooled.size > MAX_THRESHOLDS:
        pooled = np.unique(np.quantile(pooled, np.linspace(0.0, 1.0, MAX_THRESHOLDS)))
    s0, s1 = np.sort(t0), np.sort(t1)
    ge0 = n - np.searchsorted(s0, pooled, side="left")  # #{T ≥ t}
    ge1 = n - np.searchsorted(s1, pooled, side="left")
    best: tuple[float, _Event] = (-math.inf, _Event(float(pooled[0]), True, 1))
    for upper, c0, c1 in ((True, ge0, ge1), (False, n - ge0, n - ge1)):
        for numerator, kn, kd in ((1, c1, c0), (0, c0, c1)):
            score = epsilon_lower_bound(kn, kd, n, delta, alpha)
            if configured is not None:
                score = np.where(score > 0, score - configured(pooled, upper, numerator), -math.inf)
            i = int(np.argmax(score))
            if score[i] > best[0]:
                best = (float(score[i]), _Event(float(pooled[i]), upper, numerator))
    return best[1], best[0]


def configured_epsilon(stat: LinearStatistic, delta: float) -> ConfiguredEpsilon:
    """ε_config(E) = ln((P_config[E | num] − δ)/P_config[E | den]) for events E = {T ≥ t} or
    {T < t}, from the statistic's law under the configured mechanism (∞ when the denominator
    has no mass, −∞ when the numerator is at most δ)."""

    def eps(thresholds: FloatArray, upper: bool, numerator: int) -> FloatArray:
        p_num = stat.configured_probability(thresholds, upper, numerator)
        p_den = stat.configured_probability(thresholds, upper, 1 - numerator)
        with np.errstate(divide="ignore", invalid="ignore"):
            out: FloatArray = np.log(np.clip(p_num - delta, 0.0, None)) - np.log(p_den)
        return np.nan_to_num(out, nan=-math.inf)

    return eps


# ---------------------------------------------------------------------------- neighbours
def _profile(items: list[int], ratings: list[float], n_items: int) -> Profile:
    return Profile(
        np.asarray(items, dtype=np.int64), np.asarray(ratings, dtype=np.float64), n_items
    )


def _accepts(mechanism: Mechanism, profile: Profile) -> bool:
    try:
        mechanism.release(profile, np.random.default_rng(0))
    except (ValueError, IndexError, ZeroDivisionError, FloatingPointError):
        return False
    return True


def neighbour_pair(mechanism: Mechanism, n_items: int = 100, *, item: int = 0) -> NeighbourPair:
    """The worst-case neighbouring pair for the mechanism's stated relation.

    The relation is read from `mechanism.privacy().neighbouring`:

    * "… replaced by another" (OUE): {item} vs {item + 1 mod m}, both rated 5.
    * "… added or removed" (BLIP, OUE add-remove, JLT): the empty profile (so the added item
      collides with nothing) vs {item} rated 5; a one-item profile {item + 1 mod m} is the
      base if the mechanism rejects an empty one.
    * "rating …", "element …", "… changed/flipped" (PMD, Laplace): {item} rated 1 vs rated 5,
      the whole rating range.

    Args:
        mechanism: the mechanism under audit.
        n_items: the catalogue size m of both profiles.
        item: the item that differs (callers may pick one, e.g. a BLIP item whose K hash
            positions are distinct).

    Raises:
        ConfigError: the relation is not one the audit knows how to instantiate.
    """
    relation = mechanism.privacy().neighbouring.lower()
    if not 0 <= item < n_items or n_items < 2:
        raise ConfigError(
            f"audit: need n_items >= 2 and 0 <= item < n_items, got "
            f"item={item!r}, n_items={n_items!r}"
        )
    other = (item + 1) % n_items
    hi, lo = RATING_HIGH, RATING_LOW
    if "replac" in relation and "item" in relation:
        return NeighbourPair(
            _profile([item], [hi], n_items),
            _profile([other], [hi], n_items),
            f"item {item} replaced by item {other}; m = {n_items}",
        )
    if any(w in relation for w in ("add", "remov", "insert", "delet")):
        base, what = _profile([], [], n_items), "the empty profile"
        if not _accepts(mechanism, base):
            base, what = _profile([other], [hi], n_items), f"{{{other}}}"
        items = sorted([item, *base.items.tolist()])
        return NeighbourPair(
            base,
            _profile(items, [hi] * len(items), n_items),
            f"item {item} (rated {hi:g}) added to {what}; m = {n_items}",
        )
    if any(w in relation for w in ("flip", "chang", "replac", "modif", "rating", "element")):
        return NeighbourPair(
            _profile([item], [lo], n_items),
            _profile([item], [hi], n_items),
            f"item {item} rated {lo:g} vs {hi:g}; m = {n_items}",
        )
    raise ConfigError(
        f"audit: cannot build a neighbouring pair for the relation "
        f"{mechanism.privacy().neighbouring!r} of mechanism {mechanism.name!r}"
    )


def worst_case_item(mechanism: Mechanism, n_items: int) -> int:
    """The item whose addition moves the release most (0 when all items are alike).

    * BLIP: the first item whose K hash positions are distinct (a codeword of weight K; with a
      collision the item touches fewer bits and leaks less than ε).
    * JLT: argmax_j ‖X_j‖₂, the item that attains the codebook's sensitivity.
    """
    if isinstance(mechanism, Blip):
        pos = mechanism.hashes.positions(np.arange(n_items))
        distinct = [j for j in range(n_items) if np.unique(pos[j]).size == mechanism.n_hashes]
        return distinct[0] if distinct else 0
    if isinstance(mechanism, JohnsonLindenstrauss):
        return int(np.argmax(np.linalg.norm(mechanism.codebook(n_items), axis=1)))
    return 0


def audit_setup(mechanism: Mechanism, n_items: int = 100) -> tuple[Mechanism, NeighbourPair]:
    """The mechanism instance to sample and the worst-case pair for its stated relation.

    * JLT with a public `n_items`: the profiles use that catalogue size.
    * Second-order mechanisms (Laplace baseline) not yet bound to a public model: a copy is
      bound to µ = 3 (mid-scale), V = 0 (m × 1). With V = 0 the completion leaves unrated items
      at µ, so "item rated 1 vs 5" changes exactly one element of the completed vector by the
      full range Δ = 4: the worst case of the stated element-level relation. (With a real
      model the completion moves every unrated element and the profile-level loss is up to
      m·ε, which the mechanism flags and does not claim.)
    """
    if isinstance(mechanism, JohnsonLindenstrauss) and mechanism.n_items is not None:
        n_items = mechanism.n_items
    if isinstance(mechanism, SecondOrderMechanism) and not mechanism.is_bound:
        mechanism = copy.copy(mechanism)
        mechanism.bind(np.full(n_items, 0.5 * (RATING_LOW + RATING_HIGH)), np.zeros((n_items, 1)))
    return mechanism, neighbour_pair(mechanism, n_items, item=worst_case_item(mechanism, n_items))


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
    sampler = _Sampler(mechanism, pair, seed, 2 * n_samples, progress)
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
        cands = [(c.describe(), c) for c in _learn(sampler, n_learn)]
    n_eval = n_samples - n_learn - n_select

    # Only the scalar statistics are kept: the releases are streamed chunk by chunk.
    stats_sel: list[list[list[FloatArray]]] = [[[], []] for _ in cands]
    for which in (0, 1):
        for x in draw(n_select, which):
            for i, (_, cand) in enumerate(cands):
                stats_sel[i][which].append(cand(x))
    scored = []
    for (name, cand), (t0, t1) in zip(cands, stats_sel, strict=True):
        event, eps_sel = _select(np.concatenate(t0), np.concatenate(t1), delta, alpha)
        scored.append((eps_sel, name, cand, event))
    _, name, cand, event = max(scored, key=lambda s: s[0])
    events = [event]
    if conform is not None:
        sel0, sel1 = np.concatenate(stats_sel[0][0]), np.concatenate(stats_sel[0][1])
        events.append(_select(sel0, sel1, delta, alpha, conform)[0])

    counts = np.zeros((len(events), 2), dtype=np.int64)
    for w in (0, 1):
        for x in draw(n_eval, w):
            t = cand(x)
            for e, ev in enumerate(events):
                counts[e, w] += ev.count(t)

    def bound(ev: _Event, row: np.ndarray) -> tuple[int, int, float]:
        k_num, k_den = int(row[ev.numerator]), int(row[1 - ev.numerator])
        return k_num, k_den, float(epsilon_lower_bound(k_num, k_den, n_eval, delta, alpha))

    def describe(ev: _Event, k_num: int, k_den: int) -> str:
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


def expected_rr_lcb(p: float, q: float, n_eval: int, confidence: float) -> float:
    """The ε_lcb an audit reaches when its event has true probabilities p (num) and q (den).

    Plugs the expected counts into the bounds; used to document the power of the tests.
    """
    alpha = (1.0 - confidence) / 2.0
    return float(epsilon_lower_bound(round(p * n_eval), round(q * n_eval), n_eval, 0.0, alpha))


__all__ = [
    "AuditResult",
    "NeighbourPair",
    "audit",
    "audit_by_name",
    "audit_setup",
    "clopper_pearson",
    "configured_epsilon",
    "default_samples",
    "epsilon_lower_bound",
    "expected_rr_lcb",
    "neighbour_pair",
    "payload_vector",
    "sample_releases",
    "worst_case_item",
]
