"""The protocol's own classes without the transport, for reproductions that compare many models.

A table such as Bilge's Table 6.4 compares 36 model settings on the same kind of population. Each
could be a whole `privrec sim` run, but the releases would then differ between cells (every run
disguises afresh) and 36 runs repeat the same enrolment and collection. `ProtocolRun` does what
one run does, once, with the very classes the nodes use, and then lets any number of models be
trained and queried on it:

* the population plan (`shared.population.population_plan`: withheld items, folds) and the
  users' agents (`client.agent.UserAgent`) draw every release exactly as in a run: the profile
  release through the wire format (`pb.Release` bytes → `shared.serde.payload_from_proto`), the
  query freshly disguised with the user's query stream;
* the server side is the aggregator's: the spec from `server.node.run_spec` (mechanism, model
  parameters, the catalogue's item features), releases in canonical user-id order stacked by
  `server.training.TRAINING_INPUTS`, folds from `shared.protocol.fold_of`, the model built from
  the registry and given the catalogue by `supply_item_features`;
* the client side de-normalises z-score answers with her private statistics
  (`UserAgent.denormalise`, Bilge Eq 2.5) or clips rating answers, as a shard does.

`tests/integration/test_bilge_clustered_runs.py` checks that a model scored here gives exactly the
predictions of `privrec sim` with the same config and seed, so an entry built on this is a
protocol run with common random numbers across its cells (paired comparisons).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from privrec.client.agent import UserAgent
from privrec.server.aggregator import RunSpec
from privrec.server.models import MODELS, Recommender, supply_item_features
from privrec.server.models.candidate_knn import CandidateKNN
from privrec.server.node import model_params, run_spec
from privrec.server.training import TRAINING_INPUTS
from privrec.shared.capabilities import ScoreKind
from privrec.shared.config import ExperimentConfig
from privrec.shared.data.dataset import RatingData
from privrec.shared.mechanisms.base import SparsePayload
from privrec.shared.metrics import mae, rmse
from privrec.shared.population import load_population, population_plan
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.protocol import fold_of
from privrec.shared.serde import payload_from_proto
from privrec.shared.types import IntArray
from privrec.sim.run import run_id_for


@dataclasses.dataclass(frozen=True)
class Scored:
    """One model's answers to every test query of a `ProtocolRun`.

    Attributes:
        mae, rmse: of the clients' predictions against the withheld truth.
        mae_other_clip: MAE with the other clipping choice (unclipped when the run clips).
        predictions: float array, every prediction in query order.
        coverage: fraction of predictions with at least one neighbour.
        fit_seconds: the model's `fit` (the server's offline phase).
        online_seconds: answering every query (`predict_block` per query, as the server does).
        comparisons: mean similarity computations per query: profile comparisons while routing
            plus one per candidate for a candidate-pool model (`CandidateKNN.candidate_pool`),
            every training user outside the query's fold otherwise.
    """

    mae: float
    rmse: float
    mae_other_clip: float
    predictions: np.ndarray
    coverage: float
    fit_seconds: float
    online_seconds: float
    comparisons: float


class ProtocolRun:
    """One protocol run's releases and queries (module docstring).

    Args:
        config: the experiment (its [data], [run].seed, [mechanism] and [model].clip are used;
            the model is chosen per `score` call).
        data: the population, if already loaded (else `load_population(config.data, seed)`).
    """

    def __init__(self, config: ExperimentConfig, data: RatingData | None = None) -> None:
        self.config = config
        seed = config.run.seed
        self.data = data if data is not None else load_population(config.data, seed)
        self.run_id = run_id_for(config)
        self.spec: RunSpec = run_spec(config, self.run_id, self.data, "")
        mechanism = self.spec.mechanism
        agents = {
            plan.user_id: UserAgent.from_plan(plan, seed)
            for plan in population_plan(self.data, config)
        }
        self.user_ids = sorted(agents)  # the aggregator's canonical order
        self._rows = [
            payload_from_proto(
                pb.Release.FromString(
                    agents[u].profile_release(self.run_id, mechanism).SerializeToString()
                )
            )[1]
            for u in self.user_ids
        ]
        n_folds = config.data.n_folds
        self.groups = np.array([fold_of(u, n_folds, seed) for u in self.user_ids], dtype=np.int64)
        self.testers = [agents[u] for u in self.user_ids if agents[u].withheld.size]
        self.queries: list[tuple[IntArray, np.ndarray]] = []
        self.items: list[IntArray] = []
        for agent in self.testers:
            req = agent.query_request(self.run_id, mechanism)
            _, payload = payload_from_proto(pb.Release.FromString(req.query.SerializeToString()))
            if not isinstance(payload, SparsePayload):
                raise TypeError(f"{config.mechanism.name} queries are not sparse vectors")
            self.queries.append((payload.indices, payload.values))
            self.items.append(np.fromiter(req.items, dtype=np.int64, count=len(req.items)))
        self.exclude = [fold_of(a.user_id, n_folds, seed) for a in self.testers]
        self.truth = np.concatenate(
            [a.profile.ratings[np.searchsorted(a.profile.items, a.withheld)] for a in self.testers]
        )
        self.clip = self.data.rating_scale if config.model.clip else None

    def train_matrix(self, model_name: str) -> Any:
        """What the aggregator feeds model `model_name`'s fit (`TRAINING_INPUTS`)."""
        caps = MODELS.lookup(model_name).capabilities
        return TRAINING_INPUTS[caps.consumes](self._rows, self.spec.mechanism, self.spec.n_items)

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
        model = MODELS.build(model_name, model_params(cfg))
        if not isinstance(model, Recommender):
            raise TypeError(f"{model_name} answers no queries; ProtocolRun scores recommenders")
        supply_item_features(model, self.spec.item_features)
        return model

    def score(
        self, model_name: str, params: Mapping[str, Any] | None = None, *, k: int | None = None
    ) -> Scored:
        """Fit `model_name` (with `[model].k` or `k`) on the releases and answer every test
        query (module docstring)."""
        model = self.build(model_name, params, k=k)
        matrix = self.train_matrix(model_name)
        t0 = time.perf_counter()
        model.fit(matrix, exclude_groups=self.groups)
        fit_seconds = time.perf_counter() - t0
        kind = model.capabilities.scores
        preds, other, counts = [], [], []
        other_clip = None if self.clip else self.data.rating_scale
        t0 = time.perf_counter()
        answers = [
            model.predict(idx, val, items, exclude_group=g)
            for (idx, val), items, g in zip(self.queries, self.items, self.exclude, strict=True)
        ]
        online = time.perf_counter() - t0
        for agent, (scores, n_nb) in zip(self.testers, answers, strict=True):
            if kind is ScoreKind.ZSCORE:
                preds.append(agent.denormalise(scores, self.clip))
                other.append(agent.denormalise(scores, other_clip))
            else:
                preds.append(np.clip(scores, *self.clip) if self.clip else scores)
                other.append(np.clip(scores, *other_clip) if other_clip else scores)
            counts.append(n_nb)
        p = np.concatenate(preds)
        if isinstance(model, CandidateKNN):
            costs = model.candidate_costs(self.queries, list(self.exclude)).tolist()
        else:
            costs = [int(np.sum(self.groups != g)) for g in self.exclude]
        return Scored(
            mae=mae(p, self.truth),
            rmse=rmse(p, self.truth),
            mae_other_clip=mae(np.concatenate(other), self.truth),
            predictions=p,
            coverage=float(np.mean(np.concatenate(counts) > 0)),
            fit_seconds=fit_seconds,
            online_seconds=online,
            comparisons=float(np.mean(costs)),
        )


__all__ = ["ProtocolRun", "Scored"]
