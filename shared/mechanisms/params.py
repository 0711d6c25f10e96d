"""Validation helpers for a mechanism's public parameters."""

from __future__ import annotations

import math
from typing import Any


def check_int(name: str, value: Any, *, low: int) -> int:
    """A whole-number public parameter ≥ `low` (bools rejected); returns it as int.

    Raises:
        ValueError: naming the parameter and echoing the value.
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not float(value).is_integer()
    ):
        raise ValueError(f"`{name}` must be a whole number, got {value!r}")
    v = int(value)
    if v < low:
        raise ValueError(f"`{name}` must be >= {low}, got {value!r}")
    return v


def check_param(
    name: str,
    value: float,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """Validate a numeric public parameter at the boundary; returns it as float.

    Raises:
        ValueError: naming the parameter and echoing the value.
    """
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"`{name}` must be finite, got {value!r}")
    if low is not None and (v < low or (low_open and v == low)):
        raise ValueError(f"`{name}` must be {'>' if low_open else '>='} {low}, got {value!r}")
    if high is not None and (v > high or (high_open and v == high)):
        raise ValueError(f"`{name}` must be {'<' if high_open else '<='} {high}, got {value!r}")
    return v


__all__ = ["check_int", "check_param"]
