"""EnrollBatch (issue 13, target 4): many users per call, one node signature per batch, each
enrollment still its own transcript record, idempotent per user, refusals naming the user."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from privrec.client.transport import GrpcTransport
from privrec.server.aggregator import Aggregator
from privrec.server.store import Store
from privrec.shared.errors import AlreadyExistsError, ValidationError
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from tests.grpc_helpers import one_tier_spec
from tests.secure_helpers import SecureWorld, secure_world, store_digest

RUN = "t-run"
ADMIN = "admin-secret"
N_ITEMS = 40


def req(user: str, tier: int = pb.TIER_PRIVATE) -> pb.EnrollRequest:
    return pb.EnrollRequest(run_id=RUN, user_id=user, shard="0/1", tier=tier)


def core_at(tmp_path: Path, name: str) -> Aggregator:
    core = Aggregator(one_tier_spec(RUN, ADMIN, N_ITEMS), Store(tmp_path / f"{name}.sqlite"))
    core.set_phase(pb.SetPhaseRequest(run_id=RUN, admin_token=ADMIN, phase="enroll"))
    return core


def transcript(core: Aggregator) -> list[tuple[int, str, bytes]]:
    return [(r.seq, r.method, r.request) for r in core.store.transcript()]


def test_enroll_many_stores_what_unary_enrolls_store(tmp_path: Path) -> None:
    """A batch leaves the same transcript records, enrollments and receipts as one Enroll per
    user, and the same feed records (what a live adversary sees)."""
    users = [f"u{i}" for i in range(7)]
    raws = [req(u).SerializeToString() for u in users]
    one, many = core_at(tmp_path, "one"), core_at(tmp_path, "many")
    fed_one: list[pb.TranscriptRecord] = []
    fed_many: list[list[pb.TranscriptRecord]] = []
    one.observers.append(fed_one.append)
    many.add_batch_observer(fed_many.append)
    unary = [one.enroll(r, "shard-0") for r in raws]
    batched = many.enroll_many(raws, "shard-0")
    assert batched == unary
    assert transcript(many) == transcript(one)
    assert sorted(many.store.owners()) == sorted(one.store.owners())
    assert len(fed_many) == 1  # one feed message per accepted batch
    assert [(r.seq, r.method, r.request) for r in fed_many[0]] == [
        (r.seq, r.method, r.request) for r in fed_one
    ]


def test_enroll_many_is_idempotent_per_user(tmp_path: Path) -> None:
    """Users enrolled before, or twice in one batch, are answered already_enrolled with their
    receipt and stored once."""
    core = core_at(tmp_path, "s")
    first = core.enroll_many([req("a").SerializeToString()], "shard-0")
    out = core.enroll_many([req(u).SerializeToString() for u in ("a", "b", "b", "c")], "shard-0")
    assert [r.already_enrolled for r in out] == [True, False, True, False]
    assert out[0].token == first[0].token and out[1].token == out[2].token
    assert core.store.snapshot() == (3, 3, 0)


def test_enroll_many_refuses_the_whole_batch_naming_the_user(tmp_path: Path) -> None:
    """Another node's user, a second tier in the batch or a bad field refuse the whole batch
    with the request's position, and nothing is stored."""
    core = core_at(tmp_path, "s")
    core.enroll_many([req("victim").SerializeToString()], "shard-0")
    before = core.store.snapshot()
    bad_cases = [
        ([req("x"), req("victim")], "evil", AlreadyExistsError, "requests[1].user_id"),
        ([req("x"), req("x", pb.TIER_PUBLIC)], "shard-0", ValidationError, "requests[1].tier"),
        ([req("x"), req("")], "shard-0", ValidationError, "requests[1].user_id"),
    ]
    for reqs, node, err, needle in bad_cases:
        with pytest.raises(err) as info:
            core.enroll_many([r.SerializeToString() for r in reqs], node)
        assert needle in str(info.value), str(info.value)
        assert core.store.snapshot() == before
    # the same user twice in one batch with two tiers (a two-tier run would accept each)
    core._allowed[pb.TIER_PUBLIC] = "public_ratings"
    with pytest.raises(AlreadyExistsError, match=r"requests\[1\]\.user_id: 'y' is already"):
        core.enroll_many(
            [req("y").SerializeToString(), req("y", pb.TIER_PUBLIC).SerializeToString()],
            "shard-0",
        )
    assert core.store.snapshot() == before


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[SecureWorld]:
    async with secure_world(tmp_path, one_tier_spec(RUN, ADMIN, N_ITEMS)) as w:
        yield w


async def test_enroll_batch_over_grpc_is_signed_per_batch(world: SecureWorld) -> None:
    """A signed EnrollBatch enrolls for its node; an unsigned one or a replayed one is
    refused UNAUTHENTICATED and stores nothing; another node cannot enroll her users."""
    await world.phase("enroll")
    ident = world.identities["shard-0"]
    async with GrpcTransport(world.target, RUN, identity=ident, tls_dir=world.tls_dir) as transport:
        out = await transport.enroll_batch([req(f"u{i}") for i in range(5)])
        assert [r.already_enrolled for r in out] == [False] * 5
        again = await transport.enroll_batch([req("u0"), req("u9")])
        assert again[0].already_enrolled and again[0].token == out[0].token
    assert world.core.store.snapshot()[1] == 6
    before = store_digest(world.core.store.path)
    call = world.raw("shard-0", "EnrollBatch")
    body = pb.EnrollRequestBatch(requests=[req("z")]).SerializeToString()
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call(body)
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
    signed = ident.sign_batch(body, "EnrollBatch")
    resp = pb.EnrollBatchResponse.FromString(await call(signed))
    assert not resp.responses[0].already_enrolled
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call(signed)  # the same signed bytes again: a replay
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "replayed" in (info.value.details() or "")
    wrong_method = ident.sign_batch(body, "SubmitStream")  # a signature for another method
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call(wrong_method)
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
    evil = world.identities["evil"].sign_batch(
        pb.EnrollRequestBatch(requests=[req("u1")]).SerializeToString(), "EnrollBatch"
    )
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await world.raw("evil", "EnrollBatch")(evil)
    assert info.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert store_digest(world.core.store.path) != before  # only "z" was added
    assert world.core.store.snapshot()[1] == 7
