"""What a reproduction is: one published table or figure, run through the protocol's classes.

An entry (`Reproduction` subclass) names the source, lists the published numbers (`Published`)
and the claims the paper makes without numbers (`Claim`: an ordering, a trend), and implements
`run`, one repeat of the experiment, returning `key → value` for every published key. The runner
(`sim.reproduce.runner`) repeats it, compares, and writes the table, JSON and plot.

Verdicts, per published number: "reproduced" when the mean over repeats is within `REL_TOL`
(2 %) of the published value, "differs" otherwise (with the entry's known reason, if any); per
claim: "holds" or "fails". Entries never tune toward a published number.
"""

from __future__ import annotations

import abc
import dataclasses
import itertools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import ClassVar

REL_TOL = 0.02
"""Relative distance under which a published number counts as reproduced."""

Progress = Callable[[str, int, int], None]
"""(what is being done, steps done, steps in all)."""


@dataclasses.dataclass(frozen=True)
class Published:
    """One number the paper prints.

    Attributes:
        key: the key `Reproduction.run` reports the measured value under.
        label: the row's label, as the paper names it (e.g. "PPCF, σ_max = 1").
        value: the printed number, or None when the paper gives none (ours is still shown).
        metric: what the number is ("MAE", "RMSE", "recall@10", ...).
        reason: why ours is known to differ, when it does (shown with the verdict).
    """

    key: str
    label: str
    value: float | None
    metric: str = "MAE"
    reason: str = ""


@dataclasses.dataclass(frozen=True)
class Claim:
    """A statement the paper makes without a number, checked on the measured means.

    Attributes:
        text: the claim in words, e.g. "PPCF is worse than CF".
        holds: the check, on key → mean value.
    """

    text: str
    holds: Callable[[Mapping[str, float]], bool]


def ordered(*keys: str, increasing: bool = True) -> Callable[[Mapping[str, float]], bool]:
    """A claim's check: the values of `keys` are (strictly) increasing, or decreasing."""

    def check(values: Mapping[str, float]) -> bool:
        seq = [values[k] for k in keys]
        pairs = list(itertools.pairwise(seq))
        return all(a < b for a, b in pairs) if increasing else all(a > b for a, b in pairs)

    return check


@dataclasses.dataclass(frozen=True)
class RunContext:
    """What one repeat gets.

    Attributes:
        seed: the repeat's seed (0, 1, … for the repeats).
        data: a dataset path given with `--data` (e.g. ML-1M's ratings.dat), or None.
        quick: run a small version (the smoke tests use it): same code, tiny data.
        work_dir: a directory of its own for run directories and scratch files.
        progress: report progress within the repeat.
    """

    seed: int
    data: Path | None
    quick: bool
    work_dir: Path
    progress: Progress


class Reproduction(abc.ABC):
    """One published table or figure (see the module docstring)."""

    name: ClassVar[str]
    title: ClassVar[str]
    source: ClassVar[str]
    published: ClassVar[tuple[Published, ...]]
    claims: ClassVar[tuple[Claim, ...]] = ()
    default_repeats: ClassVar[int] = 1
    x_label: ClassVar[str] = ""
    """For entries whose rows form a curve: the plot's x axis (see `curve`)."""
    x_scale: ClassVar[str] = "linear"
    """The x axis scale of a curve plot: "linear", "log" or "symlog" (linear near 0)."""

    @abc.abstractmethod
    def run(self, ctx: RunContext) -> dict[str, float]:
        """One repeat: the measured value of every published key (and any extra keys)."""

    def curve(self) -> dict[str, list[tuple[float, str]]]:
        """Series name → [(x, key), ...] when the rows form curves (the plot draws them in the
        paper's form); empty for a table (the plot draws bars)."""
        return {}

    def bands(self) -> dict[str, list[tuple[str, str]]]:
        """Series name → [(low key, high key), ...] aligned with `curve()`'s points, when the
        paper draws a band of its own around a curve (e.g. Balu's 10 %/90 % quantiles); the
        plot then shades it instead of ±1 sd over repeats. The keys are measured values
        (extra keys are fine). Empty by default."""
        return {}


__all__ = [
    "REL_TOL",
    "Claim",
    "Progress",
    "Published",
    "Reproduction",
    "RunContext",
    "ordered",
]
