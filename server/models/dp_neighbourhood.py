"""Shared pieces of the differentially private neighbourhood models (Zhu's PNCF, Wang & Tang).

* **Exponential-mechanism selection without replacement** (`select_without_replacement`):
  k sequential draws, each with probability ∝ exp(log-weight) among the candidates not yet
  drawn (Zhu Algorithm 2, steps 3–9). Implemented with the Gumbel-top-k identity: adding an
  independent standard Gumbel variable to every log-weight and keeping the k largest gives
  exactly the distribution of k sequential draws without replacement (Yellott 1977; Vieira
  2014; Kool, van Hoof & Welling 2019, Thm 1), which vectorises over many targets at once.
* **Truncated scores** (`truncated_scores`, Zhu Eq 3.3.8 and Thm 3.4.1): ŝ = max(s, s_k − w),
  the candidates below s_k − w forming C₀.
* **Pure-DP events for the ledger** (`pure_dp_event`): a generic ε-DP mechanism (an exponential
  mechanism, a posterior sample) is recorded as binary randomized response with the same ε,
  which dominates every ε-DP mechanism (Kairouz, Oh & Viswanath 2015, Thm 3.4), so composing
  those events over-states nothing. Laplace noise of known scale is recorded as a Laplace event.
* **Per-answer randomness** (`answer_rng`): a DP answer draws its noise from a stream keyed by
  the model's seed, the fold, the query's content and the target item. The same question gets
  the same answer (a repeated query reveals nothing new, so averaging repeats does not remove the
  noise), and a block answers each query as it would alone.
* **Differentially private item means** (`dp_item_means`), for models whose predictor is
  centred on r̄_i (Wang & Tang Eq (2)) — the papers publish them for free; we do not.

References:
    Zhu, T., PhD thesis, Deakin University, 2014, §3.3–3.4.
    Wang, J., Tang, Q. "Differentially Private Neighborhood-based Recommender Systems",
    IFIP SEC 2017.
    Kool, W., van Hoof, H., Welling, M. "Stochastic Beams and Where to Find Them: The
    Gumbel-Top-k Trick", ICML 2019.
    Kairouz, P., Oh, S., Viswanath, P. "The Composition Theorem for Differential Privacy",
    ICML 2015.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math

import numpy as np
import scipy.sparse as sp

from privrec.shared.accounting import dp
from privrec.shared.seeding import rng_for
from privrec.shared.types import BoolArray, FloatArray, IntArray

MAX_RECORDED_EPSILON = 700.0
"""Above this ε (nats) randomized response's noise probability 2/(e^ε + 1) underflows; such a
release is recorded as non-private (it is, for any practical purpose)."""


# ---------------------------------------------------------------------- ledger events
def pure_dp_event(epsilon: float) -> dp.DpEvent:
    """The ledger event of a generic ε-DP mechanism: binary randomized response with the same ε
    (the worst ε-DP mechanism under composition; module docstring).

    Raises:
        ValueError: `epsilon` is not > 0.
    """
    if not epsilon > 0:
        raise ValueError(f"`epsilon` must be > 0, got {epsilon!r}")
    if epsilon > MAX_RECORDED_EPSILON:
        return dp.NonPrivateDpEvent()
    # P(true bucket) = 1 − p/2 = e^ε/(e^ε + 1) with p = 2/(e^ε + 1): likelihood ratio e^ε.
    return dp.RandomizedResponseDpEvent(
        noise_parameter=2.0 / (math.exp(epsilon) + 1.0), num_buckets=2
    )


def amplified_epsilon(epsilon: float, sampling_rate: float) -> float:
    """ε of an ε-DP step run on a uniform subsample of rate γ: ln(1 + γ(e^ε − 1)) (Balle,
    Barthe & Gaboardi 2018, Thm 9; exact where Wang & Tang's Theorem 1 uses the linear γε)."""
    if sampling_rate >= 1.0:
        return epsilon
    return math.log1p(sampling_rate * math.expm1(epsilon))


# ---------------------------------------------------------------------- randomness
def query_digest(query_indices: IntArray, query_values: FloatArray) -> str:
    """A stable hex digest of a query's content (items and values, as float64/int64 bytes)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(np.ascontiguousarray(query_indices, dtype=np.int64).tobytes())
    h.update(np.ascontiguousarray(query_values, dtype=np.float64).tobytes())
    return h.hexdigest()


def answer_rng(random_state: int, model: str, *key: object) -> np.random.Generator:
    """The noise stream of one DP answer (module docstring), e.g. key = (fold, digest, item)."""
    return rng_for(random_state, model, "answer", *key)


# ---------------------------------------------------------------------- segments
def segment_starts(seg: IntArray, n_segments: int) -> IntArray:
    """Start offset of each segment in a sorted segment-id array (length n_segments + 1)."""
    return np.searchsorted(seg, np.arange(n_segments + 1), side="left")


def rank_in_segment(seg: IntArray, key: FloatArray, tie: IntArray) -> IntArray:
    """The rank (0 = largest `key`, ties to the smaller `tie`) of every entry within its
    segment; `seg` need not be sorted."""
    order = np.lexsort((tie, -key, seg))
    seg_sorted = seg[order]
    ranks_sorted = np.arange(order.size) - np.searchsorted(seg_sorted, seg_sorted, side="left")
    ranks = np.empty(order.size, dtype=np.int64)
    ranks[order] = ranks_sorted
    return ranks


def top_k_in_segments(seg: IntArray, key: FloatArray, tie: IntArray, k: int) -> BoolArray:
    """Mask of the k largest `key` of every segment (ties to the smaller `tie`)."""
    return rank_in_segment(seg, key, tie) < k


def select_without_replacement(
    seg: IntArray, log_weights: FloatArray, gumbel: FloatArray, tie: IntArray, k: int
) -> BoolArray:
    """k draws without replacement per segment, each ∝ exp(log-weight) among those left (Zhu
    Algorithm 2): the k largest log_weight + Gumbel (module docstring). A segment with at most
    k candidates is selected whole.

    Args:
        seg: int array (n,), each candidate's segment (target).
        log_weights: float array (n,), e.g. ε·ŝ/(4k·RS).
        gumbel: float array (n,), independent standard Gumbel draws.
        tie: int array (n,), tie-break (never matters with continuous noise).
        k: draws per segment.
    """
    return top_k_in_segments(seg, log_weights + gumbel, tie, k)


def kth_largest(seg: IntArray, score: FloatArray, tie: IntArray, k: int, n_seg: int) -> FloatArray:
    """s_k of every segment: its k-th largest score, or its smallest when it has fewer than k
    candidates (then every candidate is a neighbour anyway); 0 for an empty segment."""
    ranks = rank_in_segment(seg, score, tie)
    sizes = np.bincount(seg, minlength=n_seg)
    want = np.minimum(sizes, k) - 1
    out = np.zeros(n_seg)
    hit = ranks == want[seg]
    out[seg[hit]] = score[hit]
    return out


@dataclasses.dataclass(frozen=True)
class Truncation:
    """Zhu Eq 3.3.8 on a batch of segments.

    Attributes:
        scores: ŝ = max(s, s_k − w) per candidate.
        in_c0: candidates with s < s_k − w (the block C₀).
        floor: s_k − w per segment.
        width: w per segment.
    """

    scores: FloatArray
    in_c0: BoolArray
    floor: FloatArray
    width: FloatArray


def truncation_width(
    s_k: FloatArray, sensitivity: FloatArray, n_candidates: IntArray, k: int, eps: float, rho: float
) -> FloatArray:
    """w = min(s_k, (4k·RS/ε)·ln(k(|v| − k)/ρ)) (Zhu Eq 3.4.2/3.4.4), per segment.

    RS is the segment's largest sensitivity (the theorem's "maximal RS between t_i and other
    items") and |v| its number of candidates. With |v| ≤ k every candidate is selected and no
    truncation is needed (w = 0). The theorem's term is floored at 0 (a logarithm of a number
    below 1 would make it negative); the min with s_k is the thesis's, as printed.
    """
    v = n_candidates.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        arg = np.where(v > k, k * (v - k) / rho, 1.0)
        theory = np.maximum(4.0 * k * sensitivity / eps * np.log(arg), 0.0)
    return np.where(v > k, np.minimum(s_k, theory), 0.0)


def truncated_scores(
    seg: IntArray, score: FloatArray, s_k: FloatArray, width: FloatArray
) -> Truncation:
    """ŝ = max(s, s_k − w) and the partition C₁/C₀ (Zhu Eq 3.3.8, Algorithm 2 step 2)."""
    floor = s_k - width
    in_c0 = score < floor[seg]
    return Truncation(np.where(in_c0, floor[seg], score), in_c0, floor, width)


# ---------------------------------------------------------------------- DP item means
@dataclasses.dataclass(frozen=True)
class NoisyMeans:
    """Differentially private item means (see `dp_item_means`).

    Attributes:
        item_means: float array (m,), the shrunk noisy means r̄_i.
        global_mean: the noisy global mean µ they shrink toward.
        epsilon: the ε spent.
        scale: the Laplace scale used on the item sums.
    """

    item_means: FloatArray
    global_mean: float
    epsilon: float
    scale: float


PRIOR_BETWEEN_VAR = 0.25
"""Prior variance of item means around the global mean (a data-independent constant: spread
0.5 of a 1–5 scale); used only to shrink noisy means (post-processing)."""
PRIOR_WITHIN_VAR = 1.0
"""Prior variance of one rating around its item mean (data-independent constant)."""


def dp_item_means(
    train: sp.csr_matrix,
    epsilon: float,
    rating_scale: tuple[float, float],
    rng: np.random.Generator,
    *,
    user_level_cap: int | None = None,
) -> NoisyMeans:
    """Item means released with the Laplace mechanism, then shrunk toward the global mean.

    Ratings are centred at the scale's midpoint c (values in [−φ/2, φ/2], φ = r_max − r_min).

    * Rating level (`user_level_cap` None; neighbouring = one rating's value changed, the
      relation of Wang & Tang's DPSGD and of Berlioz et al.): the counts n_i do not change
      and are public; the vector of item sums has L1 sensitivity φ, so sums + Lap(φ/ε).
    * User level (`user_level_cap` = τ; one user's ≤ τ ratings replaced, DPPS): the sums change
      by ≤ 2τ·φ/2 and the counts by ≤ 2τ in L1, so sums and counts both get Laplace noise of
      scale Δ/ε with their joint L1 sensitivity Δ = 2τ(φ/2 + 1).

    The global mean µ is Σ noisy sums / Σ noisy counts (post-processing, no extra cost). Each
    item mean is µ + w_i(x̄_i − µ) with w_i = τ²/(τ² + σ²/n_i + var_noise/n_i²) (empirical-Bayes
    shrinkage with the data-independent priors `PRIOR_BETWEEN_VAR`, `PRIOR_WITHIN_VAR`), so an
    item with few ratings falls back to µ instead of to noise.

    Args:
        train: CSR (n_users, m) of ratings on `rating_scale`.
        epsilon: the ε this release spends (> 0).
        rating_scale: (r_min, r_max).
        rng: the noise stream.
        user_level_cap: τ for user-level privacy, or None for rating level.
    """
    if not epsilon > 0:
        raise ValueError(f"`epsilon` for the item means must be > 0, got {epsilon!r}")
    lo, hi = rating_scale
    centre, phi = (lo + hi) / 2.0, hi - lo
    m = train.shape[1]
    counts = np.bincount(train.indices, minlength=m).astype(np.float64)
    sums = np.bincount(train.indices, weights=train.data - centre, minlength=m)
    if user_level_cap is None:
        scale = phi / epsilon
        noisy_sums = sums + rng.laplace(0.0, scale, m)
        noisy_counts = counts
    else:
        scale = 2.0 * user_level_cap * (phi / 2.0 + 1.0) / epsilon
        noisy_sums = sums + rng.laplace(0.0, scale, m)
        noisy_counts = np.maximum(counts + rng.laplace(0.0, scale, m), 0.0)
    total = float(noisy_counts.sum())
    mu = centre + (float(noisy_sums.sum()) / total if total > 1.0 else 0.0)
    mu = float(np.clip(mu, lo, hi))
    n = np.maximum(noisy_counts, 1.0)
    raw = centre + noisy_sums / n
    noise_var = 2.0 * scale**2
    w = PRIOR_BETWEEN_VAR / (PRIOR_BETWEEN_VAR + PRIOR_WITHIN_VAR / n + noise_var / n**2)
    w = np.where(noisy_counts > 0.0, w, 0.0)
    means = np.clip(mu + w * (raw - mu), lo, hi)
    return NoisyMeans(means, mu, float(epsilon), float(scale))


__all__ = [
    "MAX_RECORDED_EPSILON",
    "NoisyMeans",
    "Truncation",
    "amplified_epsilon",
    "answer_rng",
    "dp_item_means",
    "kth_largest",
    "pure_dp_event",
    "query_digest",
    "rank_in_segment",
    "segment_starts",
    "select_without_replacement",
    "top_k_in_segments",
    "truncated_scores",
    "truncation_width",
]
