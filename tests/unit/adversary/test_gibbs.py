"""The Gibbs sampler of Balu's joint decoder (adversary.attacks.gibbs).

Tiny cases are enumerated exactly: every set S of ≤ c_max candidates gets its posterior weight
(BLIP (3.31) with B_S the OR of the codewords, or the JLT Gaussian likelihood, times the prior
Π e^{β_j}), and the sampler's marginals (3.33) must match the exact ones; the transition (3.35)
built from `neighbourhood_weights` must leave the posterior (spread evenly over each set's
codings) invariant. The compiled chains must equal the plain-numpy reference step for step.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from privrec.adversary.attacks.gibbs import ChainSpec, blip_marginals, chain_state, jlt_marginals
from privrec.adversary.attacks.gibbs_kernels import EXP_FLOOR, fast_exp, uniform_stream
from privrec.adversary.attacks.gibbs_reference import (
    neighbourhood_weights,
    reference_chain_blip,
    reference_chain_jlt,
)

# ------------------------------------------------------------------ a tiny BLIP world
# 4 candidates over L = 8 bits; items 0 and 1 share bit 1, items 2 and 3 share bit 4, so
# removing one of a pair must leave the shared bit set (per-bit reference counts).
CODEWORDS = [np.array([0, 1]), np.array([1, 2]), np.array([3, 4]), np.array([4, 5, 6])]
RELEASE = np.array([1, 1, 0, 1, 1, 0, 1, 0], dtype=bool)
SIGN = np.where(RELEASE, 1, -1).astype(np.int8)
LAM = 0.9  # λ = ε/K
BETA = np.array([0.3, -0.4, 0.1, -0.2])
C_MAX = 3
K = 3  # the largest codeword; gains lie in [−K, K]


def _csr(words: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    ptr = np.concatenate([[0], np.cumsum([w.size for w in words])]).astype(np.int64)
    return ptr, np.concatenate(words).astype(np.int64)


def _sets(n: int, c_max: int) -> list[frozenset[int]]:
    return [frozenset(c) for s in range(c_max + 1) for c in itertools.combinations(range(n), s)]


def blip_log_target(or_bits: bool = True) -> dict[frozenset[int], float]:
    """log π(S) = λ Σ_{ℓ∈B_S} s_ℓ + Σ_{j∈S} β_j, B_S the OR of the codewords (or, for the
    broken variant, every item's bits counted on their own, as a sum would)."""
    out = {}
    for s in _sets(len(CODEWORDS), C_MAX):
        if or_bits:
            bits = set().union(*(set(CODEWORDS[j].tolist()) for j in s)) if s else set()
            ll = LAM * sum(int(SIGN[b]) for b in bits)
        else:
            ll = LAM * sum(int(SIGN[b]) for j in s for b in CODEWORDS[j])
        out[s] = ll + sum(BETA[j] for j in s)
    return out


def exact_marginals(log_target: dict[frozenset[int], float], n: int) -> np.ndarray:
    sets = list(log_target)
    lt = np.array([log_target[s] for s in sets])
    w = np.exp(lt - lt.max())
    w /= w.sum()
    return np.array([sum(wi for s, wi in zip(sets, w, strict=True) if j in s) for j in range(n)])


def _spec(seed: int, n: int = 4, c_max: int = C_MAX, beta: np.ndarray = BETA) -> ChainSpec:
    return ChainSpec(
        candidates=np.arange(n, dtype=np.int64),
        log_prior=beta,
        c_max=c_max,
        init=np.array([0, 2], dtype=np.int64),
        state=chain_state(np.random.SeedSequence(seed)),
    )


# ------------------------------------------------------------------ the transition, by definition
def _codings(n: int, c_max: int) -> list[tuple[int, ...]]:
    out = []
    for values in itertools.product(range(-1, n), repeat=c_max):
        items = [v for v in values if v >= 0]
        if len(items) == len(set(items)):
            out.append(values)
    return out


def _transition_matrix(
    log_target: dict[frozenset[int], float], n: int, corrected: bool = True
) -> tuple[list[tuple[int, ...]], np.ndarray]:
    codings = _codings(n, C_MAX)
    index = {c: k for k, c in enumerate(codings)}
    p = np.zeros((len(codings), len(codings)))
    for c in codings:
        for i in range(C_MAX):
            if corrected:
                moves = neighbourhood_weights(np.array(c), i, log_target)
            else:  # the careless version: π(set) per coding, no correction
                flat = {s: v - math.lgamma(C_MAX - len(s) + 1) for s, v in log_target.items()}
                moves = neighbourhood_weights(np.array(c), i, flat)
            for v, prob in moves.items():
                nxt = list(c)
                nxt[i] = v
                p[index[c], index[tuple(nxt)]] += prob / C_MAX
    return codings, p


def test_neighbourhood_is_stay_remove_substitute_without_duplicates() -> None:
    """From (2, 0, −1) with slot 0 drawn: empty (remove), 2 (stay), 1 and 3 (substitute), never
    0 (held by slot 1); with slot 2 drawn: empty (stay) or add 1, 3. Each sums to 1."""
    lt = blip_log_target()
    moves = neighbourhood_weights(np.array([2, 0, -1]), 0, lt)
    assert set(moves) == {-1, 1, 2, 3}
    assert sum(moves.values()) == pytest.approx(1.0)
    moves = neighbourhood_weights(np.array([2, 0, -1]), 2, lt)
    assert set(moves) == {-1, 1, 3}
    assert sum(moves.values()) == pytest.approx(1.0)


def test_transition_leaves_the_set_posterior_invariant() -> None:
    """π P = π for π(coding) ∝ π(set)·(c_max − |set|)! (the set posterior spread evenly over
    its codings), and every row of P sums to 1; without the coding correction it does not."""
    lt = blip_log_target()
    codings, p = _transition_matrix(lt, 4)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)
    sets = [frozenset(v for v in c if v >= 0) for c in codings]
    pi = np.array([math.exp(lt[s]) * math.factorial(C_MAX - len(s)) for s in sets])
    pi /= pi.sum()
    np.testing.assert_allclose(pi @ p, pi, atol=1e-12)
    # the set law of that stationary π is the target itself
    set_law = {s: 0.0 for s in lt}
    for s, w in zip(sets, pi, strict=True):
        set_law[s] += w
    exact = {s: math.exp(v) for s, v in lt.items()}
    z = sum(exact.values())
    for s in lt:
        assert set_law[s] == pytest.approx(exact[s] / z, abs=1e-12)
    _, broken = _transition_matrix(lt, 4, corrected=False)
    assert np.abs(pi @ broken - pi).max() > 1e-3


# ------------------------------------------------------------------ the compiled chains
def test_blip_kernel_equals_numpy_reference_step_for_step() -> None:
    """Same uniforms, same arithmetic: identical marginals and move counts."""
    spec = _spec(11)
    res = blip_marginals([spec], [_csr(CODEWORDS)], SIGN[None, :], LAM, K, 50, 3000)
    ref, moves = reference_chain_blip(spec, _csr(CODEWORDS), SIGN, LAM, K, 50, 3000)
    np.testing.assert_array_equal(res.marginals[0], ref)
    assert res.move_rate[0] == moves / 3050


def test_blip_marginals_match_the_enumerated_posterior() -> None:
    """Twenty independent chains of 40,000 steps: the mean marginal of every item is within
    5 standard errors (the spread over chains) + 0.003 of the exact one (normal false-failure
    rate < 10⁻⁵ for the four items); the OR-free 'sum' model is rejected by the same test."""
    exact = exact_marginals(blip_log_target(), 4)
    wrong = exact_marginals(blip_log_target(or_bits=False), 4)
    specs = [_spec(100 + k) for k in range(20)]
    res = blip_marginals(specs, [_csr(CODEWORDS)] * 20, np.tile(SIGN, (20, 1)), LAM, K, 500, 40000)
    m = np.stack(res.marginals)
    mean, se = m.mean(axis=0), m.std(axis=0, ddof=1) / np.sqrt(len(specs))
    assert np.all(np.abs(mean - exact) < 5 * se + 0.003), (mean, exact, se)
    assert np.any(np.abs(mean - wrong) > 5 * se + 0.003), (mean, wrong)


def test_blip_chains_are_independent_of_batching() -> None:
    """A chain's output depends on its own spec only, not on which others run beside it."""
    a = blip_marginals(
        [_spec(1), _spec(2)], [_csr(CODEWORDS)] * 2, np.tile(SIGN, (2, 1)), LAM, K, 10, 500
    )
    b = blip_marginals([_spec(2)], [_csr(CODEWORDS)], SIGN[None, :], LAM, K, 10, 500)
    np.testing.assert_array_equal(a.marginals[1], b.marginals[0])


def _jlt_world() -> tuple[np.ndarray, np.ndarray, float]:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 6)) / np.sqrt(6)
    y = x[[0, 2]].sum(axis=0) + 0.6 * rng.standard_normal(6)
    return x, y, 0.6


def jlt_log_target(x: np.ndarray, y: np.ndarray, sigma: float) -> dict[frozenset[int], float]:
    out = {}
    for s in _sets(4, C_MAX):
        r = y - (x[sorted(s)].sum(axis=0) if s else 0.0)
        out[s] = -float(r @ r) / (2 * sigma**2) + sum(BETA[j] for j in s)
    return out


@pytest.mark.parametrize("sigma", [0.6, 0.05])
def test_jlt_kernel_equals_numpy_reference(sigma: float) -> None:
    """Same uniforms: identical marginals. The kernel keeps r·X_j up to date with the Gram
    matrix and, at σ = 0.6, its weights multiplicatively (refreshed every 1,024 steps: 3,050
    steps cross two refreshes), at σ = 0.05 exponentiates with a polynomial exp; the reference
    recomputes X r and uses numpy's exp. The two could part only if a uniform fell within
    ~10⁻¹³ of a bin edge."""
    x, y, _ = _jlt_world()
    spec = _spec(5)
    res = jlt_marginals([spec], x @ x.T, [x @ y], sigma, 50, 3000)
    ref, moves = reference_chain_jlt(spec, x, y, sigma, 50, 3000)
    np.testing.assert_array_equal(res.marginals[0], ref)
    assert res.move_rate[0] == moves / 3050
    assert 0.0 < res.move_rate[0] < 1.0


@pytest.mark.parametrize("sigma", [0.6, 0.15])
def test_jlt_marginals_match_the_enumerated_posterior(sigma: float) -> None:
    """As for BLIP: twenty chains, 5 standard errors + 0.003, on both weight paths (σ = 0.6:
    multiplicative, every |h| ≤ 30; σ = 0.15: exponentiated each step)."""
    x, y, _ = _jlt_world()
    exact = exact_marginals(jlt_log_target(x, y, sigma), 4)
    specs = [_spec(200 + k) for k in range(20)]
    res = jlt_marginals(specs, x @ x.T, [x @ y] * 20, sigma, 500, 40000)
    m = np.stack(res.marginals)
    mean, se = m.mean(axis=0), m.std(axis=0, ddof=1) / np.sqrt(len(specs))
    assert np.all(np.abs(mean - exact) < 5 * se + 0.003), (mean, exact, se)


def test_slot_cap_is_respected() -> None:
    """With c_max = 1 the chain holds at most one item: marginals sum to at most 1."""
    spec = ChainSpec(
        np.arange(4, dtype=np.int64), BETA, 1, np.array([3]), chain_state(np.random.SeedSequence(9))
    )
    res = blip_marginals([spec], [_csr(CODEWORDS)], SIGN[None, :], LAM, K, 10, 2000)
    assert res.marginals[0].sum() <= 1.0 + 1e-12


@pytest.mark.parametrize(
    ("c_max", "init", "needle"),
    [(0, [], "c_max"), (5, [0], "c_max"), (2, [0, 1, 2], "c_max"), (3, [1, 1], "distinct")],
)
def test_bad_specs_are_refused(c_max: int, init: list[int], needle: str) -> None:
    """Slots outside [1, n_c], too many or repeated initial items are ValueErrors."""
    spec = ChainSpec(
        np.arange(4, dtype=np.int64),
        BETA,
        c_max,
        np.array(init, dtype=np.int64),
        chain_state(np.random.SeedSequence(0)),
    )
    with pytest.raises(ValueError, match=needle):
        blip_marginals([spec], [_csr(CODEWORDS)], SIGN[None, :], LAM, K, 1, 1)


# ------------------------------------------------------------------ pieces
def test_uniform_stream_is_reproducible_and_uniform() -> None:
    """The same state gives the same stream; 100,000 draws have mean ½ ± 4.5 sd (1/√(12n))."""
    state = chain_state(np.random.SeedSequence(42))
    a, b = uniform_stream(state, 100_000), uniform_stream(state, 100_000)
    np.testing.assert_array_equal(a, b)
    assert np.all((a >= 0) & (a < 1))
    assert abs(a.mean() - 0.5) < 4.5 / np.sqrt(12 * a.size)
    assert not np.array_equal(a, uniform_stream(chain_state(np.random.SeedSequence(43)), 100_000))


def test_fast_exp_matches_numpy() -> None:
    """Relative error below 10⁻¹³ on [−700, 0]; below −700 the floor e^−700 applies."""
    x = np.concatenate([np.linspace(-700.0, 0.0, 100_001), [-800.0, -1e6]])
    out, bits = np.empty_like(x), np.empty(x.size, np.int64)
    fast_exp(x, out, bits)
    ok = x >= EXP_FLOOR
    np.testing.assert_allclose(out[ok], np.exp(x[ok]), rtol=1e-13)
    np.testing.assert_allclose(out[~ok], math.exp(EXP_FLOOR), rtol=1e-13)
