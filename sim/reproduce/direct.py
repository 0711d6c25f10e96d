"""The protocol in memory, for sweeps: the same classes the nodes run, without the transport.

A reproduction that compares many server-side variants on the *same* releases (a τ sweep, three
item orderings, a θ = 1 twin) would, through `simulate`, pay the whole protocol once per variant
(RPT for every user, SQLite, the per-query round trips) and measure the transport's time along
with the model's. `DirectProtocol` builds what the server would hold with the nodes' own code
instead: every user's `UserAgent.profile_release` (the population plan's users, seeds and
withheld items, serialised to the wire `Release` and parsed back with `payload_from_proto`),
stacked in the aggregator's canonical order (by user id) with `server.training.stack_sparse`;
each test user's `UserAgent.query_request` (disguised afresh); the answer de-normalised or read
by the client's own rule (`UserAgent.denormalise`, P(like) > ½). Only the delivery differs: the
model answers each query with `predict_block` as the aggregator's `Predict` does, and its online
time is the sum over queries (Bilge's T).

The non-private twins (CF, CF+, DWT, NBC) get the same users' true data in the same order:
ratings, z-scores (`shared.zscores.zscore`, the client's statistics) or binary likes.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from privrec.client.agent import UserAgent
from privrec.server.models.base import Recommender
from privrec.server.training import stack_sparse
from privrec.shared.capabilities import ScoreKind
from privrec.shared.config import ExperimentConfig
from privrec.shared.data.dataset import RatingData
from privrec.shared.mechanisms import make_mechanism
from privrec.shared.mechanisms.base import Mechanism, SparsePayload
from privrec.shared.mechanisms.rrt import binarise
from privrec.shared.metrics import classification_scores, mae
from privrec.shared.population import load_population, population_plan
from privrec.shared.protocol import fold_of
from privrec.shared.seeding import rng_for
from privrec.shared.serde import payload_from_proto
from privrec.shared.types import FloatArray, IntArray
from privrec.shared.zscores import zscore

Query = tuple[IntArray, FloatArray]


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """What one model did on the protocol's test queries.

    Attributes:
        metrics: "mae" for rating models; "ca", "f1", "precision", "recall" for classifiers.
        online_seconds: the model's time answering every query (Bilge's T).
        offline_seconds: the model's fit time (preprocessing included).
        predictions: the number of predictions.
    """

    metrics: dict[str, float]
    online_seconds: float
    offline_seconds: float
    predictions: int


@dataclasses.dataclass
class DirectProtocol:
    """One population's releases and queries (see the module docstring).

    Attributes:
        config: the experiment configuration (data, seed, mechanism, withheld, folds).
        data: the population.
        agents: every user, in the aggregator's canonical order (by user id).
        groups: each training row's group (its fold, or 1 = test / 0 = train for a user split).
        testers: the indices (into `agents`) of the users who query.
    """

    config: ExperimentConfig
    data: RatingData
    agents: list[UserAgent]
    groups: IntArray
    testers: list[int]

    @classmethod
    def build(
        cls,
        config: ExperimentConfig,
        *,
        data: RatingData | None = None,
        test_fraction: float | None = None,
    ) -> DirectProtocol:
        """The population of `config` with its plan.

        Args:
            config: the run's configuration.
            data: the population, if already loaded.
            test_fraction: None for the protocol's cross-validation (every user tests in her
                fold); a fraction for Bilge Ch. 4's split, that share of the users chosen
                uniformly (seeded by ("reproduce", "test-users")) as test users, the others
                training users only.
        """
        data = data if data is not None else load_population(config.data, config.run.seed)
        seed = config.run.seed
        plans = sorted(population_plan(data, config), key=lambda p: p.user_id)
        agents = [UserAgent.from_plan(plan, seed) for plan in plans]
        if test_fraction is None:
            groups = np.array(
                [fold_of(a.user_id, config.data.n_folds, seed) for a in agents], dtype=np.int64
            )
            testers = [i for i, a in enumerate(agents) if a.withheld.size]
        else:
            rng = rng_for(seed, "reproduce", "test-users")
            n_test = round(test_fraction * len(agents))
            chosen = set(rng.choice(len(agents), size=n_test, replace=False).tolist())
            groups = np.array([int(i in chosen) for i in range(len(agents))], dtype=np.int64)
            testers = [i for i in sorted(chosen) if agents[i].withheld.size]
        return cls(config, data, agents, groups, testers)

    # ---------------------------------------------------------------- what the server holds
    def mechanism(self) -> Mechanism:
        m = self.config.mechanism
        return make_mechanism(m.name, dict(m.params))

    def private_train(self) -> sp.csr_matrix:
        """U′: every user's profile release, as the aggregator stacks them."""
        mech = self.mechanism()
        run_id = self.config.run.name
        rows = [payload_from_proto(a.profile_release(run_id, mech))[1] for a in self.agents]
        return stack_sparse(rows, self.data.n_items)

    def private_queries(self) -> list[Query]:
        """Each test user's freshly disguised query (`UserAgent.query_request`)."""
        mech = self.mechanism()
        run_id = self.config.run.name
        out = []
        for i in self.testers:
            payload = payload_from_proto(self.agents[i].query_request(run_id, mech).query)[1]
            assert isinstance(payload, SparsePayload)
            out.append((payload.indices, payload.values))
        return out

    def true_train(self, kind: str) -> sp.csr_matrix:
        """The same users' true data: "ratings", "zscores" or "binary" (RRT's like rule)."""
        return stack_sparse(
            [self._true(a.profile.items, a.profile.ratings, kind) for a in self.agents],
            self.data.n_items,
        )

    def true_queries(self, kind: str) -> list[Query]:
        """Each test user's true training profile, as `kind`."""
        out = []
        for i in self.testers:
            p = self.agents[i].query_profile()
            payload = self._true(p.items, p.ratings, kind)
            out.append((payload.indices, payload.values))
        return out

    def _true(self, items: IntArray, ratings: FloatArray, kind: str) -> SparsePayload:
        if kind == "ratings":
            values = ratings
        elif kind == "zscores":
            values = zscore(ratings).z
        elif kind == "binary":
            threshold = float(self.mechanism().public_params().get("threshold", 3.0))
            values = binarise(ratings, threshold)
        else:
            raise ValueError(f"`kind` must be ratings, zscores or binary, got {kind!r}")
        return SparsePayload(self.data.n_items, np.asarray(items, np.int64), values)

    # ---------------------------------------------------------------- serving and scoring
    def evaluate(
        self, model: Recommender, train: sp.csr_matrix, queries: Sequence[Query]
    ) -> Evaluation:
        """Fit `model` on `train`, answer every test query one by one (as `Predict` does), turn
        the answers into predictions by the client's rule and score them against the truth."""
        t0 = time.perf_counter()
        model.fit(train, exclude_groups=self.groups)
        offline = time.perf_counter() - t0
        kind = model.capabilities.scores
        clip = self.data.rating_scale if self.config.model.clip else None
        online = 0.0
        preds, actual = [], []
        for i, query in zip(self.testers, queries, strict=True):
            agent = self.agents[i]
            t1 = time.perf_counter()
            ((scores, _),) = model.predict_block(
                [query], [agent.withheld], exclude_groups=[int(self.groups[i])]
            )
            online += time.perf_counter() - t1
            if kind is ScoreKind.ZSCORE:
                preds.append(agent.denormalise(scores, clip))
            elif kind is ScoreKind.PROBABILITY:
                preds.append((scores > 0.5).astype(np.float64))
            else:
                preds.append(np.clip(scores, *clip) if clip else scores)
            truth = agent.profile.ratings[np.searchsorted(agent.profile.items, agent.withheld)]
            actual.append(truth)
        p, a = np.concatenate(preds), np.concatenate(actual)
        if kind is ScoreKind.PROBABILITY:
            threshold = float(self.mechanism().public_params().get("threshold", 3.0))
            metrics = classification_scores(p, binarise(a, threshold))
        else:
            metrics = {"mae": mae(p, a)}
        return Evaluation(metrics, online, offline, int(p.size))


__all__ = ["DirectProtocol", "Evaluation", "Query"]
