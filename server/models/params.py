"""Constructor-parameter checks shared by the models (each error names the parameter and echoes
the value, STYLE item 5)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def check_k(k: Any, name: str = "k") -> int:
    """A neighbour count (or any size) >= 1; bools refused."""
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"`{name}` must be an int >= 1, got {k!r}")
    return int(k)


def check_choice(name: str, value: Any, choices: Sequence[str]) -> str:
    """One of `choices`."""
    if value not in choices:
        raise ValueError(f"`{name}` must be one of {list(choices)}, got {value!r}")
    return str(value)


def check_number(
    name: str, value: Any, *, low: float, high: float | None = None, high_open: bool = False
) -> float:
    """A real number in [low, high] (or [low, high) with `high_open`); bools refused."""
    ok = not isinstance(value, bool) and isinstance(value, int | float | np.floating)
    if ok:
        v = float(value)
        ok = v >= low and (high is None or (v < high if high_open else v <= high))
    if not ok:
        bound = "" if high is None else (f", {high})" if high_open else f", {high}]")
        span = f"[{low}{bound}" if high is not None else f">= {low}"
        raise ValueError(f"`{name}` must be a number in {span}, got {value!r}")
    return float(value)


__all__ = ["check_choice", "check_k", "check_number"]
