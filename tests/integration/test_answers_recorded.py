"""Every answer is recorded (issue 27, finding 1), over a real grpc.aio server.

A node asks N different queries of one of its users under one nonce, through every query RPC
(Predict, Recommend, PredictBatch) and every way of packing them: one per call, all in one
batch, and the first one sent again (a byte-identical retry) beside the others. Whatever it
tries, the user gets exactly one answer for that nonce's content (or none), and the transcript
and the privacy ledger hold exactly one record of it: no answer outside the record.
"""

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

N = 50
NONCE = "query-1"


@pytest.fixture
async def serving(tmp_path: Path) -> AsyncIterator[tuple[Aggregator, pb_grpc.AggregatorStub, str]]:
    core = Aggregator(one_tier_spec(RUN, ADMIN, N_ITEMS), Store(tmp_path / "server.sqlite"))
    async with served_channel(core) as ch:
        agg = pb_grpc.AggregatorStub(ch)
        await phase(ch, "enroll")
        users = [f"u{i}" for i in range(20)]
        tokens = {u: await enroll(agg, u) for u in users}
        await phase(ch, "collect")
        batch = pb.ReleaseBatch(releases=[release(u, tokens[u], i) for i, u in enumerate(users)])
        await agg.SubmitStream(iter([batch]))
        await phase(ch, "train")
        await phase(ch, "serve")
        yield core, agg, tokens["u1"]


def query(token: str, seed: int, nonce: str = NONCE) -> pb.Release:
    """A query of user u1 with its own content (`seed`) under `nonce`."""
    return release("u1", token, 1000 + seed, nonce=nonce, purpose=pb.PURPOSE_QUERY)


def predicts(token: str, n: int, nonce: str = NONCE) -> list[pb.PredictRequest]:
    return [pb.PredictRequest(query=query(token, s, nonce), items=[s % N_ITEMS]) for s in range(n)]


def records(core: Aggregator, nonce: str = NONCE) -> int:
    """Stored releases of u1 under `nonce` (what the transcript and the ledger hold)."""
    db = core.store._db
    return int(
        db.execute(
            "SELECT COUNT(*) FROM releases WHERE user_id = 'u1' AND nonce = ?", (nonce,)
        ).fetchone()[0]
    )


async def answered(call: object) -> int:
    """How many answers a call gave (0 when it was refused)."""
    try:
        reply = await call  # type: ignore[misc]
    except grpc.aio.AioRpcError as exc:
        assert exc.code() == grpc.StatusCode.ALREADY_EXISTS, exc.details()
        return 0
    return len(reply.responses) if isinstance(reply, pb.PredictBatchResponse) else 1


async def test_one_batch_of_n_queries_under_one_nonce_is_refused_whole(serving) -> None:
    """Regression: #27 (1) one PredictBatch with 50 different queries of one user under one
    nonce was answered 50 times and recorded once."""
    core, agg, token = serving
    await expect(
        grpc.StatusCode.ALREADY_EXISTS,
        "requests[1].nonce",
        agg.PredictBatch(pb.PredictBatchRequest(requests=predicts(token, N))),
    )
    assert records(core) == 0


async def test_n_queries_under_one_nonce_get_one_answer_and_one_record_by_every_rpc(
    serving,
) -> None:
    """Every query RPC and every packing: one answer, one record."""
    core, agg, token = serving
    first, *others = predicts(token, N)
    answers = await answered(agg.Predict(first))
    for req in others:
        answers += await answered(agg.Predict(req))
    for s in range(N):
        answers += await answered(agg.Recommend(pb.RecommendRequest(query=query(token, s), n=5)))
    answers += await answered(agg.PredictBatch(pb.PredictBatchRequest(requests=others)))
    answers += await answered(agg.PredictBatch(pb.PredictBatchRequest(requests=[first, *others])))
    for req in others:
        answers += await answered(agg.PredictBatch(pb.PredictBatchRequest(requests=[req])))
    assert answers == 1
    assert records(core) == 1
    # the first query sent again, byte for byte, is a retry: answered again, stored once
    assert await answered(agg.PredictBatch(pb.PredictBatchRequest(requests=[first, first]))) == 2
    assert records(core) == 1


async def test_a_retry_inside_a_batch_is_still_a_retry(serving) -> None:
    """The same query twice in one batch (a client resending a batch it lost) is answered twice
    and stored once, as before."""
    core, agg, token = serving
    (req,) = predicts(token, 1, nonce="query-2")
    reply = await agg.PredictBatch(pb.PredictBatchRequest(requests=[req, req]))
    assert list(reply.responses[0].scores) == list(reply.responses[1].scores)
    assert records(core, "query-2") == 1
