"""BLIP: a Bloom filter of the item set with every bit flipped at random (Balu 2016, §3.1).

After Alaggan, Gambs & Kermarrec (2012). A profile is the set P of items the user rated (the
rating values are ignored: BLIP releases implicit feedback).

  * Codeword of item j, Balu (3.1): X_j(ℓ) = 1 iff h_k(j) = ℓ for some k < K; collisions are
    allowed, so X_j may hold fewer than K ones.
  * Bloom filter, Balu (3.2): B_P = X_{j1} ∨ … ∨ X_{jc} (bitwise OR, not a sum).
  * Release, Balu (3.3): B̃_P = B_P ⊕ N with N(ℓ) ~ i.i.d. Bernoulli(p_ε) over ALL L bits
    (both 0→1 and 1→0 flips).
  * Flip probability, Balu (3.4): p_ε = 1/(1 + e^{ε/K}).

Public parameters (known to server and adversary): ε (equivalently p_ε), L, K and the hash key,
which fixes the hash family documented in `shared.mechanisms.hashing`.

Privacy: pure ε-DP for "one item added to or removed from the profile". Adding item j changes
at most K bits of B_P (only the distinct positions of X_j that no other item of P already sets);
each bit is binary randomized response with log-odds ln((1 − p_ε)/p_ε) = ε/K, and the L bits are
flipped independently, so the release is the K-fold composition of ε/K-RR: exactly ε whenever
the added item has K distinct positions no other profile item sets (the worst case; with L = 5000
and K = 20 most items do), less otherwise. Neighbouring pair for an audit: P and P ∪ {j} with
X_j of weight K and disjoint from B_P. Under "one item replaced by another" the bound is 2ε.

Choices where the thesis is silent (recorded in docs/decisions/mechanisms.md):
  * Hash family: keyed BLAKE2b, see `shared.mechanisms.hashing`.
  * Draw order: exactly L uniforms u_ℓ from the user's generator, N(ℓ) = [u_ℓ < p_ε]; at ε = 0,
    p_ε = 1/2 and the release is uniform noise.
  * Defaults L = 5000, K = 20 (Balu §3.5.1); ε = 8 (a mid point of the thesis's grid
    {59, 28, 17, 8, 6, 5, 3, 2, 0}).

References:
    R. Balu, "Privacy-aware and scalable recommender systems using sketching techniques",
    PhD thesis, Univ. Rennes 1, 2016, §3.1, Eqs. (3.1)–(3.4).
    M. Alaggan, S. Gambs, A.-M. Kermarrec, "BLIP: non-interactive differentially-private
    similarity computation on Bloom filters", SSS 2012.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, overload

import numpy as np
import numpy.typing as npt
from scipy.special import expit

from privrec.shared.accounting import dp
from privrec.shared.accounting.events import Relation, binary_rr_event
from privrec.shared.capabilities import PayloadKind, ReleaseKind, ReleaseScale
from privrec.shared.mechanisms.base import (
    BitPayload,
    Mechanism,
    Payload,
    PrivacyStatement,
    Profile,
    require_bits,
    require_payload,
)
from privrec.shared.mechanisms.hashing import BloomHashFamily
from privrec.shared.mechanisms.params import check_int, check_param
from privrec.shared.types import FloatArray


@overload
def flip_probability(epsilon: float, n_hashes: int) -> float: ...


@overload
def flip_probability(epsilon: FloatArray, n_hashes: int | npt.NDArray[Any]) -> FloatArray: ...


def flip_probability(
    epsilon: float | FloatArray, n_hashes: int | npt.NDArray[Any]
) -> float | FloatArray:
    """p_ε = 1/(1 + e^{ε/K}), Balu (3.4): the one definition (the mechanism draws with it and
    `shared.privacy.sketch_information` derives the information of a release from it).

    Args:
        epsilon: ε ≥ 0, a number or an array (elementwise).
        n_hashes: K ≥ 1, a number or an array broadcasting against `epsilon`.

    Returns:
        p_ε, a float for scalar arguments, else an array of the broadcast shape.
    """
    p: FloatArray = expit(-np.asarray(epsilon, dtype=np.float64) / np.asarray(n_hashes))
    return float(p) if p.ndim == 0 else p


class Blip(Mechanism):
    """BLIP (Balu §3.1) with public ε, L, K and hash key.

    Args:
        epsilon: ε ≥ 0 of one release, for one item added or removed.
        n_bits: L, the Bloom filter length.
        n_hashes: K, hash positions per item.
        hash_key: public key of the hash family (int in [0, 2¹²⁸)).
    """

    name = "blip"
    payload_field = "blip"
    releases = ReleaseKind(PayloadKind.BITS, ReleaseScale.SKETCH)
    accounting_relation: ClassVar[Relation] = "REPLACE_ONE"

    def __init__(
        self, epsilon: float = 8.0, n_bits: int = 5000, n_hashes: int = 20, hash_key: int = 0
    ) -> None:
        self.epsilon = check_param("epsilon", epsilon, low=0.0)
        self.n_bits = check_int("n_bits", n_bits, low=1)
        self.n_hashes = check_int("n_hashes", n_hashes, low=1)
        self.hash_key = check_int("hash_key", hash_key, low=0)
        self.hashes = BloomHashFamily(self.hash_key, self.n_bits, self.n_hashes)
        self.p_flip = flip_probability(self.epsilon, self.n_hashes)

    def public_params(self) -> dict[str, Any]:
        """The public ε, L, K and hash key."""
        return {
            "epsilon": self.epsilon,
            "n_bits": self.n_bits,
            "n_hashes": self.n_hashes,
            "hash_key": self.hash_key,
        }

    def bloom_filter(self, profile: Profile) -> np.ndarray:
        """B_P of Balu (3.2) for the profile's item set."""
        return self.hashes.bloom_filter(profile.items)

    def release(self, profile: Profile, rng: np.random.Generator) -> BitPayload:
        """B̃_P = B_P ⊕ N, N(ℓ) ~ Bernoulli(p_ε) over all L bits (Balu (3.2)–(3.4))."""
        noise = rng.random(self.n_bits) < self.p_flip
        return BitPayload(self.bloom_filter(profile) ^ noise)

    def _release_many(
        self, profiles: Sequence[Profile], rngs: Sequence[np.random.Generator]
    ) -> list[Payload]:
        """`release` for many users, vectorised (the same draws, the same releases)."""
        # One (n, L) boolean matrix: OR by scatter, XOR by one vectorised comparison.
        n = len(profiles)
        blooms = np.zeros((n, self.n_bits), dtype=bool)
        rows = [np.full(p.items.size * self.n_hashes, i) for i, p in enumerate(profiles)]
        cols = [self.hashes.positions(p.items).ravel() for p in profiles]
        blooms[np.concatenate(rows).astype(np.int64), np.concatenate(cols)] = True
        u = np.stack([r.random(self.n_bits) for r in rngs])
        out = blooms ^ (u < self.p_flip)
        return [BitPayload(row) for row in out]

    def privacy(self) -> PrivacyStatement:
        """ε-DP over item sets (Balu §3.1: K randomised responses at ε/K each)."""
        return PrivacyStatement(
            kind="pure",
            epsilon=self.epsilon,
            delta=0.0,
            neighbouring="one item added or removed",
            notes=(
                f"Balu (3.4): each of the L = {self.n_bits} bits is flipped with "
                f"p_eps = 1/(1+e^(eps/K)) = {self.p_flip:.6g}; one item touches at most "
                f"K = {self.n_hashes} bits, so eps = K * ln((1-p)/p) (exact when the item's K "
                "positions are distinct and unset by the rest of the profile). Event: K-fold "
                "self-composition of 2-bucket randomized response, accounted under REPLACE_ONE. "
                "Under 'one item replaced by another' the bound is 2*eps."
            ),
        )

    def event(self) -> dp.DpEvent:
        """K binary randomised responses with flip probability p_ε, self-composed."""
        leaf = binary_rr_event(self.p_flip)
        if isinstance(leaf, dp.NoOpDpEvent):  # ε = 0: pure noise
            return leaf
        return dp.SelfComposedDpEvent(leaf, self.n_hashes)

    def estimate(self, payload: Payload, n_items: int) -> FloatArray:
        """Unbiased estimate of the Bloom filter: E[b̃] = p + (1 − 2p)·b, so
        b̂ = (b̃ − p)/(1 − 2p) (Balu (3.7)); inner products of two users' b̂ are unbiased."""
        require_payload(payload, BitPayload, "blip")
        assert isinstance(payload, BitPayload)
        return (payload.bits.astype(np.float64) - self.p_flip) / (1.0 - 2.0 * self.p_flip)

    def validate(self, payload: Payload, n_items: int) -> None:
        """Refuse a payload that is not L boolean bits."""
        require_bits(payload, "blip", self.n_bits, f"L = {self.n_bits}")


__all__ = ["Blip", "flip_probability"]
