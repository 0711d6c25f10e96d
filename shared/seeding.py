"""Reproducible randomness: one generator per (run seed, stable key).

Every random draw in privrec comes from `rng_for(seed, *key)`. The key names who draws and why
(e.g. ``("user", 17, "profile")``), so a draw does not depend on scheduling, on which shard hosts a
user, or on the launcher: a run is reproducible bit for bit.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.random.bit_generator import ISeedSequence


def _key_words(key: tuple[object, ...]) -> list[int]:
    # Strings are hashed to 64-bit words (stable across processes, unlike hash()).
    words: list[int] = []
    for part in key:
        if isinstance(part, bool | np.bool_):
            words.append(int(part))
        elif isinstance(part, int | np.integer):
            if part < 0:
                raise ValueError(f"seed key parts must be >= 0, got {part!r}")
            words.append(int(part))
        else:
            words.append(_text_word(str(part)))
    return words


@functools.lru_cache(maxsize=1024)  # the constant parts ("user", "profile", ...) repeat
def _text_word(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def seed_sequence(seed: int, *key: object) -> np.random.SeedSequence:
    """The SeedSequence for `seed` and a stable `key`."""
    if seed < 0:
        raise ValueError(f"`seed` must be >= 0, got {seed!r}")
    return np.random.SeedSequence([seed, *_key_words(key)])


def rng_for(seed: int, *key: object) -> np.random.Generator:
    """A fresh PCG64 generator for `seed` and a stable `key` such as ``("user", 17, "profile")``."""
    return np.random.Generator(np.random.PCG64(seed_sequence(seed, *key)))


# ------------------------------------------------------------------ many generators at once
# numpy's SeedSequence (numpy/random/bit_generator.pyx, O'Neill's seed_seq design) run on a
# whole batch of keys as uint32 array arithmetic: the pool each key's entropy mixes into, and
# the four 64-bit words PCG64 seeds itself from. Equal word for word to numpy's (tested on
# thousands of keys); a per-user SeedSequence costs ≈ 30 µs of Python-level work, which made
# seeding a third of a shard's CPU at a million users (bench/population.py).
_INIT_A, _MULT_A = np.uint32(0x43B0D7E5), np.uint32(0x931E8875)
_INIT_B, _MULT_B = np.uint32(0x8B51F9DD), np.uint32(0x58F38DED)
_MIX_L, _MIX_R = np.uint32(0xCA01F9DD), np.uint32(0x4973F715)
_XSHIFT = np.uint32(16)
_POOL = 4


def _uint32_words(n: int) -> list[int]:
    """numpy's `_int_to_uint32_array`: 0 → [0], else the 32-bit words, least significant first."""
    if n == 0:
        return [0]
    words = []
    while n > 0:
        words.append(n & 0xFFFFFFFF)
        n >>= 32
    return words


class _HashConst:
    """The running multiplier of `hashmix` (the same sequence for every key of a batch)."""

    def __init__(self, start: np.uint32, mult: np.uint32) -> None:
        self.value, self.mult = start, mult

    def hashmix(self, value: np.ndarray) -> np.ndarray:
        value = value ^ self.value
        self.value = np.uint32(int(self.value) * int(self.mult) & 0xFFFFFFFF)
        value = value * self.value
        return value ^ (value >> _XSHIFT)


def _mix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    result: np.ndarray = np.subtract(np.multiply(_MIX_L, x), np.multiply(_MIX_R, y))
    mixed: np.ndarray = np.bitwise_xor(result, np.right_shift(result, _XSHIFT))
    return mixed


def _pcg64_seeds(entropy: np.ndarray) -> np.ndarray:
    """(n, 4) uint64: `SeedSequence(e).generate_state(4, np.uint64)` for each row e of the
    (n, L) uint32 `entropy` (one entropy length per call)."""
    with np.errstate(over="ignore"):
        n, length = entropy.shape
        zero = np.zeros(n, dtype=np.uint32)
        h = _HashConst(_INIT_A, _MULT_A)
        pool = [h.hashmix(entropy[:, i] if i < length else zero) for i in range(_POOL)]
        for i_src in range(_POOL):
            for i_dst in range(_POOL):
                if i_src != i_dst:
                    pool[i_dst] = _mix(pool[i_dst], h.hashmix(pool[i_src]))
        for i_src in range(_POOL, length):
            for i_dst in range(_POOL):
                pool[i_dst] = _mix(pool[i_dst], h.hashmix(entropy[:, i_src]))
        g = _HashConst(_INIT_B, _MULT_B)
        words = np.empty((n, 2 * _POOL), dtype=np.uint32)
        for i in range(2 * _POOL):
            words[:, i] = g.hashmix(pool[i % _POOL])
    return words.astype("<u4").view("<u8").astype(np.uint64)


class _FixedState(ISeedSequence):
    """A seed whose PCG64 words were computed in a batch (`rngs_for`)."""

    def __init__(self, words: np.ndarray) -> None:
        self._words = words

    def generate_state(self, n_words: int, dtype: Any = np.uint32) -> np.ndarray:
        if n_words != _POOL or np.dtype(dtype) != np.uint64:
            raise ValueError("a batch-computed seed only holds PCG64's four 64-bit words")
        return self._words


def rngs_for(seed: int, keys: Sequence[tuple[object, ...]]) -> list[np.random.Generator]:
    """`[rng_for(seed, *key) for key in keys]`, the same generators (same streams), seeded in
    one vectorised pass."""
    if seed < 0:
        raise ValueError(f"`seed` must be >= 0, got {seed!r}")
    entropies = [
        [w for part in (seed, *_key_words(key)) for w in _uint32_words(part)] for key in keys
    ]
    out: list[np.random.Generator | None] = [None] * len(keys)
    by_length: dict[int, list[int]] = {}
    for k, words in enumerate(entropies):
        by_length.setdefault(len(words), []).append(k)
    for length, members in by_length.items():
        matrix = np.array([entropies[k] for k in members], dtype=np.uint32).reshape(-1, length)
        for k, words in zip(members, _pcg64_seeds(matrix), strict=True):
            out[k] = np.random.Generator(np.random.PCG64(_FixedState(words)))  # type: ignore[arg-type]
    return [g for g in out if g is not None]


__all__ = ["rng_for", "rngs_for", "seed_sequence"]
