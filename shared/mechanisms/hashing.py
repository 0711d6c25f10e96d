"""Public, keyed, reproducible randomness of the sketching mechanisms (BLIP, JLT).

Everything here is a pure function of public parameters (a key or seed and the shapes), so a
client, the server and the adversary rebuild the same hash family or codebook in any process, on
any machine, whatever the scheduling.

BLIP hash family (Balu (3.1); the thesis leaves the family open, "K cryptographic hash functions
taken modulo L" is its suggestion, Balu extraction §8.4):

    h_k(j) = int_le( BLAKE2b_64(msg = le64(j) ‖ le32(k), key = le128(hash_key),
                                person = b"privrec.blip.v1") )  mod  L,        k = 0, …, K−1

i.e. keyed BLAKE2b (RFC 7693) with an 8-byte digest read little-endian, over the item index j
(8 bytes, little-endian) and the hash index k (4 bytes, little-endian), with the public
`hash_key` as the BLAKE2b key (16 bytes, little-endian) and a personalisation string for domain
separation. The modulo bias is below L/2⁶⁴ ≈ 3·10⁻¹⁶. Positions may collide (the same ℓ for two
k), so a codeword X_j can have fewer than K ones, exactly as Balu (3.1) allows.

JLT codebook (Balu §3.2): X ∈ ℝ^{N×L} with i.i.d. entries N(0, 1/L), drawn row by row in C order
from `shared.seeding.rng_for(codebook_seed, "jlt", "codebook")` with
`Generator.standard_normal`, divided by √L. The stream is sequential, so the first N′ rows of
an N-row codebook equal the N′-row codebook: the codebook of item j does not depend on the
catalogue size.
"""

from __future__ import annotations

import hashlib

import numpy as np

from privrec.shared.seeding import rng_for
from privrec.shared.types import BoolArray, FloatArray, IntArray

_PERSON = b"privrec.blip.v1"
_MAX_KEY = 2**128


def _key_bytes(key: int) -> bytes:
    if not 0 <= key < _MAX_KEY:
        raise ValueError(f"`hash_key` must be in [0, 2**128), got {key!r}")
    return int(key).to_bytes(16, "little")


def bloom_position(key: int, item: int, k: int, n_bits: int) -> int:
    """h_k(item) of the documented family (see the module docstring); one call, no cache."""
    digest = hashlib.blake2b(
        int(item).to_bytes(8, "little") + int(k).to_bytes(4, "little"),
        key=_key_bytes(key),
        person=_PERSON,
        digest_size=8,
    ).digest()
    return int.from_bytes(digest, "little") % n_bits


class BloomHashFamily:
    """The K keyed hash functions of BLIP, with a per-instance table cache.

    Args:
        key: the public hash key (an int in [0, 2¹²⁸)).
        n_bits: L, the length of the Bloom filter.
        n_hashes: K, hash functions (positions) per item.
    """

    def __init__(self, key: int, n_bits: int, n_hashes: int) -> None:
        self._key = _key_bytes(key)
        self.key = int(key)
        self.n_bits = int(n_bits)
        self.n_hashes = int(n_hashes)
        self._table: IntArray = np.zeros((0, self.n_hashes), dtype=np.int64)

    def _grow(self, n: int) -> None:
        start = self._table.shape[0]
        if n <= start:
            return
        rows = np.empty((n - start, self.n_hashes), dtype=np.int64)
        ks = [int(k).to_bytes(4, "little") for k in range(self.n_hashes)]
        for r, item in enumerate(range(start, n)):
            prefix = item.to_bytes(8, "little")
            for k, kb in enumerate(ks):
                digest = hashlib.blake2b(
                    prefix + kb, key=self._key, person=_PERSON, digest_size=8
                ).digest()
                rows[r, k] = int.from_bytes(digest, "little") % self.n_bits
        self._table = np.concatenate([self._table, rows])

    def positions(self, items: IntArray) -> IntArray:
        """h_k(j) for each item j (rows) and k < K (columns): int64 array of shape (g, K)."""
        items = np.asarray(items, dtype=np.int64)
        if items.size == 0:
            return np.zeros((0, self.n_hashes), dtype=np.int64)
        if items.min() < 0:
            raise ValueError("item indices must be >= 0")
        self._grow(int(items.max()) + 1)
        return self._table[items]

    def codeword(self, item: int) -> BoolArray:
        """X_j of Balu (3.1): bool array of shape (L,), ones at {h_k(j)} (≤ K ones)."""
        out = np.zeros(self.n_bits, dtype=bool)
        out[self.positions(np.array([item]))[0]] = True
        return out

    def bloom_filter(self, items: IntArray) -> BoolArray:
        """B_P = X_{j1} ∨ … ∨ X_{jc} of Balu (3.2): bool array of shape (L,)."""
        out = np.zeros(self.n_bits, dtype=bool)
        out[self.positions(items).ravel()] = True
        return out


def gaussian_codebook(seed: int, n_items: int, dim: int) -> FloatArray:
    """The public JLT codebook, float64 array of shape (n_items, dim), entries N(0, 1/dim).

    Balu §3.2: "X_j(i) ~ N(0, 1/L)", generated once and shared; see the module docstring for the
    exact stream.
    """
    rng = rng_for(seed, "jlt", "codebook")
    codebook: FloatArray = rng.standard_normal((n_items, dim)) / np.sqrt(dim)
    return codebook


__all__ = ["BloomHashFamily", "bloom_position", "gaussian_codebook"]
