"""Validation helpers for public parameters beyond `base.check_param`."""

from __future__ import annotations

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


__all__ = ["check_int"]
