"""The sybils' answers computed in-process, for sweeps: the aggregator's serving path without
the protocol around it.

`answer_offline` plays what `adversary.sybils.run_sybils` plays through gRPC: the crowd's
profiles join the stored releases, and the model is fitted and each probe answered by the
aggregator's own path (`server.fitting`: rows in user-id order, fold groups, the catalogue's
item features, the input the model consumes; each answer with the querying sybil's fold
excluded). A sweep over m and k (`bench/attack_sweeps.py`) then costs
model fits instead of protocol runs; `tests/integration` checks that it gives what a real run
gives.

With `isolate`, each kNN target is attacked as if she were the only one: the model is fitted
with her crowd alone. In one run several targets' crowds all rate every item, so one target's
crowd can outweigh another target in her items' neighbourhoods (the crowds interfere); a
sweep measuring the attack itself isolates them, a run shows the interference.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from privrec.adversary.knowledge import AdversaryKnowledge
from privrec.adversary.sybils import (
    Probe,
    SybilPlan,
    SybilSettings,
    plan_sybils,
    scores_as_ratings,
)
from privrec.server.fitting import (
    FitRecipe,
    answer_predicts,
    answer_recommends,
    recommender,
)
from privrec.server.models import Recommender
from privrec.shared.mechanisms.base import Payload
from privrec.shared.run_config import PublicRunConfig


def answer_offline(
    releases: Mapping[str, Payload],
    run_config: PublicRunConfig,
    knowledge: AdversaryKnowledge,
    settings: SybilSettings,
    *,
    item_features: np.ndarray | None = None,
    isolate: bool = False,
) -> SybilPlan:
    """The sybil plan of `knowledge` with every probe answered as the aggregator would.

    Args:
        releases: user id → profile release of every real user of the run.
        run_config: the run's public configuration (mechanism, model, folds).
        knowledge: the adversary's side knowledge (targets, candidates).
        settings: the sybils' settings.
        item_features: the catalogue's public item features (`RatingData.genres`), which the
            aggregator hands to a model that needs them (e.g. `cluster_ppcf`).
        isolate: fit one model per kNN target with her crowd alone (module docstring).
    """
    plan = plan_sybils(knowledge, run_config, settings)
    subjects: list[str | None] = [None]
    if isolate:
        subjects = [*sorted({p.subject for p in plan.probes if p.purpose == "knn"})]
        if any(p.purpose != "knn" for p in plan.probes):
            subjects.append("")  # the membership probes: no crowd
    recipe = FitRecipe.of_public(run_config, item_features)
    answered = []
    for subject in subjects:
        crowd = [c for c in plan.crowd if subject is None or c.subject == subject]
        probes = [
            p
            for p in plan.probes
            if subject is None or p.subject == subject or (subject == "" and p.purpose != "knn")
        ]
        rows = dict(releases) | {c.sybil_id: c.profile for c in crowd}
        model = recommender(recipe.fit_releases(rows), run_config.model_name)
        answered += _answer(model, recipe, run_config, probes, knowledge)
    by_key = {(p.purpose, p.subject, p.sybil_id, p.index): p for p in answered}
    return dataclasses.replace(
        plan,
        probes=tuple(by_key[(p.purpose, p.subject, p.sybil_id, p.index)] for p in plan.probes),
    )


def _answer(
    model: Recommender,
    recipe: FitRecipe,
    run_config: PublicRunConfig,
    probes: list[Probe],
    knowledge: AdversaryKnowledge,
) -> list[Probe]:
    answered = []
    for probe in probes:
        fold = recipe.fold(probe.sybil_id)
        query = (probe.query.indices, probe.query.values)
        if probe.method == "Recommend":
            ((items, scores),) = answer_recommends(model, [query], probe.n, [fold])
        else:
            ((scores, _),) = answer_predicts(model, [query], [probe.items], [fold])
            items = probe.items
        answered.append(
            dataclasses.replace(
                probe,
                answer_items=np.asarray(items, dtype=np.int64),
                answer_scores=np.asarray(scores, dtype=np.float64),
                answer_ratings=scores_as_ratings(run_config, probe, scores, knowledge),
            )
        )
    return answered


__all__ = ["answer_offline"]
