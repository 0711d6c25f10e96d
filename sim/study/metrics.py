"""Which columns of a study's table a reader looks at first, and what each is compared with.

The table (`sim.study.table`) has every scalar of every report; the study's markdown and its
figures show the headline ones, each beside its references:

* utility: each of the model's own metrics (``utility.ppcf_mae``, ``utility.ppcf_ndcg_at_10``)
  beside the non-private counterpart (``utility.baseline_*``), the trivial predictors
  (``utility.trivial_*``) and chance (``*_chance``) of the same metric at the same K, read by
  the report's own parser of the referee's keys (`sim.utility_keys.parse_utility_key`);
* attacks: each attack's declared headline metrics (`sim.figures.attack_headlines`) beside
  their free baselines and chance levels;
* privacy: the formal ε per release, and the median of every user's composed ε.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from privrec.sim.figures import attack_headlines
from privrec.sim.utility_keys import RANKING, parse_utility_key

EPSILON_COLUMNS = (
    ("privacy.per_user.per_user_epsilon.median", "median per-user composed ε"),
    ("privacy.epsilon", "ε per release"),
)
"""The ledger's ε, then the mechanism's: a trade-off drawn against ε uses the first present."""
BRIEF_RANKING = ("precision_at", "recall_at", "ndcg_at")
"""The ranking metrics study.md's table shows (at the smallest K); study.json has them all."""


@dataclasses.dataclass(frozen=True)
class Headline:
    """One headline column and the columns drawn beside it.

    Attributes:
        column: the table column (``utility.ppcf_mae``).
        label: what it is, for an axis (``MAE``, ``NDCG@10``, ``RMSE of ẑ on genuine cells``).
        better: which way is better, in words ("lower is better"), or "".
        references: (column, label) of its references present in the table.
        section: "utility", "attacks" or "privacy".
        owner: whose figure it is: the model ("ppcf"), the attack ("rpt_bayes"), or "".
        primary: the first headline of its owner (the trade-off figure draws these).
        family: a utility metric's family ("rating error", "ranking", "classification", …).
        brief: shown in study.md's table (study.json has every column).
    """

    column: str
    label: str
    better: str
    references: tuple[tuple[str, str], ...]
    section: str
    owner: str = ""
    primary: bool = True
    family: str = ""
    brief: bool = True


def _utility_headlines(keys: Sequence[str]) -> list[Headline]:
    parsed = [k for key in keys if (k := parse_utility_key(key)) is not None]
    model = next((k.owner for k in parsed if k.role == "model" and k.owner), "the model")
    ks = sorted({k.k for k in parsed if k.k is not None})
    out: list[Headline] = []
    for key in parsed:
        if key.role != "model":
            continue
        refs = tuple(
            (f"utility.{o.key}", o.label(model))
            for o in parsed
            if (o.metric, o.k) == (key.metric, key.k)
            and o.role in ("reference", "trivial", "chance")
        )
        brief = key.family != RANKING or (key.metric in BRIEF_RANKING and key.k == ks[0])
        out.append(
            Headline(
                f"utility.{key.key}",
                key.panel,
                key.better,
                refs,
                "utility",
                key.owner or model,
                not out,
                key.family,
                brief,
            )
        )
    return out


def headlines(columns: Sequence[str], attack_kinds: Mapping[str, str | None]) -> list[Headline]:
    """The headline columns among `columns` (module docstring); `attack_kinds` gives each
    attack's output kind (``report.json``'s ``attacks[].kind``)."""
    present = set(columns)
    out = _utility_headlines(
        [c.removeprefix("utility.") for c in columns if c.startswith("utility.")]
    )
    for name, kind in attack_kinds.items():
        prefix = f"attacks.{name}."
        metrics = {c.removeprefix(prefix): 0.0 for c in columns if c.startswith(prefix)}
        for n, h in enumerate(attack_headlines(kind, metrics)):
            refs = tuple((prefix + k, lab) for k, lab in h.references if prefix + k in present)
            better = f"{h.better}: the attack does better" if h.better else ""
            out.append(Headline(prefix + h.metric, h.label, better, refs, "attacks", name, n == 0))
    out += [Headline(c, lab, "", (), "privacy") for c, lab in EPSILON_COLUMNS if c in present]
    return out


def is_number(value: Any) -> bool:
    """An int or float (not a bool): a value statistics apply to."""
    return isinstance(value, int | float) and not isinstance(value, bool)


__all__ = ["BRIEF_RANKING", "EPSILON_COLUMNS", "Headline", "headlines", "is_number"]
