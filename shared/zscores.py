"""z-scores and their inverse: the user-side statistics of Bilge's z-score schemes.

A user z-scores her true ratings before disguising them (Bilge Procedure 1, lines 1–4) and
keeps her mean and deviation; the server answers in the normalised scale and she alone turns
the answer back into ratings (`denormalise`, Bilge Eq 2.5). Both halves live here, in `shared`,
because the client computes them and the referee recomputes them on the truth it holds.

STD convention (docs/decisions/mechanisms.md): the sample standard deviation (ddof = 1),
MATLAB's `std` default, which the thesis's experiments used. A user with one rating, or with
all ratings equal, has no spread: her z-scores are 0 and her deviation is taken as 1, so
de-normalising gives her mean.

Many users' z-scores at once, as the referee needs them: `shared.zscore_rows` (compiled, kept
out of this module so that a client does not import numba).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from privrec.shared.types import FloatArray


@dataclasses.dataclass(frozen=True)
class ZScores:
    """A user's z-scores and the private statistics she keeps (Bilge Procedure 1, lines 1–4)."""

    z: FloatArray
    mean: float
    std: float


def zscore(ratings: FloatArray) -> ZScores:
    """z_j = (v_j − v̄)/σ_v over the user's rated items, with ddof = 1 (see module docstring)."""
    r = np.asarray(ratings, dtype=np.float64)
    if r.size == 0:
        return ZScores(np.zeros(0), 0.0, 1.0)
    mean = float(r.mean())
    std = float(r.std(ddof=1)) if r.size > 1 else 0.0
    if not std > 0.0:
        return ZScores(np.zeros_like(r), mean, 1.0)
    return ZScores((r - mean) / std, mean, std)


def denormalise(
    P: FloatArray | float, mean: float, std: float, *, clip: tuple[float, float] | None = None
) -> FloatArray:
    """Client side: p_aq = v̄_a + σ_a·P′_aq (Bilge Eq 2.5), optionally clipped to the scale.

    Args:
        P: the server's normalised aggregates P′_aq, float array of shape (t,) (or a scalar).
        mean: v̄_a, the user's private mean of her true ratings.
        std: σ_a, her private standard deviation (the one she z-scored with).
        clip: (lo, hi) rating scale to clip to, or None for the raw Eq 2.5 value.

    Returns:
        float64 array of the shape of `P`: her predicted ratings.
    """
    p = float(mean) + float(std) * np.asarray(P, dtype=np.float64)
    if clip is not None:
        lo, hi = clip
        if not lo <= hi:
            raise ValueError(f"`clip` must be (lo, hi) with lo <= hi, got {clip!r}")
        p = np.clip(p, lo, hi)
    return p


__all__ = ["ZScores", "denormalise", "zscore"]
