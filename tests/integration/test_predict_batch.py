"""PredictBatch over a real grpc.aio server: each query of a batch is answered and recorded
exactly as a unary Predict would be (same answer, one "Predict" transcript record with that
PredictRequest's bytes), and a batch with one bad query is refused whole."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from privrec.server.aggregator import Aggregator
from privrec.server.store import Store
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.proto.privrec.v1 import aggregator_pb2_grpc as pb_grpc
from tests.grpc_helpers import expect, one_tier_spec, served_channel
from tests.integration.test_protocol_grpc import ADMIN, N_ITEMS, RUN, enroll, phase, release


@pytest.fixture
async def serving(
    tmp_path: Path,
) -> AsyncIterator[tuple[Aggregator, grpc.aio.Channel, dict[str, str]]]:
    core = Aggregator(one_tier_spec(RUN, ADMIN, N_ITEMS), Store(tmp_path / "server.sqlite"))
    async with served_channel(core) as ch:
        agg = pb_grpc.AggregatorStub(ch)
        await phase(ch, "enroll")
        users = [f"u{i}" for i in range(20)]
        tokens = {u: await enroll(agg, u) for u in users}
        await phase(ch, "collect")
        await agg.SubmitStream(
            iter(
                [pb.ReleaseBatch(releases=[release(u, tokens[u], i) for i, u in enumerate(users)])]
            )
        )
        await phase(ch, "train")
        await phase(ch, "serve")
        yield core, ch, tokens


def _queries(n: int, tokens: dict[str, str]) -> list[pb.PredictRequest]:
    return [
        pb.PredictRequest(
            query=release(
                f"u{i}", tokens[f"u{i}"], 100 + i, nonce=f"query-{i}", purpose=pb.PURPOSE_QUERY
            ),
            items=[i % N_ITEMS, (3 * i + 1) % N_ITEMS],
        )
        for i in range(n)
    ]


async def test_batch_answers_and_records_as_single_predicts(serving) -> None:
    core, ch, tokens = serving
    agg = pb_grpc.AggregatorStub(ch)
    reqs = _queries(6, tokens)
    before = core.store.count("releases")
    batch = await agg.PredictBatch(pb.PredictBatchRequest(requests=reqs))
    assert len(batch.responses) == 6
    assert core.store.count("releases") == before + 6
    records = [r for r in core.store.transcript() if r.method == "Predict"]
    assert [r.request for r in records] == [q.SerializeToString() for q in reqs]
    assert not any(r.method == "PredictBatch" for r in core.store.transcript())
    # the same queries sent alone are retries: the same answers, nothing stored again
    dups = core.counters.duplicates
    for req, answer in zip(reqs, batch.responses, strict=True):
        single = await agg.Predict(req)
        assert list(single.scores) == list(answer.scores)
        assert list(single.n_neighbours) == list(answer.n_neighbours)
    assert core.store.count("releases") == before + 6
    assert core.counters.duplicates == dups + 6
    assert any(n > 0 for a in batch.responses for n in a.n_neighbours)


async def test_batch_is_one_feed_message_of_its_records(serving) -> None:
    """The observation feed hands an answered batch over once, with each query's record in
    transcript order (as for a SubmitStream batch); single queries one each; retries nothing."""
    core, ch, tokens = serving
    agg = pb_grpc.AggregatorStub(ch)
    calls: list[list[pb.TranscriptRecord]] = []
    core.add_batch_observer(calls.append)
    reqs = _queries(7, tokens)
    await agg.PredictBatch(pb.PredictBatchRequest(requests=reqs[:5]))
    await agg.PredictBatch(pb.PredictBatchRequest(requests=reqs[:5]))  # retried: stored once
    for req in reqs[5:]:
        await agg.Predict(req)
    assert [len(c) for c in calls] == [5, 1, 1]
    stored = [(r.seq, r.request) for r in core.store.transcript() if r.method == "Predict"]
    assert [(r.seq, r.request) for c in calls for r in c] == stored
    assert {r.method for c in calls for r in c} == {"Predict"}


async def test_batch_with_one_bad_query_is_refused_whole(serving) -> None:
    core, ch, tokens = serving
    agg = pb_grpc.AggregatorStub(ch)
    reqs = _queries(4, tokens)
    reqs[2].items.append(N_ITEMS)  # out of range
    before = core.store.count("releases")
    await expect(
        grpc.StatusCode.INVALID_ARGUMENT,
        "requests[2].items",
        agg.PredictBatch(pb.PredictBatchRequest(requests=reqs)),
    )
    await expect(
        grpc.StatusCode.INVALID_ARGUMENT,
        "requests",
        agg.PredictBatch(pb.PredictBatchRequest()),
    )
    assert core.store.count("releases") == before
