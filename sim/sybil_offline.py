"""The sybils' answers computed in-process, for sweeps: the aggregator's serving path without
the protocol around it.

`answer_offline` plays what `adversary.sybils.run_sybils` plays through gRPC: the crowd's
profiles join the stored releases, the model is fitted as the aggregator fits it (rows in
user-id order, fold groups by `shared.protocol.fold_of`, the input the model consumes) and each
probe is answered by the aggregator's own calls (`recommend_block`/`predict_block` with the
querying sybil's fold excluded). A sweep over m and k (`bench/attack_sweeps.py`) then costs
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
from privrec.server.models import Recommender, make_model
from privrec.server.training import TRAINING_INPUTS
from privrec.shared.mechanisms.base import Payload
from privrec.shared.protocol import excluded_fold, fold_groups
from privrec.shared.run_config import PublicRunConfig


def answer_offline(
    releases: Mapping[str, Payload],
    run_config: PublicRunConfig,
    knowledge: AdversaryKnowledge,
    settings: SybilSettings,
    *,
    isolate: bool = False,
) -> SybilPlan:
    """The sybil plan of `knowledge` with every probe answered as the aggregator would.

    Args:
        releases: user id → profile release of every real user of the run.
        run_config: the run's public configuration (mechanism, model, folds).
        knowledge: the adversary's side knowledge (targets, candidates).
        settings: the sybils' settings.
        isolate: fit one model per kNN target with her crowd alone (module docstring).
    """
    plan = plan_sybils(knowledge, run_config, settings)
    subjects: list[str | None] = [None]
    if isolate:
        subjects = [*sorted({p.subject for p in plan.probes if p.purpose == "knn"})]
        if any(p.purpose != "knn" for p in plan.probes):
            subjects.append("")  # the membership probes: no crowd
    answered = []
    for subject in subjects:
        crowd = [c for c in plan.crowd if subject is None or c.subject == subject]
        probes = [
            p
            for p in plan.probes
            if subject is None or p.subject == subject or (subject == "" and p.purpose != "knn")
        ]
        model = _fit(releases, run_config, {c.sybil_id: c.profile for c in crowd})
        answered += _answer(model, run_config, probes, knowledge)
    by_key = {(p.purpose, p.subject, p.sybil_id, p.index): p for p in answered}
    return dataclasses.replace(
        plan,
        probes=tuple(by_key[(p.purpose, p.subject, p.sybil_id, p.index)] for p in plan.probes),
    )


def _fit(
    releases: Mapping[str, Payload], run_config: PublicRunConfig, crowd: Mapping[str, Payload]
) -> Recommender:
    """The run's model fitted on the releases and the crowd as the aggregator fits it."""
    rows = dict(releases) | dict(crowd)
    uids = sorted(rows)
    model = make_model(run_config.model_name, run_config.model_params)
    if not isinstance(model, Recommender):
        raise TypeError(f"{run_config.model_name} answers no queries")
    groups = fold_groups(uids, run_config.n_folds, run_config.fold_seed)
    matrix = TRAINING_INPUTS[run_config.capabilities.consumes](
        [rows[u] for u in uids], run_config.mechanism(), run_config.n_items
    )
    model.fit(matrix, exclude_groups=groups)  # type: ignore[arg-type]
    return model


def _answer(
    model: Recommender,
    run_config: PublicRunConfig,
    probes: list[Probe],
    knowledge: AdversaryKnowledge,
) -> list[Probe]:
    answered = []
    for probe in probes:
        fold = excluded_fold(probe.sybil_id, run_config.n_folds, run_config.fold_seed)
        query = (probe.query.indices, probe.query.values)
        if probe.method == "Recommend":
            ((items, scores),) = model.recommend_block([query], probe.n, exclude_groups=[fold])
        else:
            ((scores, _),) = model.predict_block([query], [probe.items], exclude_groups=[fold])
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
