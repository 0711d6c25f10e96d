"""Nobody can act as another user: node authentication and per-user authority (issue 12).

A secure aggregator (mutual TLS, node signatures against an allow-list) on a free port; the
honest shard `shard-0` and an allowed but malicious node `evil` (the adversary's sybil clients
are such a node).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from privrec.client.transport import make_channel
from privrec.shared.identity import AUTH_METADATA_KEY, NodeIdentity
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.proto.privrec.v1 import aggregator_pb2_grpc as pb_grpc
from tests.grpc_helpers import expect, one_tier_spec
from tests.integration.test_protocol_grpc import N_ITEMS, release
from tests.secure_helpers import SecureWorld, secure_world, store_digest

RUN = "t-run"
ADMIN = "admin-secret"


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[SecureWorld]:
    async with secure_world(tmp_path, one_tier_spec(RUN, ADMIN, N_ITEMS)) as w:
        yield w


def enroll_req(user: str) -> pb.EnrollRequest:
    return pb.EnrollRequest(run_id=RUN, user_id=user, shard="0/1", tier=pb.TIER_PRIVATE)


async def test_enrolling_another_nodes_user_is_refused_and_reveals_nothing(world) -> None:
    """Regression: #12 (1) Enroll with another user's id returned her token and told anyone
    that the id exists. Now the other node gets a refusal with nothing about her in it."""
    honest, evil = world.stub("shard-0"), world.stub("evil")
    await world.phase("enroll")
    mine = await honest.Enroll(enroll_req("victim"))
    assert not mine.already_enrolled
    before = store_digest(world.core.store.path)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await evil.Enroll(enroll_req("victim"))
    assert info.value.code() == grpc.StatusCode.ALREADY_EXISTS
    details = info.value.details() or ""
    for secret in (mine.token, "shard-0", "TIER", "already_enrolled"):
        assert secret not in details
    assert store_digest(world.core.store.path) == before
    # the honest node's own re-enrollment is idempotent (a restarted shard)
    again = await honest.Enroll(enroll_req("victim"))
    assert again.already_enrolled and again.token == mine.token


async def test_another_node_cannot_submit_or_query_as_her(world) -> None:
    """Regression: #12 (1)+(2) a token stolen (here: read from the transcript) let an attacker
    submit a poisoned profile first, so that the victim's real one was acknowledged as a
    duplicate and dropped, and answered its Predict. Now the token is a public receipt:
    the attacker's node is refused exactly as for an id nobody enrolled, and the victim's
    profile is stored."""
    honest, evil = world.stub("shard-0"), world.stub("evil")
    await world.phase("enroll")
    token = (await honest.Enroll(enroll_req("victim"))).token
    evil_token = (await evil.Enroll(enroll_req("sybil-1"))).token
    await world.phase("collect")
    # what the attacker reads in the transcript
    stored = [r.request for r in world.core.store.transcript() if r.method == "Enroll"]
    assert stored, "the enrollment is in the transcript"
    before = store_digest(world.core.store.path)
    poisoned = release("victim", token, seed=666)
    await expect(
        grpc.StatusCode.FAILED_PRECONDITION, "not enrolled by this node", evil.Submit(poisoned)
    )
    ghost = release("nobody", token, seed=1)
    await expect(
        grpc.StatusCode.FAILED_PRECONDITION, "not enrolled by this node", evil.Submit(ghost)
    )
    batch = pb.ReleaseBatch(releases=[release("sybil-1", evil_token, 2), poisoned])
    await expect(
        grpc.StatusCode.FAILED_PRECONDITION,
        "releases[1].user_id",
        evil.SubmitStream(iter([batch])),
    )
    assert store_digest(world.core.store.path) == before
    # the victim's own profile is stored, not dropped as a duplicate
    real = release("victim", token, seed=1)
    resp = await honest.Submit(real)
    assert not resp.duplicate and resp.seq > 0
    # a different profile under her used nonce is refused, never acknowledged and dropped
    await expect(
        grpc.StatusCode.ALREADY_EXISTS,
        "different content",
        honest.Submit(release("victim", token, 9)),
    )
    # train and serve: the attacker's query as her is refused too
    others = {f"u{i}": (await honest.Enroll(enroll_req(f"u{i}"))).token for i in range(8)}
    for i, (u, t) in enumerate(others.items()):
        await honest.Submit(release(u, t, 10 + i))
    await world.phase("train")
    await world.phase("serve")
    query = release("victim", token, 77, nonce="query-0", purpose=pb.PURPOSE_QUERY)
    await expect(
        grpc.StatusCode.FAILED_PRECONDITION,
        "not enrolled by this node",
        evil.Predict(pb.PredictRequest(query=query, items=[1, 2])),
    )
    answer = await honest.Predict(pb.PredictRequest(query=query, items=[1, 2]))
    assert len(answer.scores) == 2


async def test_requests_must_be_signed_by_an_allowed_node(world, tmp_path: Path) -> None:
    """Unsigned, forged, replayed, stale and unknown-node requests are UNAUTHENTICATED."""
    await world.phase("enroll")
    before = store_digest(world.core.store.path)
    req = enroll_req("u1")
    raw = req.SerializeToString()
    # a TLS channel with a valid client certificate but no signature
    plain = make_channel(world.target, tls_dir=world.tls_dir, node="shard-0")
    plain_enroll = plain.unary_unary("/privrec.v1.Aggregator/Enroll")
    await expect(grpc.StatusCode.UNAUTHENTICATED, "must be signed", plain_enroll(raw))
    ident = world.identities["shard-0"]
    good = ident.metadata("Enroll", raw)
    # signature over other bytes
    forged = ident.metadata("Enroll", enroll_req("u2").SerializeToString())
    await expect(
        grpc.StatusCode.UNAUTHENTICATED, "bad signature", plain_enroll(raw, metadata=forged)
    )
    # signed for another method
    other = ident.metadata("Predict", raw)
    await expect(
        grpc.StatusCode.UNAUTHENTICATED, "bad signature", plain_enroll(raw, metadata=other)
    )
    # a node that is not on the allow-list (its key is valid, its name is not listed)
    stranger = NodeIdentity.generate("stranger").metadata("Enroll", raw)
    await expect(
        grpc.StatusCode.UNAUTHENTICATED, "allow-list", plain_enroll(raw, metadata=stranger)
    )
    # an allowed name with another key
    impostor = NodeIdentity.generate("shard-0").metadata("Enroll", raw)
    await expect(
        grpc.StatusCode.UNAUTHENTICATED, "bad signature", plain_enroll(raw, metadata=impostor)
    )
    # stale: ten minutes old
    auth = ident.sign(
        "Enroll",
        __import__("hashlib").sha256(raw).digest(),
        timestamp_ms=int((time.time() - 600) * 1000),
    )
    stale = ((AUTH_METADATA_KEY, auth.SerializeToString()),)
    await expect(grpc.StatusCode.UNAUTHENTICATED, "timestamp", plain_enroll(raw, metadata=stale))
    # garbage in the metadata
    junk = ((AUTH_METADATA_KEY, b"\xff\xff\xff"),)
    await expect(grpc.StatusCode.UNAUTHENTICATED, "NodeAuth", plain_enroll(raw, metadata=junk))
    assert store_digest(world.core.store.path) == before
    # the genuine one is accepted once; the same signed request again is a replay
    await plain_enroll(raw, metadata=good)
    await expect(grpc.StatusCode.UNAUTHENTICATED, "replayed", plain_enroll(raw, metadata=good))
    # a batch without its signature
    stream = plain.stream_unary("/privrec.v1.Aggregator/SubmitStream")
    await world.phase("collect")
    body = pb.ReleaseBatch(releases=[release("u1", "x")]).SerializeToString()
    await expect(grpc.StatusCode.UNAUTHENTICATED, "signature", stream(iter([body])))
    await plain.close()


async def test_plaintext_and_certificateless_clients_are_refused(world, tmp_path: Path) -> None:
    """The server speaks only TLS and requires a client certificate from its CA."""
    from privrec.shared.tls import CHANNEL_OPTIONS

    plain = grpc.aio.insecure_channel(world.target)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await pb_grpc.AggregatorStub(plain).GetRunConfig(
            pb.GetRunConfigRequest(run_id=RUN), timeout=5
        )
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    await plain.close()
    ca = (world.tls_dir / "ca.pem").read_bytes()
    no_cert = grpc.aio.secure_channel(
        world.target, grpc.ssl_channel_credentials(root_certificates=ca), options=CHANNEL_OPTIONS
    )
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await pb_grpc.AggregatorStub(no_cert).GetRunConfig(
            pb.GetRunConfigRequest(run_id=RUN), timeout=5
        )
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    await no_cert.close()
    # with its certificate, anyone allowed may read the public configuration
    rc = await world.stub("evil").GetRunConfig(pb.GetRunConfigRequest(run_id=RUN))
    assert rc.run_id == RUN


def foreign_channel(world: SecureWorld, certificate: str, key: str) -> grpc.aio.Channel:
    """A TLS channel presenting `certificate`'s certificate whose requests `key` signs."""
    from privrec.shared.identity import signing_interceptors
    from privrec.shared.tls import CHANNEL_OPTIONS, channel_credentials

    return grpc.aio.secure_channel(
        world.target,
        channel_credentials(world.tls_dir, certificate),
        options=CHANNEL_OPTIONS,
        interceptors=signing_interceptors(world.identities[key]),
    )


@pytest.mark.parametrize(("certificate", "key"), [("evil", "shard-0"), ("shard-0", "evil")])
async def test_a_node_key_works_only_with_its_own_certificate(
    world, certificate: str, key: str
) -> None:
    """Regression: #27 (6) a node's TLS certificate was not bound to its signing key: with
    shard-0's key (stolen) and its own certificate, the evil node acted as shard-0 (and a
    holder of shard-0's certificate with evil's key as evil). Now the certificate must name
    the signer, on unary calls and on signed batches alike."""
    await world.phase("enroll")
    await world.stub("shard-0").Enroll(enroll_req("victim"))
    channel = foreign_channel(world, certificate, key)
    try:
        stub = pb_grpc.AggregatorStub(channel)
        before = store_digest(world.core.store.path)
        await expect(
            grpc.StatusCode.UNAUTHENTICATED, "certificate names another node",
            stub.Enroll(enroll_req("u-mixed")),
        )  # fmt: skip
        batch = pb.EnrollRequestBatch(requests=[enroll_req("u-mixed-2")])
        signed = world.identities[key].sign_batch(batch.SerializeToString(), "EnrollBatch")
        raw = channel.unary_unary("/privrec.v1.Aggregator/EnrollBatch")
        await expect(grpc.StatusCode.UNAUTHENTICATED, "certificate names another node", raw(signed))
        assert store_digest(world.core.store.path) == before
    finally:
        await channel.close()


async def test_a_node_lists_only_its_own_users(world) -> None:
    """ListUsers (what a restarted shard continues from) shows a node its own users, with their
    receipts and whether their profile is stored, and nothing of another node's."""
    honest, evil = world.stub("shard-0"), world.stub("evil")
    await world.phase("enroll")
    mine = {u: (await honest.Enroll(enroll_req(u))).token for u in ("a", "b", "c")}
    await evil.Enroll(enroll_req("sybil-1"))
    listed = await honest.ListUsers(pb.ListUsersRequest(run_id=RUN))
    assert {(u.user_id, u.token, u.profile) for u in listed.users} == {
        (u, t, False) for u, t in mine.items()
    }
    page = await honest.ListUsers(pb.ListUsersRequest(run_id=RUN, after="a", limit=1))
    assert [u.user_id for u in page.users] == ["b"]
    theirs = await evil.ListUsers(pb.ListUsersRequest(run_id=RUN))
    assert [u.user_id for u in theirs.users] == ["sybil-1"]
    # shard-0's certificate without its key: no signature, no list
    plain = make_channel(world.target, tls_dir=world.tls_dir, node="shard-0")
    try:
        unsigned = pb_grpc.AggregatorStub(plain).ListUsers(pb.ListUsersRequest(run_id=RUN))
        await expect(grpc.StatusCode.UNAUTHENTICATED, "must be signed", unsigned)
    finally:
        await plain.close()


async def test_only_the_adversary_reads_the_transcript(world) -> None:
    """GetTranscript (what a restarted adversary missed) is the feed, stored: a client node
    is refused, as the broker refuses it the feed."""
    honest = world.stub("shard-0")
    await world.phase("enroll")
    await honest.Enroll(enroll_req("a"))
    await expect(
        grpc.StatusCode.UNAUTHENTICATED,
        "may not read the transcript",
        honest.GetTranscript(pb.GetTranscriptRequest(run_id=RUN)),
    )
    req = pb.GetTranscriptRequest(run_id=RUN, after_seq=0).SerializeToString()
    records = world.core.transcript_after(req, "adversary").records
    assert [(r.seq, r.method) for r in records] == [(1, "Enroll")]
