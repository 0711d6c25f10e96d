"""Which columns of a study's table a reader looks at first, and what each is compared with.

The table (`sim.study.table`) has every scalar of every report; the study's markdown and its
figures show the headline ones, each beside its references:

* utility: each of the model's own metrics (``utility.ppcf_mae``) beside the non-private
  counterpart (``utility.baseline_*``), the trivial predictors (``utility.trivial_*``) and
  chance (``*_chance``) of the same metric, by the referee's key convention
  ``{owner}_{metric}[_{variant}]``;
* attacks: each attack's declared headline metrics (`sim.figures.attack_headlines`) beside
  their free baselines and chance levels;
* privacy: the formal ε per release, and the median of every user's composed ε.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from privrec.sim.figures import attack_headlines, is_count

EPSILON_COLUMNS = (
    ("privacy.per_user.per_user_epsilon.median", "median per-user composed ε"),
    ("privacy.epsilon", "ε per release"),
)
"""The ledger's ε, then the mechanism's: a trade-off drawn against ε uses the first present."""

_FAMILY = re.compile(
    r"(?:^|_)(?P<metric>mae|rmse|ca|f1|precision|recall|(?:precision|recall|ndcg|hit_rate|mrr)"
    r"_at_\d+)(?:_|$)"
)
_LOWER_IS_BETTER = ("mae", "rmse")


@dataclasses.dataclass(frozen=True)
class Headline:
    """One headline column and the columns drawn beside it.

    Attributes:
        column: the table column (``utility.ppcf_mae``).
        label: what it is, for an axis (``MAE``, ``rpt_bayes: RMSE of ẑ on genuine cells``).
        better: "lower", "higher" or "".
        references: (column, label) of its references present in the table.
        section: "utility", "attacks" or "privacy".
        owner: whose figure it is: the model ("ppcf"), the attack ("rpt_bayes"), or "".
        primary: the first headline of its owner (the trade-off figure draws these).
    """

    column: str
    label: str
    better: str
    references: tuple[tuple[str, str], ...]
    section: str
    owner: str = ""
    primary: bool = True


def utility_parts(key: str) -> tuple[str, str, str] | None:
    """(owner, metric, variant) of a utility key, or None for a key of no known family
    (``ppcf_mae_unclipped`` → ("ppcf", "mae", "unclipped"))."""
    m = _FAMILY.search(key)
    if m is None:
        return None
    return key[: m.start()].strip("_"), m.group("metric"), key[m.end() :].strip("_")


def utility_role(key: str) -> str:
    """ "model", "variant", "reference" (``baseline_*``), "trivial" (``trivial_*``) or
    "chance" (``*_chance``)."""
    parts = utility_parts(key)
    owner, variant = (parts[0], parts[2]) if parts else ("", "")
    if variant == "chance" or key.endswith("_chance"):
        return "chance"
    if owner.startswith("baseline"):
        return "reference"
    if owner.startswith("trivial"):
        return "trivial"
    return "variant" if variant else "model"


def _reference_label(key: str, role: str) -> str:
    owner = (utility_parts(key) or ("", "", ""))[0]
    if role == "reference":
        return "non-private " + (owner.removeprefix("baseline").strip("_") or "").replace("_", " ")
    if role == "trivial":
        return "trivial: " + owner.removeprefix("trivial").strip("_").replace("_", " ")
    return "chance"


def _metric_label(metric: str) -> str:
    m = re.fullmatch(r"(\w+?)_at_(\d+)", metric)
    if m:
        name = {"hit_rate": "HR", "ndcg": "NDCG", "mrr": "MRR"}.get(m.group(1), m.group(1))
        return f"{name}@{m.group(2)}"
    return metric.upper() if metric in ("mae", "rmse", "ca", "f1") else metric


def headlines(columns: Sequence[str], attack_kinds: Mapping[str, str | None]) -> list[Headline]:
    """The headline columns among `columns` (module docstring); `attack_kinds` gives each
    attack's output kind (``report.json``'s ``attacks[].kind``)."""
    present = set(columns)
    out: list[Headline] = []
    utility = [c.removeprefix("utility.") for c in columns if c.startswith("utility.")]
    for key in utility:
        parts = utility_parts(key)
        if parts is None or is_count(key) or utility_role(key) != "model":
            continue
        metric = parts[1]
        refs = tuple(
            (f"utility.{other}", _reference_label(other, utility_role(other)))
            for other in utility
            if (p := utility_parts(other)) is not None
            and p[1] == metric
            and utility_role(other) in ("reference", "trivial", "chance")
        )
        better = "lower" if metric in _LOWER_IS_BETTER else "higher"
        first = not any(h.section == "utility" for h in out)
        label = _metric_label(metric)
        out.append(Headline(f"utility.{key}", label, better, refs, "utility", parts[0], first))
    for name, kind in attack_kinds.items():
        prefix = f"attacks.{name}."
        metrics = {c.removeprefix(prefix): 0.0 for c in columns if c.startswith(prefix)}
        for n, h in enumerate(attack_headlines(kind, metrics)):
            refs = tuple((prefix + k, lab) for k, lab in h.references if prefix + k in present)
            column = prefix + h.metric
            out.append(Headline(column, h.label, h.better, refs, "attacks", name, n == 0))
    out += [Headline(c, lab, "", (), "privacy") for c, lab in EPSILON_COLUMNS if c in present]
    return out


def is_number(value: Any) -> bool:
    """An int or float (not a bool): a value statistics apply to."""
    return isinstance(value, int | float) and not isinstance(value, bool)


__all__ = [
    "EPSILON_COLUMNS",
    "Headline",
    "headlines",
    "is_number",
    "utility_parts",
    "utility_role",
]
