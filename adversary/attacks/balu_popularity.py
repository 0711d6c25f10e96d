"""`balu_popularity`: Balu's popularity baseline (§3.5.2).

"The popularity-based attack in which the score of an item is its prior estimated from the
training data, independent of the given public representation": every item scores π_j, the
fraction of auxiliary users holding it (`itemset_prior.popularity`). The release is used only for
ĉ, the same estimate as the other scorers, so the reconstruction is the ĉ most popular items.
It needs the auxiliary set (`[adversary] auxiliary = "popularity"`).

References:
    R. Balu, PhD thesis, Univ. Rennes 1, 2016, §3.5.1–3.5.2.
"""

from __future__ import annotations

import numpy as np

from privrec.adversary.attacks.base import SideKnowledge
from privrec.adversary.attacks.itemset_base import (
    ItemSetAttack,
    Scores,
    Targets,
    auxiliary_knowledge,
)
from privrec.adversary.attacks.itemset_channel import ItemSetChannel
from privrec.adversary.attacks.itemset_prior import popularity
from privrec.adversary.observations import Observations
from privrec.shared.errors import ValidationError


class PopularityBaseline(ItemSetAttack):
    """Balu's popularity baseline (module docstring).

    Args:
        confidence: level of the confidence interval on c (only reported here).
        sigma_floor: JLT only; unused by the scores.
    """

    name = "balu_popularity"
    knowledge = (
        "item-set releases (for ĉ only) + their public parameters + raw profiles of auxiliary "
        "users (item popularity)"
    )
    needs = frozenset({SideKnowledge.AUXILIARY})

    def _scores(
        self, observations: Observations, channel: ItemSetChannel, targets: Targets
    ) -> Scores:
        aux = observations.auxiliary
        if aux is None:
            raise ValidationError(
                "auxiliary",
                f"{self.name} scores items by their popularity among auxiliary users; run with "
                '[adversary] auxiliary = "popularity"',
            )
        pop = popularity(aux, channel.n_items)
        items = np.arange(channel.n_items, dtype=np.int64)
        return Scores(
            [items] * len(targets.user_ids),
            [pop] * len(targets.user_ids),
            knowledge=" (for ĉ only)" + auxiliary_knowledge(observations),
        )


__all__ = ["PopularityBaseline"]
