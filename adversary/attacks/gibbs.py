r"""Balu's multi-stage Gibbs sampler over item sets (§3.4.2), compiled with numba.

The joint decoder samples profiles from the posterior P[P | release] ∝ P[release | P]·P[P]
(Balu (3.30)) with a random-scan multi-stage Gibbs sampler [RC04, Alg. A.42]:

* **Slot coding** (Balu §3.4.2, "Algorithmic coding of a profile"): a state is a vector of
  c_max slots holding a candidate item or the empty item; non-empty slots hold distinct items.
  Here a candidate is an index into the user's prefiltered candidate list, and -1 is empty.
* **Neighbourhood** (3.34): 𝒱(P₀, i) is every coding that differs from P₀ at most in slot i.
  After taking slot i's item a out of the set (S₋ = P₀ \ {a}, |S₋| = s), the moves are: slot i
  empty, or slot i = any candidate j ∉ S₋. That list holds "stay" (j = a, or empty when slot i
  was empty), "remove" (empty) and "substitute" (j ≠ a); it never holds a duplicate.
* **Transition** (3.35): draw i uniformly in [c_max], then the next state with probability
  w(P)/Σ_{P′∈𝒱} w(P′) over that neighbourhood; w = likelihood × prior.
* **Marginals** (3.33): after T burn-in steps, P̂[j ∈ P | release] = |{t ∈ [T+1, T+M] : j ∈ P⁽ᵗ⁾}|/M,
  where one step is one slot update (the literal reading of (3.35); Balu leaves it open).

**Prior over sets, and the coding correction (our choice; Balu does not say).** A set of size s
has c_max!/(c_max − s)! codings, so a prior flat over codings favours larger sets. We target the
posterior over SETS: the coding of a set S gets weight π(S)·(c_max − |S|)!/c_max!. Relative to
"slot i empty", adding candidate j then weighs

    w_j = L(S₋ ∪ {j}) / L(S₋) · exp(β_j) / (c_max − s),

with β_j the prior log-odds of item j (independent inclusions, `itemset_prior`). The chain's
stationary law on sets is then exactly ∝ L(S)·Π_{j∈S} e^{β_j} on {S ⊆ candidates, |S| ≤ c_max}
(`tests/unit/adversary/test_gibbs.py` checks this by enumeration).

**BLIP likelihood** (3.31): P[b̃ | P] = p^{ω(B_P ⊕ b̃)}(1 − p)^{L − ω(B_P ⊕ b̃)}, so
log L(P) = const + λ·Σ_{ℓ : B_P(ℓ) = 1} s_ℓ with λ = ln((1 − p)/p) and s_ℓ = +1 if b̃(ℓ) = 1 else
−1. B_P is the OR of the codewords, kept as per-bit reference counts: removing an item clears a
bit only when no other item of the set still sets it. Adding j multiplies L by e^{λ g_j} with
g_j = Σ_{ℓ∈X_j, cnt(ℓ)=0} s_ℓ, the "gain" of the bits j would newly set; the gains of all
candidates are kept up to date incrementally through an inverted index bit → candidates, so a
step costs O(n_candidates) (the sampling sweep) plus O(K · bit coverage) (the bookkeeping).

**JLT likelihood** (end of §3.4.2): P[ỹ | P] ∝ exp(−‖ỹ − Σ_{j∈P} X_j‖²/(2σ²)). With the residual
r = ỹ − Σ_{j∈S₋} X_j, adding j multiplies L by exp((2 r·X_j − ‖X_j‖²)/(2σ²)). The products
u_j = r·X_j of every candidate are kept up to date with the public codebook's Gram matrix
(u_j −= G_{bj} when b joins, += when it leaves), so a step is O(n_candidates).

**Randomness.** Each chain owns a xoshiro256** stream seeded from a `SeedSequence` (the caller
derives it from the attack's seed, the run and the user), and draws exactly two uniforms per
step (slot, move). Chains are independent, so running them in parallel threads (`prange`) gives
the same numbers as one at a time: the live adversary and `privrec replay` agree bit for bit.

The loops are compiled in `adversary.attacks.gibbs_kernels`. `reference_chain_blip` and
`reference_chain_jlt` (`adversary.attacks.gibbs_reference`) are plain-numpy single-chain
versions of the same sampler (they recompute every candidate's weight from scratch each step
and consume the same uniforms): the benchmark's yardstick (`bench/mcmc.py`) and the tests'
oracle.

References:
    R. Balu, PhD thesis, Univ. Rennes 1, 2016, §3.4.2, Eqs. (3.30)–(3.35).
    C. Robert, G. Casella, "Monte Carlo Statistical Methods", 2004, Alg. A.42, §10.2.1.
    D. Blackman, S. Vigna, "Scrambled linear pseudorandom number generators", 2021 (xoshiro).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from privrec.adversary.attacks.gibbs_kernels import (
    UInt64Array,
    blip_chains,
    chain_state,
    jlt_chains,
)
from privrec.shared.types import FloatArray, IntArray


@dataclasses.dataclass(frozen=True)
class ChainSpec:
    """One user's chain: her candidates, prior, slots, initial set and stream.

    Attributes:
        candidates: int64 (n_c,), global item ids of the prefiltered candidates.
        log_prior: float64 (n_c,), prior log-odds β_j of each candidate.
        c_max: number of slots (1 ≤ c_max ≤ n_c).
        init: int64, candidate indices (into `candidates`) of the initial set, distinct, at
            most c_max of them.
        state: uint64 (4,), the chain's xoshiro state (`chain_state`).
    """

    candidates: IntArray
    log_prior: FloatArray
    c_max: int
    init: IntArray
    state: UInt64Array


@dataclasses.dataclass(frozen=True)
class ChainResult:
    """Marginals (3.33) over each user's candidates and the chain's move rate."""

    marginals: list[FloatArray]
    move_rate: FloatArray


def _check_specs(specs: list[ChainSpec], burn_in: int, samples: int) -> None:
    if burn_in < 0 or samples < 1:
        raise ValueError(f"need burn_in >= 0 and samples >= 1, got {burn_in}, {samples}")
    for k, s in enumerate(specs):
        n_c = s.candidates.size
        if not 1 <= s.c_max <= max(n_c, 1) or s.init.size > s.c_max:
            raise ValueError(
                f"chain {k}: c_max = {s.c_max} with {n_c} candidates and init of {s.init.size}"
            )
        if s.init.size and (np.unique(s.init).size != s.init.size or s.init.max() >= n_c):
            raise ValueError(f"chain {k}: init must hold distinct candidate indices")


def _flat_int(parts: Sequence[npt.NDArray[np.integer[Any]]]) -> IntArray:
    out: IntArray = np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)
    return out


def _flat_float(parts: Sequence[npt.NDArray[np.floating[Any]]]) -> FloatArray:
    out: FloatArray = np.concatenate(parts).astype(np.float64) if parts else np.zeros(0)
    return out


def _ptr(sizes: list[int]) -> IntArray:
    return np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int64)


def _chain_tail(
    specs: list[ChainSpec], burn_in: int, samples: int
) -> tuple[tuple[Any, ...], IntArray, IntArray]:
    """The arguments every compiled chain takes last (slots, initial sets, T, M, streams, then
    the occupancy and move counters it fills), and those two counters."""
    occ = np.zeros(sum(s.candidates.size for s in specs), np.int64)
    moves = np.zeros(len(specs), np.int64)
    tail = (
        np.array([s.c_max for s in specs], np.int64),
        _ptr([s.init.size for s in specs]),
        _flat_int([s.init for s in specs]),
        int(burn_in),
        int(samples),
        np.stack([s.state for s in specs]).astype(np.uint64),
        occ,
        moves,
    )
    return tail, occ, moves


def _result(
    cand_ptr: IntArray, occ: IntArray, moves: IntArray, burn_in: int, samples: int
) -> ChainResult:
    """The marginals (3.33) from the occupancy counts, and each chain's move rate."""
    return ChainResult(
        [occ[cand_ptr[u] : cand_ptr[u + 1]] / samples for u in range(moves.size)],
        moves / (burn_in + samples),
    )


def blip_weights(
    log_prior: FloatArray, lam: float, n_hashes: int
) -> tuple[FloatArray, FloatArray, float]:
    """One BLIP chain's weight factors, scaled by the largest prior so none overflows.

    Returns:
        (e^{λg} for every gain g − K of [−2K, 0], e^{β_j − max β}, the empty move's weight
        e^{−(λK + max β)}): a candidate's weight is their product (module docstring).
    """
    top = float(log_prior.max()) if log_prior.size else 0.0
    grid = np.arange(-n_hashes, n_hashes + 1) - n_hashes
    return np.exp(lam * grid), np.exp(log_prior - top), math.exp(-(lam * n_hashes + top))


def blip_marginals(
    specs: list[ChainSpec],
    codewords: list[tuple[IntArray, IntArray]],
    signs: npt.NDArray[np.int8],
    lam: float,
    n_hashes: int,
    burn_in: int,
    samples: int,
) -> ChainResult:
    """Run one BLIP chain per spec (in parallel threads) and return the marginals (3.33).

    Args:
        specs: one `ChainSpec` per user.
        codewords: per user, the distinct codeword positions X_j of each of her candidates
            as a CSR pair (ptr of shape (n_c + 1,), idx).
        signs: int8 (n_users, L), s_ℓ = ±1 from each user's release.
        lam: λ = ln((1 − p)/p) ≥ 0.
        n_hashes: K (gains lie in [−K, K]).
        burn_in: T, the burn-in steps.
        samples: M, the steps counted in the marginals.
    """
    _check_specs(specs, burn_in, samples)
    n = len(specs)
    if n == 0:
        return ChainResult([], np.zeros(0))
    sizes = [s.candidates.size for s in specs]
    cand_ptr = _ptr(sizes)
    if len(codewords) != n or any(
        p.size != s.candidates.size + 1 for (p, _), s in zip(codewords, specs, strict=True)
    ):
        raise ValueError("`codewords` must hold one CSR (n_c + 1 pointers) per chain")
    offsets = np.cumsum([0] + [idx.size for _, idx in codewords])
    pos_ptr = _flat_int([p + o for (p, _), o in zip(codewords, offsets[:-1], strict=True)])
    pos_idx = _flat_int([idx for _, idx in codewords])
    gain_exp = np.empty((n, 2 * n_hashes + 1))
    prior_exp, empty_weight = [], np.empty(n)
    for u, s in enumerate(specs):
        gain_exp[u], prior, empty_weight[u] = blip_weights(s.log_prior, lam, n_hashes)
        prior_exp.append(prior)
    tail, occ, moves = _chain_tail(specs, burn_in, samples)
    blip_chains(
        cand_ptr,
        pos_ptr,
        pos_idx,
        np.ascontiguousarray(signs, dtype=np.int8),
        gain_exp,
        _flat_float(prior_exp),
        empty_weight,
        float(lam),
        _flat_float([s.log_prior for s in specs]),
        int(n_hashes),
        *tail,
    )
    return _result(cand_ptr, occ, moves, burn_in, samples)


def jlt_marginals(
    specs: list[ChainSpec],
    gram: FloatArray,
    projections: list[FloatArray],
    sigma: float,
    burn_in: int,
    samples: int,
) -> ChainResult:
    """Run one JLT chain per spec (in parallel threads) and return the marginals (3.33).

    Args:
        specs: one `ChainSpec` per user.
        gram: (N, N) Gram matrix X Xᵀ of the public codebook.
        projections: per user, ỹ·X_j of each of her candidates (n_c,).
        sigma: the noise level the likelihood assumes (> 0).
        burn_in: T, the burn-in steps.
        samples: M, the steps counted in the marginals.
    """
    _check_specs(specs, burn_in, samples)
    if not sigma > 0:
        raise ValueError(f"`sigma` must be > 0, got {sigma!r}")
    n = len(specs)
    if n == 0:
        return ChainResult([], np.zeros(0))
    cand_ptr = _ptr([s.candidates.size for s in specs])
    tail, occ, moves = _chain_tail(specs, burn_in, samples)
    jlt_chains(
        np.ascontiguousarray(gram, dtype=np.float64),
        cand_ptr,
        _flat_int([s.candidates for s in specs]),
        _flat_float(projections),
        1.0 / (2.0 * sigma * sigma),
        _flat_float([s.log_prior for s in specs]),
        *tail,
    )
    return _result(cand_ptr, occ, moves, burn_in, samples)


__all__ = [
    "ChainResult",
    "ChainSpec",
    "blip_marginals",
    "blip_weights",
    "chain_state",
    "jlt_marginals",
]
