"""Balu ch. 4's evaluation protocol, shared by the `balu-t4.2` and `balu-dpmf` entries.

Balu §4.1.5.1: a random [0.8, 0.1, 0.1] split of the ratings into training, validation and
test; ratings whose user or item is infrequent (< 10) removed from validation and test only;
(η, λ) per method by "a two stage line search in log scale" on validation RMSE; RMSE (4.8) on
test; for the privacy runs also the KL divergence (4.15) between the Gaussians of the training
and test prediction errors. The factorization is the project's own core
(`server.models.count_sketch.fit_factorization`), the same code the recommenders run.

Choices where the thesis is silent (docs/decisions/curator_models.md):

* The frequency filter counts a user's / item's ratings in the training part.
* Predictions are clipped to the rating scale before scoring (RMSE and the errors of the KLD).
* The line search: stage 1 walks η over a log grid at λ₀, then λ over a log grid at the best η;
  stage 2 refines η, then λ, by a quarter of a decade each way. Every point is one fit on the
  training part scored on validation; the test part is never looked at. A diverging fit
  (non-finite predictions) scores +∞.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from privrec.server.models.count_sketch import Factorization, SGDConfig, fit_factorization
from privrec.shared.data import load_dataset, make_synthetic
from privrec.shared.data.dataset import RatingData
from privrec.shared.metrics import rmse
from privrec.shared.privacy.membership import membership_kld
from privrec.shared.seeding import rng_for
from privrec.shared.types import FloatArray, IntArray

MIN_FREQUENCY = 10


@dataclasses.dataclass(frozen=True)
class Part:
    """One part of the split: parallel arrays of users, items and ratings."""

    users: IntArray
    items: IntArray
    ratings: FloatArray

    def __len__(self) -> int:
        return int(self.ratings.size)


@dataclasses.dataclass(frozen=True)
class Split:
    """Balu's [0.8, 0.1, 0.1] split of one data set (the module docstring)."""

    train: Part
    valid: Part
    test: Part
    n_users: int
    n_items: int
    scale: tuple[float, float]


def load(data: Path | None, quick: bool, seed: int) -> RatingData:
    """ML-100K (or the file given with `--data`, e.g. ML-1M's ratings.dat); quick runs use a
    small synthetic set."""
    if quick:
        return make_synthetic(120, 80, density=0.2, seed=seed)
    return load_dataset(str(data) if data else "ml-100k")


def split(data: RatingData, seed: int, min_frequency: int = MIN_FREQUENCY) -> Split:
    """Random [0.8, 0.1, 0.1] split of the ratings (stream ("balu", "split")); validation and
    test keep only ratings whose user and item have >= `min_frequency` training ratings."""
    coo = data.ratings.tocoo()
    users, items = coo.row.astype(np.int64), coo.col.astype(np.int64)
    ratings = coo.data.astype(np.float64)
    order = rng_for(seed, "balu", "split").permutation(ratings.size)
    n_train, n_valid = int(0.8 * ratings.size), int(0.1 * ratings.size)
    parts = np.split(order, [n_train, n_train + n_valid])
    train = Part(users[parts[0]], items[parts[0]], ratings[parts[0]])
    user_freq = np.bincount(train.users, minlength=data.n_users)
    item_freq = np.bincount(train.items, minlength=data.n_items)

    def frequent(idx: IntArray) -> Part:
        keep = (user_freq[users[idx]] >= min_frequency) & (item_freq[items[idx]] >= min_frequency)
        sel = idx[keep]
        return Part(users[sel], items[sel], ratings[sel])

    return Split(
        train, frequent(parts[1]), frequent(parts[2]), data.n_users, data.n_items, data.rating_scale
    )


def fit(s: Split, config: SGDConfig, seed: int, tag: str) -> Factorization:
    """The core factorization on the training part (stream ("balu", tag))."""
    t = s.train
    return fit_factorization(
        t.users, t.items, t.ratings, s.n_users, s.n_items, config, rng_for(seed, "balu", tag)
    )


def predictions(model: Factorization, part: Part, scale: tuple[float, float]) -> FloatArray:
    """r̂ of `part`, clipped to the rating scale."""
    return np.clip(model.predict(part.users, part.items), *scale)


def score(model: Factorization, part: Part, scale: tuple[float, float]) -> float:
    """RMSE (4.8) on `part` (+∞ when the fit diverged)."""
    p = predictions(model, part, scale)
    raw = model.predict(part.users, part.items)
    return rmse(p, part.ratings) if np.all(np.isfinite(raw)) else math.inf


def kld(model: Factorization, s: Split) -> float:
    """Balu (4.15): KL(N_train ‖ N_test) of the (clipped) prediction errors r̂ − r."""
    train_err = predictions(model, s.train, s.scale) - s.train.ratings
    test_err = predictions(model, s.test, s.scale) - s.test.ratings
    return membership_kld(train_err, test_err)


@dataclasses.dataclass(frozen=True)
class SearchGrid:
    """The line search's grids (log scale)."""

    etas: Sequence[float] = (0.003, 0.01, 0.03, 0.1)
    regs: Sequence[float] = (0.001, 0.01, 0.03, 0.1, 0.3)
    reg0: float = 0.03
    refine: bool = True


def line_search(
    evaluate: Callable[[float, float], float], grid: SearchGrid
) -> tuple[float, float, float]:
    """Balu's "two stage line search in log scale" (the module docstring).

    Args:
        evaluate: (η, λ) → validation RMSE.
        grid: the stage-1 grids.

    Returns:
        (η, λ, validation RMSE) of the best point seen.
    """
    seen: dict[tuple[float, float], float] = {}

    def at(eta: float, reg: float) -> float:
        key = (float(eta), float(reg))
        if key not in seen:
            seen[key] = evaluate(*key)
        return seen[key]

    eta = min(grid.etas, key=lambda e: at(e, grid.reg0))
    reg = min(grid.regs, key=lambda r: at(eta, r))
    if grid.refine:
        step = 10**0.25
        eta = min((eta / step, eta, eta * step), key=lambda e: at(e, reg))
        reg = min((reg / step, reg, reg * step), key=lambda r: at(eta, r))
    return eta, reg, at(eta, reg)


def tuned(
    s: Split, base: SGDConfig, grid: SearchGrid, seed: int, tag: str
) -> tuple[SGDConfig, Factorization]:
    """`base` with (η, λ) from the line search on validation, and its fit."""
    fits: dict[tuple[float, float], Factorization] = {}

    def evaluate(eta: float, reg: float) -> float:
        config = dataclasses.replace(base, eta=eta, reg=reg)
        fits[(eta, reg)] = model = fit(s, config, seed, tag)
        return score(model, s.valid, s.scale)

    eta, reg, _ = line_search(evaluate, grid)
    return dataclasses.replace(base, eta=eta, reg=reg), fits[(eta, reg)]


__all__ = [
    "MIN_FREQUENCY",
    "Part",
    "SearchGrid",
    "Split",
    "fit",
    "kld",
    "line_search",
    "load",
    "predictions",
    "score",
    "split",
    "tuned",
]
