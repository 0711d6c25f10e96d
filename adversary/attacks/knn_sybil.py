"""The kNN (sybil) attack: a target's other items from the recommendations to sybils.

Zhu 2014 §2.3, after Calandrino, Kilzer, Narayanan, Felten, Shmatikov, "'You might also like:'
privacy risks of collaborative filtering", IEEE S&P 2011: an attacker who knows the
recommendation algorithm, its k and m items of a target user's history creates sybils with
those m items; with high probability the target is among each sybil's k nearest neighbours and
the others are sybils, so "any recommended item not among the m items is an item u_a rated".

How the sybils run (enrolled through the real protocol, a crowd per target and one querying
sybil, adapted to privrec's per-item neighbour pools) is in `adversary.sybils`; this attack
reads only what they were answered: for each target, the `Recommend` lists (best first, the
m query items excluded by the server). Its knowledge is the targets' m known ratings and the
public run config; NOT the transcript (an aggregator that sees raw releases has no need of
sybils; this is the attacker of Zhu's trusted-curator setting, an outside user).

Inference. Every recommended item is inferred (Calandrino's rule); the estimate of item j is
its rank score (n − rank_j)/n averaged over the target's queries (1 for the top item, 0 when it
was not recommended), so the referee can also score the top N. For a deterministic model one
query says everything; a randomised one (Zhu's PNCF) is queried `knn_queries` times and the
average is a vote.

The referee (`sim.referee_attacks`) scores precision and recall of the top 10 and of every
recommended item against the target's true items outside the m, beside the same sizes of the
most popular items (an attacker's know-nothing guess) and chance.
"""

from __future__ import annotations

import numpy as np

from privrec.adversary.attacks.base import (
    Attack,
    AttackOutput,
    OutputKind,
    SideKnowledge,
    UserEstimate,
)
from privrec.adversary.observations import Observations


class KnnSybilAttack(Attack):
    """Infer each target's other items from the sybils' Recommend answers (module docstring).

    References:
        Zhu, PhD thesis, Deakin University, 2014, §2.3; Calandrino et al., IEEE S&P 2011.
    """

    fits_on_sample = False  # scored on other users than those whose releases it reads
    name = "knn_sybil"
    knowledge = (
        "Recommend answers to its own sybils + m known ratings of each target + public run "
        "config (model, k); not the transcript"
    )
    applies_to = ("rpt", "raw")
    needs = frozenset({SideKnowledge.KNN_TARGETS})

    def _fit(self, observations: Observations) -> AttackOutput:
        plan = observations.sybils
        probes = observations.probes(
            "knn", "no kNN sybil answers observed (set [adversary] knn_targets)"
        )
        known = {t.label: t for t in observations.knowledge.targets}
        m = observations.n_items
        per_user: dict[str, UserEstimate] = {}
        lengths = []
        for label in sorted({p.subject for p in probes}):
            mine = [p for p in probes if p.subject == label]
            votes = np.zeros(m)
            for p in mine:
                items = p.answer_items[(p.answer_items >= 0) & (p.answer_items < m)]
                if p.n and items.size:
                    votes[items] += (p.n - np.arange(items.size)) / p.n
            votes /= len(mine)
            if label in known:
                votes[known[label].items] = 0.0  # the attacker's own m items are not inferred
            idx = np.flatnonzero(votes > 0).astype(np.int64)
            per_user[label] = UserEstimate(idx, votes[idx].copy())
            lengths.append(idx.size)
        return AttackOutput(
            attack=self.name,
            kind=OutputKind.ITEM_HAT,
            knowledge=self.knowledge,
            per_user=per_user,
            diagnostics={
                "targets": float(len(per_user)),
                "queries": float(len(probes)),
                "mean_inferred_items": float(np.mean(lengths)),
                "crowd_per_target": float(
                    len(plan.crowd) / max(len(per_user), 1) if plan is not None else 0.0
                ),
            },
        )


__all__ = ["KnnSybilAttack"]
