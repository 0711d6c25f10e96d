"""The referee's ranking evaluation: top-K lists of every model that can rank, scored against
each test user's withheld ratings (`shared.ranking_metrics`).

What is ranked. Each test user's candidates are every item she has not rated in training (her
withheld items and every item she never rated: full ranking, the default; a rating a split
set aside for validation is hers and never a candidate), or, with
`[evaluation] candidates = "sampled"`, her withheld items and `negatives` items drawn
uniformly from those she never rated (never from her test items: negatives drawn from test
items inflate HR@10 to 1.0, PFedRec issue 3). The draw comes from her stream ``("evaluation",
"negatives", user id)`` and is written to `RUN_DIR/evaluation/negatives.npz`; the report holds
its SHA-256. Her relevant items are the withheld items rated at least `relevance_threshold`;
users without one are not ranked (their count is reported).

Who scores. A `Scorer` scores the candidates of a block of test users:

* `served_scorer`: the run's own model as the aggregator fitted it (restored from the store,
  `server.models.persistence`), answering the very query release each test user sent
  (read from the transcript) with her fold left out, as the aggregator answered her Predict:
  the ranking she would read from the scores of every item. Ranking by the raw score is her
  ranking whatever the score kind: de-normalising a z-score (Bilge Eq 2.5) is increasing,
  clipping would only add ties. An item whose score no training row supports (zero
  neighbours) comes after every item with support, as `Recommender.recommend_block` drops it.
* `local_scorer`: a `Serving.LOCAL` model's published parameters with the model's local rule
  on her training ratings (what each user computes herself).
* `recommender_scorer`: any fitted `Recommender` with given queries (the referee's
  non-private references on the true ratings).
* `popularity_scorer` (`sim.referee_trivial`): the popularity ranking.

This is a measurement of what the model would answer, not a run event: a deployment in which
users asked `Recommend` would pay the model's per-answer privacy cost once more; the report's
ledger counts the answers the run made.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from privrec.server.fitting import answer_predicts
from privrec.server.models import MODELS, Recommender
from privrec.server.models.base import Model
from privrec.server.models.persistence import read_model, restore_model
from privrec.server.store import Store
from privrec.shared.config import ExperimentConfig
from privrec.shared.data.dataset import RatingData
from privrec.shared.local_prediction import LOCAL_PREDICTORS
from privrec.shared.population import UserPlan
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.protocol import excluded_fold
from privrec.shared.ranking_metrics import ranking_scores, top_k
from privrec.shared.run_config import PublicRunConfig
from privrec.shared.seeding import rng_for
from privrec.shared.serde import payload_from_proto, write_npz
from privrec.shared.types import BoolArray, FloatArray, IntArray
from privrec.sim.planned_population import PlannedPopulation, as_planned

BLOCK = 256
"""Test users scored in one model block (bounds the candidates' scores held at once)."""

Scored = tuple[FloatArray, BoolArray]
"""A user's candidate scores and whether a training row supports each."""
Scorer = Callable[[Sequence[int]], list[Scored]]
"""Scores the candidates of the task's users at the given positions."""


@dataclasses.dataclass(frozen=True)
class RankingTask:
    """Who is ranked, over which candidates, against what.

    Attributes:
        plans: the ranked test users' plans (each has at least one relevant item).
        candidates: per user, the items ranked (sorted).
        relevant: per user, her withheld items rated at least the threshold.
        ks: the cut-offs K.
        n_items: the catalogue size.
        popularity: φ(i), the number of training ratings of each item (ARP).
        unranked: test users left out for want of a relevant item.
        sample_sha256: the SHA-256 of the written negative sample ("" for full ranking).
    """

    plans: list[UserPlan]
    candidates: list[IntArray]
    relevant: list[IntArray]
    ks: tuple[int, ...]
    n_items: int
    popularity: FloatArray
    unranked: int
    sample_sha256: str = ""

    def protocol(self, config: ExperimentConfig) -> dict[str, object]:
        """The ranking protocol as the report states it."""
        ev = config.evaluation
        out: dict[str, object] = {
            "candidates": ev.candidates,
            "relevance_threshold": ev.relevance_threshold,
            "k": list(self.ks),
            "ranked_users": len(self.plans),
            "users_without_relevant_item": self.unranked,
            "mean_candidates": float(np.mean([c.size for c in self.candidates])),
        }
        if ev.candidates == "sampled":
            out |= {"negatives": ev.negatives, "sample_sha256": self.sample_sha256}
        return out


def training_popularity(n_items: int, plans: Sequence[UserPlan]) -> FloatArray:
    """φ(i): how many users rated item i outside the test cells (every rating but the
    withheld ones)."""
    counts = np.zeros(n_items)
    for plan in plans:
        counts[plan.profile.items] += 1.0
        counts[plan.withheld] -= 1.0
    return counts


def ranking_task(
    config: ExperimentConfig,
    plans: PlannedPopulation | Sequence[UserPlan],
    data: RatingData,
    out_dir: Path | None,
) -> RankingTask | None:
    """The ranking task of the run's test users (None when nobody can be ranked); with
    sampled candidates the sample is written to `out_dir/evaluation/negatives.npz`. A rating
    the split set aside (validation) is hers: never a candidate. `plans`: the run's
    `PlannedPopulation` (or every user's plan)."""
    n_items = data.n_items
    ev = config.evaluation
    population = as_planned(plans, n_items)
    testers = population.testers
    ranked, candidates, relevant = [], [], []
    for plan in testers:
        rel = plan.withheld[plan.withheld_ratings() >= ev.relevance_threshold]
        if not rel.size:
            continue
        unrated = np.ones(n_items, dtype=bool)
        unrated[data.user_row(plan.row)[0]] = False  # every rating she has in the data set
        if ev.candidates == "all":
            unrated[plan.withheld] = True
            cand = np.flatnonzero(unrated)
        else:
            never = np.flatnonzero(unrated)
            rng = rng_for(config.run.seed, "evaluation", "negatives", plan.user_id)
            drawn = rng.choice(never, size=min(ev.negatives, never.size), replace=False)
            cand = np.union1d(plan.withheld, drawn)
        ranked.append(plan)
        candidates.append(cand.astype(np.int64))
        relevant.append(rel)
    if not ranked:
        return None
    digest = ""
    if ev.candidates == "sampled" and out_dir is not None:
        digest = _write_sample(out_dir, ranked, candidates)
    return RankingTask(
        plans=ranked,
        candidates=candidates,
        relevant=relevant,
        ks=tuple(sorted(set(ev.ranking_k))),
        n_items=n_items,
        popularity=population.popularity(),
        unranked=len(testers) - len(ranked),
        sample_sha256=digest,
    )


def _write_sample(out_dir: Path, plans: Sequence[UserPlan], candidates: list[IntArray]) -> str:
    """Write each ranked user's candidates (`evaluation/negatives.npz`: user_ids, offsets,
    items) and return the SHA-256 of the file's arrays."""
    offsets = np.concatenate([[0], np.cumsum([c.size for c in candidates])]).astype(np.int64)
    arrays = {
        "user_ids": np.array([p.user_id for p in plans], dtype=str),
        "offsets": offsets,
        "items": np.concatenate(candidates).astype(np.int64),
    }
    path = out_dir / "evaluation" / "negatives.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_npz(path, arrays)
    h = hashlib.sha256()
    for key in ("user_ids", "offsets", "items"):
        h.update(np.ascontiguousarray(arrays[key]).tobytes())
    return h.hexdigest()


def score_ranking(task: RankingTask, scorer: Scorer, prefix: str) -> dict[str, float]:
    """Rank every user's candidates with `scorer` and score the top-K lists; keys are
    ``{prefix}_{metric}_at_{K}``."""
    lists: list[IntArray] = []
    k_max = max(task.ks)
    for start in range(0, len(task.plans), BLOCK):
        positions = range(start, min(start + BLOCK, len(task.plans)))
        for pos, (scores, evidence) in zip(positions, scorer(positions), strict=True):
            lists.append(top_k(task.candidates[pos], scores, k_max, evidence))
    got = ranking_scores(lists, task.relevant, task.ks, task.n_items, task.popularity)
    return {f"{prefix}_{k}": v for k, v in got.items()}


# ------------------------------------------------------------------------------------ scorers
def recommender_scorer(
    model: Recommender,
    task: RankingTask,
    queries: Sequence[tuple[IntArray, FloatArray]],
    groups: Sequence[int | None],
) -> Scorer:
    """The model's answers (`server.fitting.answer_predicts`, the aggregator's own call) for
    each user's candidates, with her query and excluded group."""

    def score(positions: Sequence[int]) -> list[Scored]:
        answers = answer_predicts(
            model,
            [queries[p] for p in positions],
            [task.candidates[p] for p in positions],
            [groups[p] for p in positions],
        )
        return [(scores, counts > 0) for scores, counts in answers]

    return score


def local_scorer(published: dict[str, np.ndarray], rule: str, task: RankingTask) -> Scorer:
    """Each user's local prediction of her candidates from the published parameters."""
    predict = LOCAL_PREDICTORS[rule]

    def score(positions: Sequence[int]) -> list[Scored]:
        out = []
        for p in positions:
            q = task.plans[p].training_profile()
            s = np.asarray(predict(published, q.items, q.ratings, task.candidates[p]))
            out.append((s, np.ones(s.size, dtype=bool)))
        return out

    return score


def stored_model(out_dir: Path) -> Model:
    """The model the aggregator fitted, restored from its store (the final fit, or the
    two-tier model after its last round).

    Raises:
        DataError: the store holds no fitted model.
    """
    from privrec.shared.errors import DataError

    store = Store(out_dir / "server.sqlite", read_only=True)
    try:
        # read array by array from a temporary copy: the archive's bytes are never held
        with store.state_file("final/model", "two_tier/model") as archive:
            if archive is None:
                raise DataError(f"{out_dir / 'server.sqlite'} holds no fitted model")
            saved = read_model(archive)
    finally:
        store.close()
    return restore_model(saved, MODELS)


def recorded_queries(out_dir: Path, user_ids: set[str]) -> dict[str, tuple[IntArray, FloatArray]]:
    """The first Predict query release of each of `user_ids` in the transcript, as
    (indices, values)."""
    store = Store(out_dir / "server.sqlite", read_only=True)
    out: dict[str, tuple[IntArray, FloatArray]] = {}
    try:
        for row in store.transcript(methods=("Predict",)):
            query = pb.PredictRequest.FromString(row.request).query
            if query.user_id in user_ids and query.user_id not in out:
                _, payload = payload_from_proto(query)
                indices = np.asarray(getattr(payload, "indices", np.zeros(0)), dtype=np.int64)
                values = np.asarray(getattr(payload, "values", np.zeros(0)), dtype=np.float64)
                out[query.user_id] = (indices, values)
    finally:
        store.close()
    return out


def served_scorer(out_dir: Path, run_config: PublicRunConfig, task: RankingTask) -> Scorer:
    """The run's model ranking for each test user (module docstring): the stored model
    answering her recorded query (`Serving.QUERIES`), or her local rule on the published
    parameters (`Serving.LOCAL`).

    Raises:
        DataError: no fitted model in the store, or a test user with no recorded query.
    """
    from privrec.shared.errors import DataError

    model = stored_model(out_dir)
    if run_config.local_prediction:
        return local_scorer(
            dict(model.public_arrays()), run_config.capabilities.local_predictor, task
        )
    if not isinstance(model, Recommender):
        raise DataError(f"model {run_config.model_name!r} answers no queries: nothing to rank")
    uids = [p.user_id for p in task.plans]
    queries = recorded_queries(out_dir, set(uids))
    missing = [u for u in uids if u not in queries]
    if missing:
        raise DataError(f"no recorded query of test user {missing[0]!r} ({len(missing)} missing)")
    groups = [excluded_fold(u, run_config.n_folds, run_config.fold_seed) for u in uids]
    return recommender_scorer(model, task, [queries[u] for u in uids], groups)


__all__ = [
    "RankingTask",
    "Scorer",
    "local_scorer",
    "ranking_task",
    "recommender_scorer",
    "recorded_queries",
    "score_ranking",
    "served_scorer",
    "stored_model",
    "training_popularity",
]
