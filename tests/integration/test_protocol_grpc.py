"""The aggregator's wire contract over a real grpc.aio server on port 0.

Every kind of bad request gets its status code and a message naming the field, and leaves the
store exactly as it was.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from privrec.server.aggregator import Aggregator
from privrec.server.store import Store
from privrec.shared.mechanisms import RandomizedPerturbation
from privrec.shared.mechanisms.base import Profile
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.proto.privrec.v1 import aggregator_pb2_grpc as pb_grpc
from privrec.shared.serde import payload_to_proto
from tests.grpc_helpers import expect, one_tier_spec, served_channel

RUN = "t-run"
ADMIN = "admin-secret"
N_ITEMS = 40


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Aggregator, grpc.aio.Channel]]:
    spec = one_tier_spec(RUN, ADMIN, N_ITEMS)
    core = Aggregator(spec, Store(tmp_path / "server.sqlite"))
    async with served_channel(core) as channel:
        yield core, channel


def stubs(channel: grpc.aio.Channel) -> tuple[pb_grpc.AggregatorStub, pb_grpc.AdminStub]:
    return pb_grpc.AggregatorStub(channel), pb_grpc.AdminStub(channel)


async def phase(channel: grpc.aio.Channel, name: str) -> None:
    await pb_grpc.AdminStub(channel).SetPhase(
        pb.SetPhaseRequest(run_id=RUN, admin_token=ADMIN, phase=name)
    )


async def enroll(agg: pb_grpc.AggregatorStub, user: str) -> str:
    resp = await agg.Enroll(
        pb.EnrollRequest(run_id=RUN, user_id=user, shard="0/1", tier=pb.TIER_PRIVATE)
    )
    return resp.token


def release(
    user: str, token: str, seed: int = 0, nonce: str = "profile", purpose: int = pb.PURPOSE_PROFILE
) -> pb.Release:
    rng = np.random.default_rng(seed)
    items = np.sort(rng.choice(N_ITEMS, 12, replace=False))
    prof = Profile(items, rng.integers(1, 6, 12).astype(float), N_ITEMS)
    rel = pb.Release(run_id=RUN, user_id=user, token=token, nonce=nonce, purpose=purpose)
    payload_to_proto("rpt", RandomizedPerturbation(1.0, 10).release(prof, rng), rel)
    return rel


async def test_enroll_is_idempotent(served) -> None:
    """Re-enrolling returns the same token and stores one enrollment."""
    core, ch = served
    agg, _ = stubs(ch)
    await phase(ch, "enroll")
    t1 = await enroll(agg, "u1")
    again = await agg.Enroll(pb.EnrollRequest(run_id=RUN, user_id="u1", tier=pb.TIER_PRIVATE))
    assert again.token == t1 and again.already_enrolled
    assert core.store.snapshot() == (1, 1, 0)


async def test_bad_requests_get_status_and_leave_store_unchanged(served) -> None:
    """Each refusal names its field, maps to the right status and stores nothing."""
    core, ch = served
    agg, admin = stubs(ch)
    await phase(ch, "enroll")
    token = await enroll(agg, "u1")
    # submitting before the collect phase
    await expect(grpc.StatusCode.FAILED_PRECONDITION, "phase", agg.Submit(release("u1", token)))
    await phase(ch, "collect")
    before = core.store.snapshot()
    good = release("u1", token)

    def variant(**changes: object) -> pb.Release:
        r = pb.Release()
        r.CopyFrom(good)
        for k, v in changes.items():
            setattr(r, k, v)
        return r

    bad_index = variant()
    bad_index.rpt.indices[-1] = N_ITEMS + 3
    nan_value = variant()
    nan_value.rpt.values[0] = float("nan")
    wrong_kind = variant()
    wrong_kind.jlt.values.extend([0.0] * 5)
    wrong_dim = variant()
    wrong_dim.rpt.dim = N_ITEMS + 1
    wrong_dim.rpt.indices[:] = list(range(len(wrong_dim.rpt.values)))
    short_values = variant()
    del short_values.rpt.values[-1]
    huge = variant()
    huge.rpt.indices[:] = list(range(N_ITEMS))
    huge.rpt.values[:] = [0.1] * N_ITEMS
    huge.token = "x" * 4000
    cases = [
        (grpc.StatusCode.INVALID_ARGUMENT, "run_id", variant(run_id="other")),
        (grpc.StatusCode.FAILED_PRECONDITION, "not enrolled", variant(user_id="ghost")),
        (grpc.StatusCode.UNAUTHENTICATED, "token", variant(token="forged")),
        (grpc.StatusCode.INVALID_ARGUMENT, "nonce", variant(nonce="")),
        (grpc.StatusCode.INVALID_ARGUMENT, "purpose", variant(purpose=pb.PURPOSE_QUERY)),
        (grpc.StatusCode.INVALID_ARGUMENT, "rpt.indices", bad_index),
        (grpc.StatusCode.INVALID_ARGUMENT, "rpt.values: must be finite", nan_value),
        (grpc.StatusCode.INVALID_ARGUMENT, "payload", wrong_kind),
        (grpc.StatusCode.INVALID_ARGUMENT, "rpt.dim", wrong_dim),
        (grpc.StatusCode.INVALID_ARGUMENT, "rpt.values", short_values),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, "max_release_bytes", huge),
    ]
    for code, needle, rel in cases:
        await expect(code, needle, agg.Submit(rel))
        assert core.store.snapshot() == before
    # undecodable bytes, by raw path (pins the wire contract's method name)
    raw_submit = ch.unary_unary("/privrec.v1.Aggregator/Submit")
    await expect(grpc.StatusCode.INVALID_ARGUMENT, "cannot be decoded", raw_submit(b"\xff\xff"))
    # a public-tier enrollment in a run without a public tier (tier conflicts: test_two_tier.py)
    await expect(
        grpc.StatusCode.INVALID_ARGUMENT,
        "no public tier",
        agg.Enroll(pb.EnrollRequest(run_id=RUN, user_id="u1", tier=pb.TIER_PUBLIC)),
    )
    # wrong admin token
    await expect(
        grpc.StatusCode.UNAUTHENTICATED,
        "admin_token",
        admin.GetStatus(pb.GetStatusRequest(run_id=RUN, admin_token="guess")),
    )
    assert core.store.snapshot() == before
    status = await admin.GetStatus(pb.GetStatusRequest(run_id=RUN, admin_token=ADMIN))
    assert status.releases_rejected == len(cases) + 3  # + undecodable, tier, (before collect)


async def test_duplicate_and_retried_submits_are_stored_once(served) -> None:
    """The same (user, nonce) is acknowledged as duplicate, by Submit and by SubmitStream."""
    core, ch = served
    agg, _ = stubs(ch)
    await phase(ch, "enroll")
    tokens = {u: await enroll(agg, u) for u in ("a", "b", "c")}
    await phase(ch, "collect")
    r_a = release("a", tokens["a"], seed=1)
    first = await agg.Submit(r_a)
    again = await agg.Submit(r_a)
    assert not first.duplicate and again.duplicate and again.seq == 0
    batch = pb.ReleaseBatch(releases=[r_a, release("b", tokens["b"], 2), r_a])
    resp = await agg.SubmitStream(iter([batch, pb.ReleaseBatch(releases=[r_a])]))
    assert (resp.accepted, resp.duplicates) == (1, 3)
    assert core.store.count("releases") == 2
    # the transcript keeps each release exactly as it arrived
    stored = [r.request for r in core.store.transcript() if r.method != "Enroll"]
    assert stored == [r_a.SerializeToString(), release("b", tokens["b"], 2).SerializeToString()]


async def test_stream_with_one_bad_release_stores_nothing(served) -> None:
    """A batch is all or nothing; the error names the bad release's position."""
    core, ch = served
    agg, _ = stubs(ch)
    await phase(ch, "enroll")
    tokens = {u: await enroll(agg, u) for u in ("a", "b")}
    await phase(ch, "collect")
    bad = release("b", "wrong-token", 3)
    before = core.store.snapshot()
    batch = pb.ReleaseBatch(releases=[release("a", tokens["a"], 1), bad])
    await expect(
        grpc.StatusCode.UNAUTHENTICATED, "releases[1].token", agg.SubmitStream(iter([batch]))
    )
    assert core.store.snapshot() == before


async def test_serve_phase_predict_model_and_health(served) -> None:
    """Train, then Predict answers per item; GetModel chunks verify; health is SERVING."""
    core, ch = served
    agg, _ = stubs(ch)
    await phase(ch, "enroll")
    users = [f"u{i}" for i in range(20)]
    tokens = {u: await enroll(agg, u) for u in users}
    await phase(ch, "collect")
    await agg.SubmitStream(
        iter([pb.ReleaseBatch(releases=[release(u, tokens[u], i) for i, u in enumerate(users)])])
    )
    query = release("u0", tokens["u0"], 99, nonce="query-0", purpose=pb.PURPOSE_QUERY)
    await expect(
        grpc.StatusCode.FAILED_PRECONDITION,
        "serve",
        agg.Predict(pb.PredictRequest(query=query, items=[1, 2])),
    )
    await phase(ch, "train")
    await phase(ch, "serve")
    resp = await agg.Predict(pb.PredictRequest(query=query, items=[1, 2, 3]))
    assert len(resp.scores) == 3 and len(resp.n_neighbours) == 3
    assert all(np.isfinite(resp.scores))
    await expect(
        grpc.StatusCode.INVALID_ARGUMENT,
        "items",
        agg.Predict(pb.PredictRequest(query=query, items=[N_ITEMS])),
    )
    n_before = core.store.count("releases")
    await agg.Predict(pb.PredictRequest(query=query, items=[1, 2, 3]))  # a retried query
    assert core.store.count("releases") == n_before
    chunks = [c async for c in agg.GetModel(pb.GetModelRequest(run_id=RUN))]
    archive = b"".join(c.data for c in chunks)
    assert hashlib.sha256(archive).hexdigest() == chunks[0].sha256
    assert int(np.load(io.BytesIO(archive))["n_profiles"]) == 20
    health = health_pb2_grpc.HealthStub(ch)
    h = await health.Check(health_pb2.HealthCheckRequest(service="privrec.v1.Aggregator"))
    assert h.status == health_pb2.HealthCheckResponse.SERVING
    await expect(
        grpc.StatusCode.FAILED_PRECONDITION,
        "cannot go back",
        pb_grpc.AdminStub(ch).SetPhase(
            pb.SetPhaseRequest(run_id=RUN, admin_token=ADMIN, phase="collect")
        ),
    )
