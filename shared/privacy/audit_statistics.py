"""The strongest distinguishing statistic of each DP mechanism, and its tight ε as configured.

A black-box audit (`shared.privacy.audit`) bounds ε from below with the frequencies of one event
under two neighbouring profiles D and D′. Its power depends on the event: by the Neyman–Pearson
lemma the most powerful events are the level sets of the likelihood ratio P[x | D′]/P[x | D],
and for the mechanisms here that ratio, computed with the mechanism's *stated* parameters, is
monotone in a linear function of a few release coordinates:

* BLIP (Balu (3.3)–(3.4)), pair ∅ vs {j}: every bit is an independent randomized response and
  only the K positions of the added item's codeword X_j differ in distribution, so the ratio is
  ((1 − p)/p)^(2S − K) with S the number of ones at those positions. T = S.
* JLT (Balu §3.2), pair ∅ vs {j}: N(0, σ²I) against N(X_j, σ²I); the ratio is
  exp(⟨y, X_j⟩/σ² − ‖X_j‖²/2σ²). T = ⟨y, X_j⟩/‖X_j‖, the projection on the codeword.
* OUE (Wang et al. 2017 §4.4): one independent bit per item, Pr[1] = p when held and q when not.
  Each bit that differs between D and D′ contributes ±ln(p(1 − q)/((1 − p)q)) to the log ratio,
  so T = Σ_{j ∈ D′∖D} b_j − Σ_{j ∈ D∖D′} b_j (b_j′ − b_j for a swap, b_j for an addition).
* The Laplace second-order baseline (Xin & Jaakkola Sec. 5), pair "element j rated r_min vs
  r_max": only x_j's law moves, by the range Δ; the Laplace log ratio (|x − a| − |x − b|)/b is
  non-decreasing in x_j, so T = x_j (sign-aligned with the shift).

Statistics are fixed before any sample is drawn (from public parameters and the pair only), so
choosing them does not bias the bound. Each also carries the law of T under D and D′ for the
mechanism *as configured* (`LinearStatistic.tail`: binomial for BLIP, normal for JLT, a small
convolution of Bernoullis for OUE, Laplace for the baseline), so the audit can tell how much an
honest implementation may leak on the very event it chose: an event E allows at most
ε_config(E) = ln((P_config[E | D′] − δ)/P_config[E | D]) ≤ ε_tight, and a measured lower bound
above it proves that the implementation does not do what its parameters say, with far fewer
samples than a bound above ε_tight itself needs (the event-level ratio of a Gaussian is small
where its mass is). A mechanism not listed here falls back to the audit's
learned statistics. `AUDIT_STATISTICS` maps a mechanism class to its builder; a new mechanism
joins with one line (``AUDIT_STATISTICS[MyMechanism] = my_builder``).

The tight ε (`tight_epsilon`): what the mechanism's public parameters, rebuilt by the registered
honest class (`make_mechanism(name, public_params())`), give through the accountant
(`shared.accounting.event_epsilon` at the claim's δ): for JLT the exact Gaussian privacy-loss
distribution of σ/Δ (Balle & Wang 2018), far below the KKMM12 claim at the defaults; for BLIP,
OUE and Laplace the claim itself. Rebuilding from the public parameters means a mechanism that
lies in `release` (its "twin") is still measured against what it says it does.

References:
    J. Neyman, E. S. Pearson, "On the problem of the most efficient tests of statistical
    hypotheses", Phil. Trans. R. Soc. A 231, 1933.
    M. Nasr, S. Song, A. Thakurta, N. Papernot, N. Carlini, "Adversary instantiation: lower
    bounds for differentially private machine learning", IEEE S&P 2021.
    B. Balle, Y.-X. Wang, "Improving the Gaussian mechanism for differential privacy",
    ICML 2018.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable, Sequence

import numpy as np
from scipy import stats

from privrec.shared.accounting import event_epsilon
from privrec.shared.errors import ConfigError
from privrec.shared.mechanisms import (
    MECHANISMS,
    Blip,
    JohnsonLindenstrauss,
    LaplaceSecondOrder,
    OptimisedUnaryEncoding,
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
from privrec.shared.types import FloatArray, IntArray


@dataclasses.dataclass(frozen=True)
class LinearStatistic:
    """T = Σ_c w_c x_c over a few coordinates c of the flattened release.

    Larger T means "more like D′" (the audit tries both tails anyway).

    Attributes:
        name: short name, e.g. "blip-codeword-ones".
        description: one line for the report, e.g. "ones among item 0's 20 positions".
        coordinates: int64 array (k,), which coordinates of the release T reads.
        weights: float64 array (k,), their weights.
    """

    name: str
    description: str
    coordinates: IntArray
    weights: FloatArray
    tail: TailModel | None = None

    def configured_probability(self, thresholds: FloatArray, upper: bool, which: int) -> FloatArray:
        """P_config[T ≥ t] (`upper`) or P_config[T < t] under D (`which` = 0) or D′ (1), for
        each threshold; NaN when the statistic has no configured law."""
        t = np.asarray(thresholds, dtype=np.float64)
        if self.tail is None:
            return np.full(t.shape, np.nan)
        ge = self.tail(t, which)
        out: FloatArray = ge if upper else 1.0 - ge
        return np.clip(out, 0.0, 1.0)

    def gather(self, payloads: Sequence[Payload]) -> FloatArray:
        """The read coordinates of each release, shape (n, k), without flattening the rest."""
        cols = self.coordinates
        if not payloads:
            return np.zeros((0, cols.size))
        first = payloads[0]
        if isinstance(first, BitPayload):
            bits = np.stack([np.asarray(p.bits)[cols] for p in payloads])  # type: ignore[union-attr]
            return bits.astype(np.float64)
        if isinstance(first, DensePayload):
            return np.stack(
                [np.asarray(p.values, dtype=np.float64)[cols] for p in payloads]  # type: ignore[union-attr]
            )
        if isinstance(first, SparsePayload):
            return np.stack([payload_vector(p)[cols] for p in payloads])
        raise TypeError(f"cannot audit payload of type {type(first).__name__}")

    def __call__(self, gathered: FloatArray) -> FloatArray:
        """T for rows of gathered coordinates (shape (n, k))."""
        out: FloatArray = gathered @ self.weights
        return out


TailModel = Callable[[FloatArray, int], FloatArray]
"""(thresholds, which) → P_config[T ≥ t] under D (which = 0) or D′ (1)."""


def _discrete_tail(values: FloatArray, pmf0: FloatArray, pmf1: FloatArray) -> TailModel:
    """P[T ≥ t] of a statistic on the finite support `values` with laws pmf0 (D), pmf1 (D′)."""

    def tail(t: FloatArray, which: int) -> FloatArray:
        pmf = pmf1 if which else pmf0
        ge = values[None, :] >= np.asarray(t, dtype=np.float64)[:, None] - 1e-12
        out: FloatArray = (ge * pmf[None, :]).sum(axis=1)
        return out

    return tail


def payload_vector(payload: Payload) -> FloatArray:
    """Flatten a release to a float vector (sparse: values then a presence indicator), the
    layout the audit's statistics read."""
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


StatisticBuilder = Callable[[Mechanism, Profile, Profile], LinearStatistic | None]
"""(mechanism, D, D′) → the statistic, or None when this pair has no closed form."""


def _items_only_in(a: Profile, b: Profile) -> IntArray:
    out: IntArray = np.setdiff1d(a.items, b.items).astype(np.int64)
    return out


def blip_statistic(mech: Mechanism, d: Profile, d_prime: Profile) -> LinearStatistic | None:
    """Ones among the positions the added item sets and D's Bloom filter does not."""
    assert isinstance(mech, Blip)
    added, removed = _items_only_in(d_prime, d), _items_only_in(d, d_prime)
    if added.size + removed.size != 1:
        return None
    sign, item, base = (1.0, added, d) if added.size else (-1.0, removed, d_prime)
    positions = np.unique(mech.hashes.positions(item)[0])
    free = positions[~mech.bloom_filter(base)[positions]]
    if free.size == 0:
        return None
    k, p = free.size, mech.p_flip
    counts = np.arange(k + 1, dtype=np.float64)
    without, with_item = stats.binom.pmf(counts, k, p), stats.binom.pmf(counts, k, 1.0 - p)
    # T = sign·S: D′ holds the item when sign = +1
    pmf0, pmf1 = (without, with_item) if sign > 0 else (with_item, without)
    return LinearStatistic(
        "blip-codeword-ones",
        f"ones among the {free.size} free positions of item {int(item[0])}'s codeword",
        free.astype(np.int64),
        np.full(free.size, sign),
        _discrete_tail(sign * counts, pmf0, pmf1),
    )


def jlt_statistic(mech: Mechanism, d: Profile, d_prime: Profile) -> LinearStatistic | None:
    """The projection of the release on the sketch difference Y_D′ − Y_D (unit length)."""
    assert isinstance(mech, JohnsonLindenstrauss)
    diff = mech.sketch(d_prime) - mech.sketch(d)
    norm = float(np.linalg.norm(diff))
    if norm == 0.0:
        return None
    changed = sorted(set(d.items.tolist()) ^ set(d_prime.items.tolist()))
    u = diff / norm
    means = (float(mech.sketch(d) @ u), float(mech.sketch(d_prime) @ u))
    sigma = mech.sigma

    def tail(t: FloatArray, which: int) -> FloatArray:
        out: FloatArray = stats.norm.sf((np.asarray(t) - means[which]) / sigma)
        return out

    return LinearStatistic(
        "jlt-codeword-projection",
        f"projection on the codeword of item(s) {changed} (norm {norm:.4g})",
        np.arange(diff.size, dtype=np.int64),
        u,
        tail if sigma > 0 else None,
    )


def oue_statistic(mech: Mechanism, d: Profile, d_prime: Profile) -> LinearStatistic | None:
    """Bits of the items held by D′ only, minus bits of the items held by D only."""
    assert isinstance(mech, OptimisedUnaryEncoding)
    added, removed = _items_only_in(d_prime, d), _items_only_in(d, d_prime)
    cols = np.concatenate([added, removed]).astype(np.int64)
    if cols.size == 0:
        return None
    weights = np.concatenate([np.ones(added.size), -np.ones(removed.size)])
    pmfs = []
    for prof in (d, d_prime):
        held = np.isin(cols, prof.items)
        pmf = np.array([1.0])  # T + removed.size over 0..cols.size, by convolution
        for w, h in zip(weights, held, strict=True):
            one = mech.p if h else mech.q
            step = np.array([1.0 - one, one]) if w > 0 else np.array([one, 1.0 - one])
            pmf = np.convolve(pmf, step)
        pmfs.append(pmf)
    support = np.arange(cols.size + 1, dtype=np.float64) - removed.size
    return LinearStatistic(
        "oue-differing-bits",
        f"bits of item(s) {added.tolist()} minus bits of item(s) {removed.tolist()}",
        cols,
        weights,
        _discrete_tail(support, pmfs[0], pmfs[1]),
    )


def laplace_statistic(mech: Mechanism, d: Profile, d_prime: Profile) -> LinearStatistic | None:
    """The one element whose clipped completion differs, sign-aligned with the shift."""
    assert isinstance(mech, LaplaceSecondOrder)
    lo, hi = mech.rating_min, mech.rating_max
    diff = np.clip(mech.complete(d_prime), lo, hi) - np.clip(mech.complete(d), lo, hi)
    moved = np.flatnonzero(diff)
    if moved.size != 1:
        return None
    j = int(moved[0])
    sign = math.copysign(1.0, float(diff[j]))
    centres = tuple(sign * float(np.clip(mech.complete(prof), lo, hi)[j]) for prof in (d, d_prime))
    scale = mech.scale

    def tail(t: FloatArray, which: int) -> FloatArray:
        out: FloatArray = stats.laplace.sf(np.asarray(t), loc=centres[which], scale=scale)
        return out

    return LinearStatistic(
        "laplace-element",
        f"element {j} of the release (shift {diff[j]:+.4g})",
        np.array([j], dtype=np.int64),
        np.array([sign]),
        tail,
    )


AUDIT_STATISTICS: dict[type[Mechanism], StatisticBuilder] = {
    Blip: blip_statistic,
    JohnsonLindenstrauss: jlt_statistic,
    OptimisedUnaryEncoding: oue_statistic,
    LaplaceSecondOrder: laplace_statistic,
}
"""Mechanism class → the builder of its likelihood-ratio statistic (subclasses inherit it)."""


def strongest_statistic(
    mechanism: Mechanism, d: Profile, d_prime: Profile
) -> LinearStatistic | None:
    """The likelihood-ratio statistic of the pair (D, D′) under the mechanism's stated
    parameters (module docstring), or None when the mechanism has none here."""
    for cls in type(mechanism).__mro__:
        builder = AUDIT_STATISTICS.get(cls)
        if builder is not None:
            return builder(mechanism, d, d_prime)
    return None


def configured(mechanism: Mechanism) -> Mechanism:
    """The honest mechanism its public parameters describe: the registered class of its name,
    built from `public_params()` (and bound like it, for a second-order mechanism); the
    mechanism itself when its name is not registered (a test toy)."""
    if mechanism.name not in MECHANISMS:
        return mechanism
    try:
        honest = make_mechanism(mechanism.name, mechanism.public_params())
    except ConfigError:
        return mechanism
    for attr in ("mu", "V", "shared_h"):  # a bound second-order mechanism's public model
        if getattr(mechanism, attr, None) is not None and hasattr(honest, attr):
            setattr(honest, attr, copy.deepcopy(getattr(mechanism, attr)))
    return honest


def tight_epsilon(mechanism: Mechanism, delta: float, n_items: int | None = None) -> float:
    """ε at `delta` of one release of the mechanism as its public parameters configure it
    (module docstring); for a JLT without `n_items`, the codebook of `n_items` rows.

    Raises:
        ValueError: the accountant cannot evaluate the mechanism's event.
    """
    honest = configured(mechanism)
    if isinstance(honest, JohnsonLindenstrauss) and honest.n_items is None:
        honest = copy.copy(honest)
        honest.n_items = n_items if n_items is not None else 100
    return float(event_epsilon(honest.event(), delta))


__all__ = [
    "AUDIT_STATISTICS",
    "LinearStatistic",
    "StatisticBuilder",
    "TailModel",
    "blip_statistic",
    "configured",
    "jlt_statistic",
    "laplace_statistic",
    "oue_statistic",
    "payload_vector",
    "strongest_statistic",
    "tight_epsilon",
]
