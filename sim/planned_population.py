"""The public plan of a whole population, as the referee needs it: the test users' plans, and
everyone's released and training ratings as flat cell arrays.

The referee scores test users one by one, but its pools (the trivial predictors' item means,
the popularity ranking, the split's sizes) sum over every user's training ratings. Under the
thesis protocol a user who is not tested releases her whole row of the data set and withholds
nothing, so `PlannedPopulation.of_run` plans only the test users (`shared.population`'s
`rows_of_testers`) and reads everyone else's cells straight from the rating matrix: at a million
users with 10,000 test users, 10,000 plan objects instead of a million (the plans of everyone
took minutes and gigabytes). Under a named split every user's profile is cut by the split
(`population_plan`), so every plan is made, as before.

Sums over the cells run in row order and, within a row, in item order: the order in which the
per-user loops they replace added them, so every figure is the same float.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Self

import numpy as np

from privrec.shared.config import ExperimentConfig
from privrec.shared.data.dataset import RatingData
from privrec.shared.population import UserPlan, population_plan, rows_of_testers, user_id_of
from privrec.shared.types import BoolArray, FloatArray, IntArray


@dataclasses.dataclass(frozen=True)
class PlannedPopulation:
    """Every user's profile cells (what her profile holds in the run) and which of them she
    keeps for training, with the plans of the test users.

    Attributes:
        testers: the test users' plans (withheld items non-empty), in row order.
        rows: the population row of each profile cell, non-decreasing.
        items: the item of each profile cell (increasing within a row).
        ratings: the true rating of each profile cell.
        training: whether the cell is a training rating (not withheld).
        user_ids: each population row's wire id (a function: made only when asked).
        n_items: the catalogue's size.
        every_row: every user's population row (with or without a profile cell), increasing.
    """

    testers: list[UserPlan]
    rows: IntArray
    items: IntArray
    ratings: FloatArray
    training: BoolArray
    user_ids: Callable[[int], str]
    n_items: int
    every_row: IntArray

    @classmethod
    def of_run(cls, data: RatingData, config: ExperimentConfig) -> Self:
        """The plan of the run: under the thesis protocol from the test users' plans and the
        rating matrix (module docstring), else from every user's plan."""
        if config.evaluation.split != "thesis":
            return cls.of_plans(population_plan(data, config), data.n_items)
        testers = population_plan(data, config, rows_of_testers(data, config).tolist())
        ratings = data.ratings
        indptr = np.asarray(ratings.indptr, dtype=np.int64)
        rows = np.repeat(np.arange(data.n_users, dtype=np.int64), np.diff(indptr))
        items = np.asarray(ratings.indices, dtype=np.int64)
        training = np.ones(items.size, dtype=bool)
        for plan in testers:  # her withheld cells, found in her row
            start = int(indptr[plan.row])
            training[start + np.searchsorted(plan.profile.items, plan.withheld)] = False
        return cls(
            testers,
            rows,
            items,
            np.asarray(ratings.data, dtype=np.float64),
            training,
            lambda row: user_id_of(data, row),
            data.n_items,
            np.arange(data.n_users, dtype=np.int64),
        )

    @classmethod
    def of_plans(cls, plans: Sequence[UserPlan], n_items: int | None = None) -> Self:
        """From every user's plan (rows are the plans' rows)."""
        if n_items is None:
            n_items = plans[0].profile.n_items if plans else 0
        sizes = [p.profile.items.size for p in plans]
        rows = np.repeat(np.array([p.row for p in plans], dtype=np.int64), sizes)
        items = _cat([p.profile.items for p in plans], np.int64)
        training = _cat([~np.isin(p.profile.items, p.withheld) for p in plans], np.bool_)
        ids = {p.row: p.user_id for p in plans}
        return cls(
            [p for p in plans if p.withheld.size],
            rows,
            items,
            _cat([p.profile.ratings for p in plans], np.float64),
            training,
            ids.__getitem__,
            n_items,
            np.array(sorted(ids), dtype=np.int64),
        )

    def released(self, holdout: bool) -> BoolArray:
        """Which profile cells each user's profile release perturbs: all of them, or with
        `holdout` her training ratings."""
        return self.training if holdout else np.ones(self.items.size, dtype=bool)

    def popularity(self) -> FloatArray:
        """φ(i): how many users rated item i outside the test cells."""
        return np.bincount(self.items[self.training], minlength=self.n_items).astype(np.float64)


def as_planned(
    plans: PlannedPopulation | Sequence[UserPlan], n_items: int | None = None
) -> PlannedPopulation:
    """`plans` as a `PlannedPopulation` (a list of every user's plans is converted)."""
    if isinstance(plans, PlannedPopulation):
        return plans
    return PlannedPopulation.of_plans(plans, n_items)


def _cat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)


__all__ = ["PlannedPopulation", "as_planned"]
