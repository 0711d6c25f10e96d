"""Serving: Predict, PredictBatch and Recommend answered by the fitted model.

Each query is a release of its own (purpose QUERY, a fresh nonce), checked like a profile
release (`server.submission`), answered through `server.fitting` with the querying user's fold
left out of the neighbour pool, and recorded before the answer leaves; a retry gets the same
answer and is stored once.
"""

from __future__ import annotations

import hashlib
import time

import numpy as np

from privrec.server.fitting import answer_predicts, answer_recommends
from privrec.server.models import Recommender
from privrec.server.state import REFUSALS, AggregatorState, at_position
from privrec.server.submission import Submissions, check_batch_nonces
from privrec.server.trainer import Trainer
from privrec.server.validation import check_size, parse
from privrec.shared.errors import ProtocolError, ValidationError
from privrec.shared.mechanisms.base import SparsePayload
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.serde import payload_from_proto
from privrec.shared.types import IntArray

MAX_QUERY_ITEMS = 10_000
"""At most this many target items in one PredictRequest."""
MAX_PREDICT_BATCH = 4096
"""At most this many queries in one PredictBatch."""

CheckedQuery = tuple[Recommender, pb.Release, SparsePayload, int | None]
"""A query that passed every check: the model, its release, its vector and the user's fold
(None under a named split: no fold is left out)."""


class QueryService:
    """Answers the test users' queries with the trained model.

    Args:
        state: the aggregator's shared state.
        submissions: the release checks and the query records.
        trainer: the fitted model.
    """

    def __init__(self, state: AggregatorState, submissions: Submissions, trainer: Trainer) -> None:
        self.state, self.submissions, self.trainer = state, submissions, trainer

    def _query_limit(self) -> int:
        return self.state.spec.max_release_bytes + self.state.spec.limits.query_extra_bytes

    def predict(self, raw: bytes, node: str) -> pb.PredictResponse:
        """Answer a score for each target item (Bilge §1.4 step 3; for z-score models the
        client de-normalises). The query is stored (a recorded release) before the answer
        leaves; a retry gets the same answer and is stored once."""
        check_size(raw, self._query_limit(), "PredictRequest")
        req = parse(pb.PredictRequest, raw, "PredictRequest")
        return self._answer_predicts([(req, raw)], node)[0]

    def predict_batch(self, raw: bytes, node: str) -> pb.PredictBatchResponse:
        """Answer several users' Predict queries in one model block (`predict_block`).

        Each query is validated, answered and recorded exactly as `predict` would (one
        "Predict" transcript record per query with that PredictRequest's bytes), so the
        transcript, the adversary's view and a replay do not tell a batch from single calls.
        All or nothing: a malformed query (named by its position) refuses the whole batch
        before anything is recorded."""
        check_size(raw, self.state.spec.limits.batch_bytes, "PredictBatchRequest")
        batch = parse(pb.PredictBatchRequest, raw, "PredictBatchRequest")
        n = len(batch.requests)
        if not 1 <= n <= MAX_PREDICT_BATCH:
            raise ValidationError("requests", f"must hold 1..{MAX_PREDICT_BATCH} queries, got {n}")
        parts = []
        for i, req in enumerate(batch.requests):
            sub = req.SerializeToString()
            try:
                check_size(sub, self._query_limit(), "PredictRequest")
            except REFUSALS as exc:
                raise at_position(exc, f"requests[{i}].") from None
            parts.append((req, sub))
        return pb.PredictBatchResponse(responses=self._answer_predicts(parts, node))

    def _answer_predicts(
        self, requests: list[tuple[pb.PredictRequest, bytes]], node: str
    ) -> list[pb.PredictResponse]:
        """Validate, answer (one model block) and record Predict queries; `requests` holds
        each parsed PredictRequest with its bytes (what the transcript records)."""
        checked = []
        for i, (req, raw) in enumerate(requests):
            try:
                checked.append(self._check_predict(req, raw, node))
            except REFUSALS as exc:
                if len(requests) == 1:
                    raise
                raise at_position(exc, f"requests[{i}].") from None
        # before any answer: one nonce, one content, within the batch as across calls
        releases = [(q[1].user_id, q[1].nonce, digest) for q, _, digest in checked]
        check_batch_nonces(releases, "requests")
        model = checked[0][0][0]
        t0 = time.perf_counter()
        answers = answer_predicts(
            model,
            [(q.indices, q.values) for (_, _, q, _), _, _ in checked],
            [items for _, items, _ in checked],
            [fold for (*_, fold), _, _ in checked],
        )
        self.state.counters.answer_seconds += time.perf_counter() - t0
        self.submissions.record_queries(
            [
                (rel, "Predict", raw, digest)
                for ((_, rel, _, _), _, digest), (_, raw) in zip(checked, requests, strict=True)
            ]
        )
        return [
            pb.PredictResponse(scores=scores.tolist(), n_neighbours=n_nb.tolist())
            for scores, n_nb in answers
        ]

    def _check_predict(
        self, req: pb.PredictRequest, raw: bytes, node: str
    ) -> tuple[CheckedQuery, IntArray, bytes]:
        n_items = self.state.spec.n_items
        items = np.fromiter(req.items, dtype=np.int64, count=len(req.items))
        if items.size == 0 or items.size > MAX_QUERY_ITEMS:
            raise ValidationError(
                "items", f"must hold 1..{MAX_QUERY_ITEMS} items, got {items.size}"
            )
        if items.max() >= n_items:
            raise ValidationError(
                "items", f"item {int(items.max())} is out of range [0, {n_items})"
            )
        if not req.HasField("query"):
            raise ValidationError("query", "a PredictRequest must carry its query release")
        query = self._check_query(req.query.SerializeToString(), node)
        digest = hashlib.sha256(raw).digest()
        self.state.check_conflict(query[1].user_id, query[1].nonce, digest)
        return query, items, digest

    def recommend(self, raw: bytes, node: str) -> pb.RecommendResponse:
        """Top-n items for a perturbed query vector (recorded as `predict` records)."""
        check_size(raw, self._query_limit(), "RecommendRequest")
        req = parse(pb.RecommendRequest, raw, "RecommendRequest")
        if not 1 <= req.n <= 1000:
            raise ValidationError("n", f"must be in [1, 1000], got {req.n}")
        if not req.HasField("query"):
            raise ValidationError("query", "a RecommendRequest must carry its query release")
        model, rel, q, fold = self._check_query(req.query.SerializeToString(), node)
        digest = hashlib.sha256(raw).digest()
        self.state.check_conflict(rel.user_id, rel.nonce, digest)
        ((items, scores),) = answer_recommends(model, [(q.indices, q.values)], req.n, [fold])
        self.submissions.record_queries([(rel, "Recommend", raw, digest)])
        return pb.RecommendResponse(items=items.tolist(), scores=scores.tolist())

    def _check_query(self, rel_raw: bytes, node: str) -> CheckedQuery:
        rel, _, _ = self.submissions.check_release(rel_raw, pb.PURPOSE_QUERY, node, name="query")
        self.state.check_serving()
        model, model_name = self.trainer.model, self.state.spec.model
        if not isinstance(model, Recommender) or not self.trainer.trained:
            raise ProtocolError(
                f"model: {model_name} answers no queries; its result is published through GetModel"
            )
        _, payload = payload_from_proto(rel)
        if not isinstance(payload, SparsePayload):
            raise ValidationError("query.payload", "this model needs a sparse query vector")
        return model, rel, payload, self.trainer.recipe.fold(rel.user_id)


__all__ = ["MAX_PREDICT_BATCH", "MAX_QUERY_ITEMS", "QueryService"]
