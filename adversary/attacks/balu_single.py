"""`balu_single`: Balu's single decoder on BLIP and JLT releases (§3.3.1, §3.4.1).

Each item is tested on its own against the release: BLIP's maximum-likelihood score (3.27)–(3.29)
over the ≤ K positions of its codeword, or, for JLT, the per-coordinate likelihood ratio of
§3.2.2's two Gaussian models (our extension; `itemset_channel`). Every one of the N items is
scored (O(N) per user, as §3.4.1 says); the reconstruction is the top-ĉ items (§3.5.2).
Knowledge: the releases and the public parameters only (plus, for BLIP at ε = 0 where the release
says nothing about c, the auxiliary users' mean profile size for ĉ).

References:
    R. Balu, PhD thesis, Univ. Rennes 1, 2016, §3.4.1, Eqs. (3.27)–(3.29); [AGK12].
"""

from __future__ import annotations

import numpy as np

from privrec.adversary.attacks.itemset_base import ItemSetAttack, Scores, Targets
from privrec.adversary.attacks.itemset_channel import ItemSetChannel
from privrec.adversary.observations import Observations


class SingleDecoder(ItemSetAttack):
    """Balu's single decoder (module docstring).

    Args:
        confidence: level of the confidence interval on c (only reported here).
        sigma_floor: JLT only: the smallest σ the likelihood ratio assumes.
    """

    name = "balu_single"
    knowledge = "item-set releases (BLIP or JLT) + their public parameters"

    def _scores(
        self, observations: Observations, channel: ItemSetChannel, targets: Targets
    ) -> Scores:
        scores = channel.single_scores(targets.releases, targets.sizes.c_hat)
        items = np.arange(channel.n_items, dtype=np.int64)
        return Scores([items] * len(targets.user_ids), list(scores))


__all__ = ["SingleDecoder"]
