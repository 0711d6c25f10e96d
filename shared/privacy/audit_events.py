"""The audit's statistics: sampling the releases, learning a statistic, choosing an event,
and the Clopper–Pearson bounds (Clopper & Pearson 1934) that turn event counts into ε_lcb.

`shared.privacy.audit` runs these in its three steps (learn, select, evaluate); the module
docstring there says why the steps see disjoint samples.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator

import numpy as np
from scipy import stats

from privrec.shared.mechanisms.base import Mechanism, Profile
from privrec.shared.privacy.audit_neighbours import NeighbourPair
from privrec.shared.privacy.audit_statistics import LinearStatistic, payload_vector
from privrec.shared.types import FloatArray

#: Thresholds tried per candidate statistic in the selection step.
MAX_THRESHOLDS = 2000
#: Bytes of float64 release matrix held in memory at once while sampling.
CHUNK_BYTES = 32 * 2**20

Statistic = Callable[[FloatArray], FloatArray]
"""A map from an (n, dim) release matrix to n scalars."""
Progress = Callable[[int, int], None]
"""Called as progress(done, total) while sampling."""


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
def sample_releases(
    mechanism: Mechanism, profile: Profile, n: int, rng: np.random.Generator
) -> FloatArray:
    """n releases of `profile` as an (n, dim) matrix, all drawn from one generator.

    Sequential draws from one generator are independent releases; sharing it avoids creating
    n generators (the expensive part for cheap mechanisms).
    """
    payloads = mechanism.release_many([profile] * n, [rng] * n)
    return np.stack([payload_vector(p) for p in payloads]) if n else np.zeros((0, 0))


def chunk_sizes(total: int, dim: int) -> list[int]:
    """`total` releases of `dim` floats cut into chunks of at most `CHUNK_BYTES` each."""
    size = max(1, min(total, CHUNK_BYTES // (8 * max(dim, 1))))
    return [min(size, total - i) for i in range(0, total, size)]


class Sampler:
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
        for size in chunk_sizes(n, self.dim):
            yield sample_releases(self.mechanism, prof, size, self.rngs[which])
            self._count(size)

    def gathered(self, n: int, which: int, stat: LinearStatistic) -> Iterator[FloatArray]:
        """n releases of D (which = 0) or D′ (1), only the coordinates `stat` reads, as
        (chunk, k) matrices: the rest of each release is never flattened."""
        prof = self.pair.d if which == 0 else self.pair.d_prime
        for size in chunk_sizes(n, self.dim):
            rng = self.rngs[which]
            yield stat.gather(self.mechanism.release_many([prof] * size, [rng] * size))
            self._count(size)

    def _count(self, size: int) -> None:
        self.done += size
        if self.progress is not None:
            self.progress(self.done, self.total)


# ---------------------------------------------------------------------------- statistics
@dataclasses.dataclass(frozen=True)
class Candidate:
    """A learned linear statistic T = w·x (`learn_candidates`).

    Attributes:
        name: how it was learned, e.g. "lda-significant".
        weights: float (dim,), w.
    """

    name: str
    weights: FloatArray  # shape (dim,)

    def __call__(self, x: FloatArray) -> FloatArray:
        """T of each release: (n, dim) → (n,)."""
        return x @ self.weights

    def describe(self) -> str:
        """E.g. "lda-significant T = w·x over 2 coordinates [28, 59]"."""
        nz = np.flatnonzero(self.weights)
        shown = ", ".join(str(i) for i in nz[:6]) + (", …" if nz.size > 6 else "")
        what = "coordinate" if nz.size == 1 else "coordinates"
        return f"{self.name}: T = w·x over {nz.size} {what} [{shown}]"


def learn_candidates(sampler: Sampler, n: int) -> list[Candidate]:
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
        Candidate("lda-significant", w_sig),
        Candidate("lda-all", w_all),
        Candidate("top-coordinate", w_top),
    ]
    return [c for c in cands if np.any(c.weights)] or [Candidate("top-coordinate", w_top)]


@dataclasses.dataclass(frozen=True)
class Event:
    """{T ≥ t} ("upper") or {T < t} ("lower"), with the profile in the numerator."""

    threshold: float
    upper: bool
    numerator: int  # 1: D′ over D, 0: D over D′

    def count(self, t: FloatArray) -> int:
        """How many of the statistics `t` fall in the event."""
        return int(np.count_nonzero(t >= self.threshold if self.upper else t < self.threshold))


ConfiguredEpsilon = Callable[[FloatArray, bool, int], FloatArray]
"""(thresholds, upper, numerator) → ε_config of each event under the configured mechanism."""


def select_event(
    t0: FloatArray,
    t1: FloatArray,
    delta: float,
    alpha: float,
    configured: ConfiguredEpsilon | None = None,
) -> tuple[Event, float]:
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
    best: tuple[float, Event] = (-math.inf, Event(float(pooled[0]), True, 1))
    for upper, c0, c1 in ((True, ge0, ge1), (False, n - ge0, n - ge1)):
        for numerator, kn, kd in ((1, c1, c0), (0, c0, c1)):
            score = epsilon_lower_bound(kn, kd, n, delta, alpha)
            if configured is not None:
                score = np.where(score > 0, score - configured(pooled, upper, numerator), -math.inf)
            i = int(np.argmax(score))
            if score[i] > best[0]:
                best = (float(score[i]), Event(float(pooled[i]), upper, numerator))
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


__all__ = [
    "CHUNK_BYTES",
    "MAX_THRESHOLDS",
    "Candidate",
    "ConfiguredEpsilon",
    "Event",
    "Progress",
    "Sampler",
    "Statistic",
    "chunk_sizes",
    "clopper_pearson",
    "configured_epsilon",
    "epsilon_lower_bound",
    "learn_candidates",
    "sample_releases",
    "select_event",
]
