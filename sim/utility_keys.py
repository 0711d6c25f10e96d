"""How the report reads a `utility` key: whose figure it is and of which metric family.

The referee names utility figures ``{owner}_{metric}[_{variant}]`` (`sim.report_utility`):
the owner is the run's model (``ppcf``), its non-private counterpart (``baseline_{name}``), a
trivial predictor (``trivial_{name}``) or nobody (a published result's ``recall_at_10``); a
variant is the model's other reading (``unclipped``, ``public_model_only``) or ``chance``.
`parse_utility_key` recovers these parts once, for the figures (`sim.figures`), the summary
table and report.md, which all group a metric with its references by them.

Three families are drawn side by side, one figure each: rating error (MAE, RMSE),
classification (CA, precision, recall, F1) and ranking (precision, recall, NDCG, hit rate,
MRR, coverage and ARP at K, `shared.ranking_metrics`). Anything else (a published result's
recall, an item-frequency error) is drawn with the rating-error figure, on its own axis.
"""

from __future__ import annotations

import dataclasses
import re

from privrec.sim.figures_base import is_count

RATING, RANKING, CLASSIFICATION, OTHER = "rating error", "ranking", "classification", "other"
FAMILIES = (RATING, RANKING, CLASSIFICATION, OTHER)

METRICS: dict[str, tuple[str, str, str, bool]] = {
    # name → (family, label, which way is better, drawn on [0, 1])
    "mae": (RATING, "MAE", "lower is better", False),
    "rmse": (RATING, "RMSE", "lower is better", False),
    "ca": (CLASSIFICATION, "CA", "higher is better", True),
    "precision": (CLASSIFICATION, "precision of like", "higher is better", True),
    "recall": (CLASSIFICATION, "recall of like", "higher is better", True),
    "f1": (CLASSIFICATION, "F1 of like", "higher is better", True),
    "precision_at": (RANKING, "precision@{k}", "higher is better", True),
    "recall_at": (RANKING, "recall@{k}", "higher is better", True),
    "ndcg_at": (RANKING, "NDCG@{k}", "higher is better", True),
    "hit_rate_at": (RANKING, "HR@{k}", "higher is better", True),
    "mrr_at": (RANKING, "MRR@{k}", "higher is better", True),
    "coverage_at": (RANKING, "coverage@{k}", "share of the catalogue shown", True),
    "arp_at": (RANKING, "ARP@{k}", "training ratings per shown item", False),
}
"""Every metric the families know, in the order their panels are drawn."""

_AT = "|".join(name for name in METRICS if name.endswith("_at"))
_PLAIN = "|".join(name for name in METRICS if not name.endswith("_at"))
# the `_at_K` metrics first, so that "precision_at_10" never reads as "precision" + a variant
_KEY = re.compile(
    rf"^(?:(?P<owner>.+?)_)??(?:(?P<at>{_AT})_(?P<k>\d+)|(?P<plain>{_PLAIN}))(?:_(?P<variant>.+))?$"
)
ROLES = ("model", "variant", "reference", "trivial", "chance")
"""Whose bar it is, in the order a panel lists them."""


@dataclasses.dataclass(frozen=True)
class UtilityKey:
    """The parts of one utility key (module docstring).

    Attributes:
        key: the key itself.
        owner: "ppcf", "baseline_pearson_knn", "trivial_user_mean", or "" for nobody.
        metric: a key of `METRICS` ("mae", "ndcg_at", …).
        k: the cut-off of a ranking metric (None otherwise).
        variant: "unclipped", "public_model_only", "chance", … or "".
    """

    key: str
    owner: str
    metric: str
    k: int | None
    variant: str

    @property
    def family(self) -> str:
        """The metric family; a ranking key without an owner (a published neighbour graph's
        recall) and a metric of no family are "other"."""
        family = self._spec()[0]
        return OTHER if family == RANKING and not self.owner else family

    @property
    def panel(self) -> str:
        """The panel this key is drawn in: its metric's label at its K."""
        return self._spec()[1].format(k=self.k)

    @property
    def better(self) -> str:
        """Which way is better for this metric ("lower is better", …; "" for a key of its own)."""
        return self._spec()[2]

    @property
    def unit_interval(self) -> bool:
        """Drawn on [0, 1]: a rate, except the ranking metrics, whose values are often a few
        hundredths (full ranking over a thousand items) and are drawn to their own scale."""
        return self._spec()[3] and self.family != RANKING

    def _spec(self) -> tuple[str, str, str, bool]:
        if self.metric in METRICS:
            return METRICS[self.metric]
        return OTHER, self.metric.replace("_", " "), "", False  # a key of its own

    @property
    def role(self) -> str:
        """One of `ROLES`."""
        if self.variant == "chance":
            return "chance"
        if self.owner.startswith("baseline"):
            return "reference"
        if self.owner.startswith("trivial"):
            return "trivial"
        return "variant" if self.variant else "model"

    def label(self, model: str) -> str:
        """The bar's label: "ppcf", "ppcf (unclipped)", "non-private: pearson knn",
        "trivial: user mean", "chance"; `model` names an owner-less key's model."""
        role, owner = self.role, self.owner
        if role == "chance":
            return "chance"
        if role == "reference":
            name = owner.removeprefix("baseline").strip("_") or "reference"
            return "non-private: " + name.replace("_", " ")
        if role == "trivial":
            return "trivial: " + owner.removeprefix("trivial").strip("_").replace("_", " ")
        name = owner or model
        return (f"{name} ({self.variant})" if self.variant else name).replace("_", " ")


def parse_utility_key(key: str) -> UtilityKey | None:
    """The parts of `key`; None for a count or a neighbour coverage (tables only). A key of
    no known metric is a metric of its own, owned by nobody (``top_10_recall``)."""
    if is_count(key) or key.endswith("_coverage"):
        return None
    m = _KEY.match(key)
    owner = (m.group("owner") or "") if m else ""
    if m is None or re.search(r"(^|_)\d+$", owner):  # "top_10_recall" is no owner's recall
        return UtilityKey(key, "", key, None, "")
    metric = m.group("at") or m.group("plain")
    k = int(m.group("k")) if m.group("k") else None
    return UtilityKey(key, owner, metric, k, m.group("variant") or "")


__all__ = [
    "CLASSIFICATION",
    "FAMILIES",
    "METRICS",
    "OTHER",
    "RANKING",
    "RATING",
    "ROLES",
    "UtilityKey",
    "parse_utility_key",
]
