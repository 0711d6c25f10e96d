"""BLIP (Balu §3.1): the p_ε map, the hash family, OR/XOR semantics and the flip distribution."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest

from privrec.shared.accounting import event_epsilon
from privrec.shared.errors import ValidationError
from privrec.shared.mechanisms import Blip
from privrec.shared.mechanisms.base import BitPayload, Profile
from privrec.shared.mechanisms.blip import flip_probability
from privrec.shared.mechanisms.hashing import BloomHashFamily, bloom_position

from ._helpers import ALPHA, binomial_pvalue, random_profiles, rngs

# Balu §3.5.1, K = 20: (ε, p_ε) as printed, and p_ε by (3.4) to 4 decimals (extraction §2.1 [D]).
BALU_TABLE = [
    (59, 0.05, 0.0497),
    (28, 0.2, 0.1978),
    (17, 0.3, 0.2994),
    (8, 0.4, 0.4013),
    (6, 0.42, 0.4256),
    (5, 0.44, 0.4378),
    (3, 0.46, 0.4626),
    (2, 0.48, 0.4750),
    (0, 0.5, 0.5),
]


@pytest.mark.parametrize(("eps", "p_printed", "p_exact"), BALU_TABLE)
def test_flip_probability_reproduces_balu_table(eps: int, p_printed: float, p_exact: float) -> None:
    """p_ε = 1/(1+e^{ε/20}) gives the thesis's table: exact to 4 decimals, printed to ±0.006.

    The thesis printed rounded p_ε and integer ε: inverting its p_ε with (3.4) and rounding gives
    back its ε exactly (the ε = 6 row, 0.42 vs 0.4256, is the loosest).
    """
    assert flip_probability(eps, 20) == pytest.approx(p_exact, abs=5e-5)
    assert abs(flip_probability(eps, 20) - p_printed) < 0.006
    assert round(20 * math.log((1 - p_printed) / p_printed)) == eps
    assert Blip(epsilon=eps).p_flip == flip_probability(eps, 20)


def test_flip_probability_is_not_the_careless_one() -> None:
    """ε is split over the K bits: p ≠ 1/(1+e^ε) (extraction, careless list item 1)."""
    assert Blip(epsilon=59.0).p_flip == pytest.approx(0.0497, abs=1e-4)
    assert 1 / (1 + math.exp(59)) < 1e-20


def test_event_is_k_fold_rr_with_exact_epsilon() -> None:
    """The event composes K bits of ε/K randomized response: ε exactly at δ = 0."""
    mech = Blip(epsilon=8.0)
    ev = mech.event()
    assert ev.count == 20
    assert ev.event.noise_parameter == pytest.approx(2 * mech.p_flip)
    assert math.log((1 - mech.p_flip) / mech.p_flip) == pytest.approx(8.0 / 20)
    assert event_epsilon(ev, 0.0) == pytest.approx(8.0)
    assert event_epsilon(ev, 1e-6) < 8.0


def test_hash_family_matches_documented_formula() -> None:
    """Positions are BLAKE2b-64(le64(j)‖le32(k); key = le128(key), person) mod L."""
    fam = BloomHashFamily(key=12345, n_bits=5000, n_hashes=20)
    table = fam.positions(np.arange(30))
    for j in (0, 7, 29):
        for k in (0, 19):
            d = hashlib.blake2b(
                j.to_bytes(8, "little") + k.to_bytes(4, "little"),
                key=(12345).to_bytes(16, "little"),
                person=b"privrec.blip.v1",
                digest_size=8,
            ).digest()
            assert (
                table[j, k]
                == int.from_bytes(d, "little") % 5000
                == bloom_position(12345, j, k, 5000)
            )


def test_hash_family_is_pinned() -> None:
    """Pinned positions: any process, machine or version rebuilds the same family from the key.

    (BLAKE2b does not depend on PYTHONHASHSEED or the platform; a change here breaks every
    recorded run and the adversary's decoders, so it must be deliberate.)
    """
    fam = BloomHashFamily(0, 5000, 20)
    assert fam.positions(np.array([0, 1681]))[:, :3].tolist() == [
        [2763, 2060, 2271],
        [1471, 2005, 2037],
    ]


def test_hash_key_changes_positions_and_cache_is_prefix_stable() -> None:
    """A different key gives a different family; growing the cache keeps earlier rows."""
    a = BloomHashFamily(0, 5000, 20)
    first = a.positions(np.array([3])).copy()
    a.positions(np.array([500]))
    np.testing.assert_array_equal(a.positions(np.array([3])), first)
    assert not np.array_equal(BloomHashFamily(1, 5000, 20).positions(np.array([3])), first)


def test_codewords_allow_collisions() -> None:
    """A codeword has at most K ones, fewer when two hashes collide (Balu 3.1)."""
    fam = BloomHashFamily(0, n_bits=16, n_hashes=8)
    weights = [int(fam.codeword(j).sum()) for j in range(50)]
    assert max(weights) <= 8
    assert min(weights) < 8


def test_noise_free_release_is_or_of_codewords() -> None:
    """With p_ε ≈ 0 the release is exactly B_P = OR of the codewords (Balu 3.2)."""
    mech = Blip(epsilon=2000.0, n_bits=64, n_hashes=4)
    assert mech.p_flip < 1e-200
    p = Profile(np.array([1, 5, 9]), np.array([3.0, 4.0, 5.0]), 20)
    expected = mech.hashes.codeword(1) | mech.hashes.codeword(5) | mech.hashes.codeword(9)
    np.testing.assert_array_equal(mech.release(p, rngs(0, 1)[0]).bits, expected)
    assert expected.sum() < 3 * 4 or len(set(mech.hashes.positions(p.items).ravel())) == 12


def _flips(mech: Blip, seed: int, n_users: int) -> tuple[np.ndarray, np.ndarray]:
    """(flip indicator, true bit) over all bits of n_users releases."""
    ps = random_profiles(seed, n_users, 1682, low=20, high=200)
    outs = mech.release_many(ps, rngs(seed, n_users))
    truth = np.stack([mech.bloom_filter(p) for p in ps])
    got = np.stack([o.bits for o in outs])
    return got ^ truth, truth


class _Scaled(Blip):
    """A mis-implemented BLIP whose flip probability is off by a factor (for power checks)."""

    def __init__(self, factor: float, **kw: float) -> None:
        super().__init__(**kw)
        self.p_flip = min(self.p_flip * factor, 1.0)


@pytest.mark.parametrize("eps", [59.0, 8.0, 2.0])
def test_flip_rate_matches_p_eps_and_rejects_mis_scaled(eps: float) -> None:
    """Flip counts over 20 users × 5000 bits are Binomial(n, p_ε); ±30 % p_ε is rejected.

    Exact two-sided binomial test at α = 1e-3 (false-failure rate 1e-3 per ε for a random seed).
    Power: n = 100,000 bits; at the smallest p_ε (0.0497) a ±30 % error is > 20 standard errors.
    """
    n_users = 20
    flips, truth = _flips(Blip(epsilon=eps), 1, n_users)
    p = flip_probability(eps, 20)
    assert binomial_pvalue(flips.sum(), flips.size, p) > ALPHA
    # Both 1→0 and 0→1 flips happen at rate p_ε (every bit is XOR-ed, careless list item 2).
    assert binomial_pvalue(flips[truth].sum(), truth.sum(), p) > ALPHA
    assert binomial_pvalue(flips[~truth].sum(), (~truth).sum(), p) > ALPHA
    for factor in (0.7, 1.3):
        bad, _ = _flips(_Scaled(factor, epsilon=eps), 1, n_users)
        assert binomial_pvalue(bad.sum(), bad.size, p) < ALPHA


def test_validate_rejects_wrong_length_and_dtype() -> None:
    """n_bits must equal L; bits must be boolean."""
    mech = Blip(n_bits=100, n_hashes=3)
    mech.validate(BitPayload(np.zeros(100, dtype=bool)), 1682)
    with pytest.raises(ValidationError, match="must equal L = 100") as info:
        mech.validate(BitPayload(np.zeros(99, dtype=bool)), 1682)
    assert info.value.field == "blip.n_bits"
    with pytest.raises(ValidationError, match="boolean"):
        mech.validate(BitPayload(np.zeros(100, dtype=np.uint8)), 1682)  # type: ignore[arg-type]
