"""Balu's Gibbs sampler by definition, in plain numpy: the oracle of the compiled one.

`neighbourhood_weights` lists the transition (3.35) from a coding, by definition (the tests
check the compiled chains' law on sets against it by enumeration). `reference_chain_blip` and
`reference_chain_jlt` run one chain with every candidate's weight recomputed from scratch each
step, consuming the same uniforms as `adversary.attacks.gibbs`: the benchmark's yardstick
(`bench/mcmc.py`) and the tests' oracle.

References:
    R. Balu, PhD thesis, Univ. Rennes 1, 2016, §3.4.2, Eqs. (3.30)–(3.35).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from privrec.adversary.attacks.gibbs import ChainSpec, blip_weights
from privrec.adversary.attacks.gibbs_kernels import EMPTY, EXP_FLOOR, uniform_stream
from privrec.shared.types import FloatArray, IntArray


def neighbourhood_weights(
    slots: IntArray, i: int, log_target: dict[frozenset[int], float]
) -> dict[int, float]:
    """The transition (3.35) from coding `slots` when slot `i` is drawn, by definition.

    Every coding of 𝒱(slots, i) (3.34) is listed by the value it puts in slot i (-1: empty,
    otherwise an item not held by another slot), with probability ∝ π(set)·(c_max − |set|)!
    (the set posterior spread evenly over its codings; module docstring).

    Args:
        slots: int64 (c_max,), the current coding (-1 = empty item).
        i: the slot drawn.
        log_target: log π(S) of every reachable set S (missing sets have π = 0).

    Returns:
        slot-i value → transition probability (sums to 1).
    """
    c_max = slots.size
    others = frozenset(int(v) for k, v in enumerate(slots) if k != i and v != EMPTY)
    items = {j for s in log_target for j in s}
    options = [EMPTY, *sorted(items - others)]
    logs = []
    for v in options:
        s = others if v == EMPTY else others | {v}
        lt = log_target.get(s, -math.inf)
        logs.append(lt + math.lgamma(c_max - len(s) + 1))
    top = max(logs)
    w = np.exp(np.array(logs) - top)
    return {v: float(x) for v, x in zip(options, w / w.sum(), strict=True)}


def _reference_draw(cum: FloatArray, u: float) -> int:
    x = u * cum[-1]
    k = int(np.searchsorted(cum, x, side="right"))
    if k >= cum.size:
        k = cum.size - 1
        while k > 0 and cum[k] == cum[k - 1]:
            k -= 1
    return k


def _start(
    spec: ChainSpec, burn_in: int, samples: int
) -> tuple[IntArray, npt.NDArray[np.bool_], FloatArray, IntArray]:
    """A chain's initial coding (the initial set in the first slots), which candidates it
    holds, its 2(T + M) uniforms (slot, move per step) and zeroed occupancy counts."""
    slots = np.full(spec.c_max, EMPTY, np.int64)
    present = np.zeros(spec.candidates.size, bool)
    slots[: spec.init.size] = spec.init
    present[spec.init] = True
    uniforms = uniform_stream(spec.state, 2 * (burn_in + samples))
    return slots, present, uniforms, np.zeros(spec.candidates.size, np.int64)


def reference_chain_blip(
    spec: ChainSpec,
    codewords: tuple[IntArray, IntArray],
    sign: npt.NDArray[np.int8],
    lam: float,
    n_hashes: int,
    burn_in: int,
    samples: int,
) -> tuple[FloatArray, int]:
    """The BLIP sampler in plain numpy, one chain, every weight recomputed each step from
    per-bit counts (no inverted index); same uniforms and arithmetic as `blip_marginals`.

    Returns:
        (marginals over the candidates, number of moves).
    """
    ptr, idx = codewords
    n_c = spec.candidates.size
    lens = np.diff(ptr)
    width = int(lens.max()) if n_c else 0
    pad = np.zeros((n_c, width), np.int64)
    mask = np.arange(width)[None, :] < lens[:, None]
    pad[mask] = idx
    gain_exp, prior_exp, empty_weight = blip_weights(spec.log_prior, lam, n_hashes)
    sgn = sign.astype(np.int64)
    cnt = np.zeros(sign.size, np.int64)
    slots, present, uniforms, occ = _start(spec, burn_in, samples)
    for j in spec.init:
        cnt[idx[ptr[j] : ptr[j + 1]]] += 1
    moves = 0
    for t in range(1, burn_in + samples + 1):
        i = min(int(uniforms[2 * t - 2] * spec.c_max), spec.c_max - 1)
        a = int(slots[i])
        if a != EMPTY:
            present[a] = False
            cnt[idx[ptr[a] : ptr[a + 1]]] -= 1
        fresh = np.where(cnt == 0, sgn, 0)
        gain = np.where(mask, fresh[pad], 0).sum(axis=1)
        free = spec.c_max - int(present.sum())
        w = np.where(present, 0.0, gain_exp[gain + n_hashes] * prior_exp)
        cum = np.cumsum(np.concatenate([[empty_weight * free], w]))
        choice = _reference_draw(cum, float(uniforms[2 * t - 1])) - 1
        moves += int(choice != a)
        slots[i] = choice
        if choice != EMPTY:
            present[choice] = True
            cnt[idx[ptr[choice] : ptr[choice + 1]]] += 1
        if t > burn_in:
            occ[present] += 1
    return occ / samples, moves


def reference_chain_jlt(
    spec: ChainSpec,
    codebook_rows: FloatArray,
    release: FloatArray,
    sigma: float,
    burn_in: int,
    samples: int,
) -> tuple[FloatArray, int]:
    """The JLT sampler in plain numpy, one chain, the residual's products with every candidate
    recomputed each step (X_C r, no Gram matrix); same uniforms as `jlt_marginals`.

    Args:
        spec: the chain (candidates, prior, slots, initial set, stream).
        codebook_rows: (n_c, L), the candidates' codewords X_j.
        release: (L,), ỹ.
        sigma: the noise level the likelihood assumes (> 0).
        burn_in: T, the burn-in steps.
        samples: M, the steps counted in the marginals.

    Returns:
        (marginals over the candidates, number of moves).
    """
    norms = np.einsum("ij,ij->i", codebook_rows, codebook_rows)
    inv_two_var = 1.0 / (2.0 * sigma * sigma)
    slots, present, uniforms, occ = _start(spec, burn_in, samples)
    moves = 0
    for t in range(1, burn_in + samples + 1):
        i = min(int(uniforms[2 * t - 2] * spec.c_max), spec.c_max - 1)
        a = int(slots[i])
        if a != EMPTY:
            present[a] = False
        residual = release - codebook_rows[present].sum(axis=0)
        log_free = math.log(spec.c_max - int(present.sum()))
        lw = (2.0 * (codebook_rows @ residual) - norms) * inv_two_var + spec.log_prior
        top = max(log_free, float(lw[~present].max())) if (~present).any() else log_free
        w = np.where(present, 0.0, np.exp(np.maximum(lw - top, EXP_FLOOR)))
        cum = np.cumsum(np.concatenate([[math.exp(log_free - top)], w]))
        choice = _reference_draw(cum, float(uniforms[2 * t - 1])) - 1
        moves += int(choice != a)
        slots[i] = choice
        if choice != EMPTY:
            present[choice] = True
        if t > burn_in:
            occ[present] += 1
    return occ / samples, moves


__all__ = ["neighbourhood_weights", "reference_chain_blip", "reference_chain_jlt"]
