"""Reproducible randomness: one generator per (run seed, stable key).

Every random draw in privrec comes from `rng_for(seed, *key)`. The key names who draws and why
(e.g. ``("user", 17, "profile")``), so a draw does not depend on scheduling, on which shard hosts a
user, or on the launcher: a run is reproducible bit for bit.
"""

from __future__ import annotations

import hashlib

import numpy as np


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
            digest = hashlib.blake2b(str(part).encode(), digest_size=8).digest()
            words.append(int.from_bytes(digest, "little"))
    return words


def seed_sequence(seed: int, *key: object) -> np.random.SeedSequence:
    """The SeedSequence for `seed` and a stable `key`."""
    if seed < 0:
        raise ValueError(f"`seed` must be >= 0, got {seed!r}")
    return np.random.SeedSequence([seed, *_key_words(key)])


def rng_for(seed: int, *key: object) -> np.random.Generator:
    """A fresh PCG64 generator for `seed` and a stable `key` such as ``("user", 17, "profile")``."""
    return np.random.Generator(np.random.PCG64(seed_sequence(seed, *key)))


__all__ = ["rng_for", "seed_sequence"]
