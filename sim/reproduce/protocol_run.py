"""The protocol's own classes without the transport, for reproductions that compare many models.

A table such as Bilge's Table 6.4 compares 36 model settings on the same population, and a τ
sweep, three item orderings or a θ = 1 twin compare server-side variants on the same releases.
Each could be a whole `privrec sim` run, but the releases would then differ between cells (every
run disguises afresh), the runs would repeat the same enrolment and collection, and their times
would include the transport's. `ProtocolRun` does what one run does, once, with the very classes
the nodes use, and then lets any number of models be trained and queried on it:

* the population plan (`shared.population.population_plan`: withheld items, folds) and the
  users' agents (`client.agent.UserAgent`) draw every release exactly as in a run: the profile
  release through the wire format (`pb.Release` bytes → `shared.serde.payload_from_proto`), the
  query freshly disguised with the user's query stream;
* the server side is the aggregator's own path, `server.fitting`: the spec from
  `server.spec.run_spec` (mechanism, model parameters, the catalogue's item features), releases
  in canonical user-id order, the recipe's training input, fold groups and model (with the
  catalogue's item features); each query is answered by `answer_predicts` as the aggregator's
  `Predict` does, and the online time is the sum over queries (Bilge's T);
* the client side de-normalises z-score answers with her private statistics
  (`UserAgent.denormalise`, Bilge Eq 2.5), clips rating answers, or reads a probability by the
  client's rule (like when P(like) > ½), as a shard does.

Two ways of choosing who queries: the protocol's cross-validation (every user with withheld
items queries in her fold), or a user split (`test_fraction`: that share of the users, chosen
uniformly with the stream ("reproduce", "test-users"), query; the others only train), as Bilge
Ch. 4 and Ch. 8 do. The non-private twins (CF, CF+, DWT, NBC) get the same users' true data in
the same order (`true_train`, `true_queries`): ratings, z-scores (`shared.zscores.zscore`, the
client's statistics) or binary likes.

`tests/integration/test_bilge_clustered_runs.py` checks that a model scored here gives exactly the
predictions of `privrec sim` with the same config and seed, so an entry built on this is a
protocol run with common random numbers across its cells (paired comparisons).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from privrec.client.agent import UserAgent
from privrec.server.fitting import (
    FitRecipe,
    Query,
    answer_predicts,
    canonical_order,
    fit,
    recommender,
)
from privrec.server.models import Recommender
from privrec.server.models.candidate_knn import CandidateKNN
from privrec.server.spec import RunSpec, model_params, run_spec
from privrec.server.training import stack_sparse
from privrec.shared.capabilities import ScoreKind
from privrec.shared.config import ExperimentConfig
from privrec.shared.data.dataset import RatingData
from privrec.shared.errors import ConfigError
from privrec.shared.mechanisms.base import SparsePayload
from privrec.shared.mechanisms.rrt import binarise
from privrec.shared.metrics import classification_scores, mae, rmse
from privrec.shared.population import load_population, population_plan
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.seeding import rng_for
from privrec.shared.serde import payload_from_proto
from privrec.shared.types import FloatArray, IntArray
from privrec.shared.zscores import zscore
from privrec.sim.compatibility import model_refusal
from privrec.sim.run import run_id_for

TRUE_KINDS = ("ratings", "zscores", "binary")


@dataclasses.dataclass(frozen=True)
class Scored:
    """One model's answers to every test query of a `ProtocolRun`.

    Attributes:
        metrics: "mae", "rmse" and "mae_other_clip" (MAE with the other clipping choice:
            unclipped when the run clips) of the clients' predictions against the withheld
            truth; for a model scoring probabilities, "ca", "f1", "precision" and "recall" of
            the predicted likes against the true likes instead.
        predictions: float array, every prediction in query order.
        coverage: fraction of predictions with at least one neighbour.
        fit_seconds: the model's `fit` (the server's offline phase).
        online_seconds: answering every query (`predict_block` per query, as the server does).
        comparisons: mean similarity computations per query: profile comparisons while routing
            plus one per candidate for a candidate-pool model (`CandidateKNN.candidate_pool`),
            every training user outside the query's group otherwise.
    """

    metrics: dict[str, float]
    predictions: np.ndarray
    coverage: float
    fit_seconds: float
    online_seconds: float
    comparisons: float

    def _metric(self, name: str) -> float:
        if name not in self.metrics:
            raise KeyError(f"{name!r} is not scored for this model; it has {sorted(self.metrics)}")
        return self.metrics[name]

    @property
    def mae(self) -> float:
        """Mean absolute error over the test predictions."""
        return self._metric("mae")

    @property
    def rmse(self) -> float:
        """Root mean squared error over the test predictions."""
        return self._metric("rmse")

    @property
    def mae_other_clip(self) -> float:
        """MAE with the other clipping choice (unclipped when the run clips)."""
        return self._metric("mae_other_clip")


class ProtocolRun:
    """One protocol run's releases and queries (module docstring).

    Args:
        config: the experiment (its [data], [run].seed, [mechanism] and [model].clip are used;
            the model is chosen per `score` or `evaluate` call).
        data: the population, if already loaded (else `load_population(config.data, seed)`).
        test_fraction: None for the protocol's cross-validation; a fraction in (0, 1] for a user
            split (module docstring).
    """

    def __init__(
        self,
        config: ExperimentConfig,
        data: RatingData | None = None,
        *,
        test_fraction: float | None = None,
    ) -> None:
        if test_fraction is not None and not 0.0 < test_fraction <= 1.0:
            raise ValueError(f"`test_fraction` must be in (0, 1] or None, got {test_fraction!r}")
        self.config = config
        seed = config.run.seed
        self.data = data if data is not None else load_population(config.data, seed)
        self.run_id = run_id_for(config)
        self.spec: RunSpec = run_spec(config, self.run_id, self.data, "")
        self.recipe = FitRecipe.of_spec(self.spec)
        mechanism = self.spec.mechanism
        self.user_ids, plans = canonical_order(
            (p.user_id, p) for p in population_plan(self.data, config)
        )
        self.agents = [UserAgent.from_plan(plan, seed) for plan in plans]
        self._rows = [
            payload_from_proto(
                pb.Release.FromString(a.profile_release(self.run_id, mechanism).SerializeToString())
            )[1]
            for a in self.agents
        ]
        if test_fraction is None:
            groups = self.recipe.groups(self.user_ids)
            assert groups is not None  # the reproductions follow the thesis protocol's folds
            self.groups = groups
            chosen: list[int] = list(range(len(self.agents)))
        else:
            rng = rng_for(seed, "reproduce", "test-users")
            n_test = round(test_fraction * len(self.agents))
            picked = rng.choice(len(self.agents), size=n_test, replace=False)
            self.groups = np.zeros(len(self.agents), dtype=np.int64)
            self.groups[picked] = 1
            chosen = sorted(picked.tolist())
        rows_of_testers = [i for i in chosen if self.agents[i].withheld.size]
        self.testers = [self.agents[i] for i in rows_of_testers]
        self.exclude = [int(self.groups[i]) for i in rows_of_testers]
        self.queries: list[Query] = []
        self.items: list[IntArray] = []
        for agent in self.testers:
            req = agent.query_request(self.run_id, mechanism)
            _, payload = payload_from_proto(pb.Release.FromString(req.query.SerializeToString()))
            if not isinstance(payload, SparsePayload):
                raise TypeError(f"{config.mechanism.name} queries are not sparse vectors")
            self.queries.append((payload.indices, payload.values))
            self.items.append(np.fromiter(req.items, dtype=np.int64, count=len(req.items)))
        self.truth = np.concatenate(
            [a.profile.ratings[np.searchsorted(a.profile.items, a.withheld)] for a in self.testers]
        )
        self.clip = self.data.rating_scale if config.model.clip else None

    # ---------------------------------------------------------------- what the server holds
    def releases(self) -> sp.csr_matrix:
        """U′: every user's profile release, stacked as the aggregator stacks them."""
        return stack_sparse(self._rows, self.data.n_items)

    def train_matrix(self, model_name: str) -> Any:
        """What the aggregator feeds model `model_name`'s fit (`server.fitting`).

        Raises:
            ConfigError: the model does not read this run's releases (`sim.compatibility`).
        """
        refusal = model_refusal(self.config.mechanism.name, model_name)
        if refusal is not None:
            raise ConfigError(refusal)
        return self.recipe.with_model(model_name, {}).training_input(self._rows)

    def true_train(self, kind: str) -> sp.csr_matrix:
        """The same users' true data as `kind`: "ratings", "zscores" or "binary" (RRT's like
        rule at the mechanism's threshold)."""
        return stack_sparse(
            [self._true(a.profile.items, a.profile.ratings, kind) for a in self.agents],
            self.data.n_items,
        )

    def true_queries(self, kind: str) -> list[Query]:
        """Each test user's true training profile, as `kind` (see `true_train`)."""
        out = []
        for agent in self.testers:
            p = agent.query_profile()
            payload = self._true(p.items, p.ratings, kind)
            out.append((payload.indices, payload.values))
        return out

    def _threshold(self) -> float:
        return float(self.spec.mechanism.public_params().get("threshold", 3.0))

    def _true(self, items: IntArray, ratings: FloatArray, kind: str) -> SparsePayload:
        if kind == "ratings":
            values = ratings
        elif kind == "zscores":
            values = zscore(ratings).z
        elif kind == "binary":
            values = binarise(ratings, self._threshold())
        else:
            raise ValueError(f"`kind` must be one of {TRUE_KINDS}, got {kind!r}")
        return SparsePayload(self.data.n_items, np.asarray(items, np.int64), values)

    # ---------------------------------------------------------------- serving and scoring
    def build(
        self, model_name: str, params: Mapping[str, Any] | None = None, *, k: int | None = None
    ) -> Recommender:
        """Model `model_name` as the aggregator builds it: `[model].k` (or `k`) and `params`
        (the run's `[model.params]` when None), with the catalogue's item features."""
        cfg = self.config.replace(
            "model",
            name=model_name,
            k=self.config.model.k if k is None else k,
            params=dict(self.config.model.params if params is None else params),
        )
        return recommender(
            self.recipe.with_model(model_name, model_params(cfg)).build(),
            f"{model_name} (ProtocolRun scores recommenders)",
        )

    def score(
        self, model_name: str, params: Mapping[str, Any] | None = None, *, k: int | None = None
    ) -> Scored:
        """Fit `model_name` (with `[model].k` or `k`) on the releases and answer every test
        query (module docstring)."""
        train = self.train_matrix(model_name)  # refuses a model that cannot read the releases
        return self.evaluate(self.build(model_name, params, k=k), train, self.queries)

    def evaluate(self, model: Recommender, train: Any, queries: Sequence[Query]) -> Scored:
        """Fit `model` on `train` (the releases, or a `true_train`), answer `queries` (one per
        test user: `self.queries`, or a `true_queries`) one by one as `Predict` does, turn the
        answers into predictions by the client's rule and score them against the truth."""
        if len(queries) != len(self.testers):
            raise ValueError(f"{len(queries)} queries for {len(self.testers)} test users")
        t0 = time.perf_counter()
        fit(model, train, self.groups)
        fit_seconds = time.perf_counter() - t0
        online = 0.0
        answers = []
        for query, items, g in zip(queries, self.items, self.exclude, strict=True):
            t1 = time.perf_counter()
            (answer,) = answer_predicts(model, [query], [items], [g])
            online += time.perf_counter() - t1
            answers.append(answer)
        kind = model.capabilities.scores
        other_clip = None if self.clip else self.data.rating_scale
        preds, other, counts = [], [], []
        for agent, (scores, n_nb) in zip(self.testers, answers, strict=True):
            if kind is ScoreKind.ZSCORE:
                preds.append(agent.denormalise(scores, self.clip))
                other.append(agent.denormalise(scores, other_clip))
            elif kind is ScoreKind.PROBABILITY:
                preds.append((scores > 0.5).astype(np.float64))
            else:
                preds.append(np.clip(scores, *self.clip) if self.clip else scores)
                other.append(np.clip(scores, *other_clip) if other_clip else scores)
            counts.append(n_nb)
        p = np.concatenate(preds)
        if kind is ScoreKind.PROBABILITY:
            metrics = classification_scores(p, binarise(self.truth, self._threshold()))
        else:
            metrics = {
                "mae": mae(p, self.truth),
                "rmse": rmse(p, self.truth),
                "mae_other_clip": mae(np.concatenate(other), self.truth),
            }
        if isinstance(model, CandidateKNN):
            costs = model.candidate_costs(list(queries), list(self.exclude)).tolist()
        else:
            costs = [int(np.sum(self.groups != g)) for g in self.exclude]
        return Scored(
            metrics=metrics,
            predictions=p,
            coverage=float(np.mean(np.concatenate(counts) > 0)),
            fit_seconds=fit_seconds,
            online_seconds=online,
            comparisons=float(np.mean(costs)),
        )


__all__ = ["TRUE_KINDS", "ProtocolRun", "Query", "Scored"]
