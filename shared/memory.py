"""Handing freed heap memory back to the operating system.

Building a large array from many block-sized temporaries (the synthetic generator's blocks)
leaves the C heap fragmented: glibc keeps the freed blocks, and the process's resident memory
stays ≈ 0.3 GB above what it holds at a million users, in every process that generates the
population. `release_free_memory` asks glibc to return what it can (`malloc_trim(0)`); on a
C library without it, it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim: Callable[[int], int] = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
    return trim


def release_free_memory() -> bool:
    """Return the C heap's free memory to the OS; True when the C library could."""
    trim = _malloc_trim()
    return trim is not None and bool(trim(0))


__all__ = ["release_free_memory"]
