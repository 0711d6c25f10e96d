# ruff: noqa: E501  (the case table keeps one case per line)
"""Bad input on every RPC of a secure aggregator: each kind gets its precise status, the store
is unchanged and the server stays healthy (issue 12 (4), (5), (9)).

The server is in phase "serve" with ten enrolled users, their profiles, a trained model and one
answered query, so each request is refused by the check it is about, not by an earlier one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import pytest
import pytest_asyncio

from privrec.client.transport import make_channel
from privrec.shared.identity import AUTH_METADATA_KEY
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from tests.grpc_helpers import one_tier_spec
from tests.integration.test_protocol_grpc import N_ITEMS, release
from tests.secure_helpers import SecureWorld, secure_world, store_digest

RUN = "t-run"
ADMIN = "admin-secret"
USERS = [f"u{i}" for i in range(10)]
INV, PRE, UNAUTH, EXISTS, BIG, INTERNAL = (
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.INTERNAL,
)


@dataclasses.dataclass
class Served:
    world: SecureWorld
    tokens: dict[str, str]
    query: pb.PredictRequest


pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def served(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Served]:
    tmp = tmp_path_factory.mktemp("bad")
    async with secure_world(tmp, one_tier_spec(RUN, ADMIN, N_ITEMS)) as w:
        agg = w.stub("shard-0")
        await w.phase("enroll")
        tokens = {}
        for u in USERS:
            req = pb.EnrollRequest(run_id=RUN, user_id=u, shard="0/1", tier=pb.TIER_PRIVATE)
            tokens[u] = (await agg.Enroll(req)).token
        await w.phase("collect")
        batch = pb.ReleaseBatch(releases=[release(u, tokens[u], i) for i, u in enumerate(USERS)])
        await agg.SubmitStream(iter([batch]))
        await w.phase("train")
        await w.phase("serve")
        q = release("u0", tokens["u0"], 99, nonce="query-0", purpose=pb.PURPOSE_QUERY)
        query = pb.PredictRequest(query=q, items=[1, 2, 3])
        await agg.Predict(query)
        yield Served(w, tokens, query)


def _with_unknown(msg: Any, extra: bytes = b"\xf8\x07\x01") -> bytes:
    """`msg` plus field 127 (varint 1): a field the schema does not have."""
    return bytes(msg.SerializeToString()) + extra


def _rel(s: Served, **changes: Any) -> pb.Release:
    r = release("u1", s.tokens["u1"], 1)
    for k, v in changes.items():
        setattr(r, k, v)
    return r


def _query(s: Served, items: list[int] | None = None, **changes: Any) -> pb.PredictRequest:
    q = pb.PredictRequest()
    q.CopyFrom(s.query)
    for k, v in changes.items():
        setattr(q.query, k, v)
    if items is not None:
        q.items[:] = items
    return q


def _ser(m: Any) -> bytes:
    return bytes(m.SerializeToString())


Make = Callable[[Served], Any]


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    method: str
    make: Make  # bytes, or a list of bytes for SubmitStream
    code: grpc.StatusCode
    needle: str
    node: str = "shard-0"
    signed: bool = True


def enroll(user: str = "new", **kw: Any) -> Callable[[Served], bytes]:
    def make(s: Served) -> bytes:
        args = {"run_id": RUN, "user_id": user, "shard": "0/1", "tier": pb.TIER_PRIVATE} | kw
        return _ser(pb.EnrollRequest(**args))

    return make


def admin_req(cls: Any, **kw: Any) -> Callable[[Served], bytes]:
    return lambda s: _ser(cls(**({"run_id": RUN, "admin_token": ADMIN} | kw)))


def bad_index(s: Served) -> bytes:
    r = _rel(s)
    r.rpt.indices[-1] = N_ITEMS + 3
    return _ser(r)


def nan_value(s: Served) -> bytes:
    r = _rel(s)
    r.rpt.values[0] = float("nan")
    return _ser(r)


def no_payload(s: Served) -> bytes:
    r = _rel(s)
    r.ClearField("rpt")
    return _ser(r)


def wrong_kind(s: Served) -> bytes:
    r = _rel(s)
    r.jlt.values.extend([0.0] * 5)
    return _ser(r)


def nested_unknown(s: Served) -> bytes:
    r = _rel(s)
    r.rpt.MergeFromString(b"\xf8\x07\x01")
    return _ser(r)


def batch(*releases: bytes) -> list[bytes]:
    return [b"".join(b"\x0a" + _varint(len(r)) + r for r in releases)]


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def signed_twice(s: Served) -> list[bytes]:
    body = batch(_ser(_rel(s)))[0]
    return [s.world.identities["shard-0"].sign_batch(body)]


CASES = [
    # ---------------------------------------------------------------- Enroll
    Case("enroll undecodable", "Enroll", lambda s: b"\xff\xff", INV, "EnrollRequest"),
    Case("enroll truncated varint", "Enroll", lambda s: b"\x0a\x80", INV, "cannot be decoded"),
    Case("enroll bad utf-8", "Enroll", lambda s: b"\x12\x02\xc3\x28", INV, "cannot be decoded"),
    Case("enroll unknown field", "Enroll", lambda s: _with_unknown(pb.EnrollRequest(run_id=RUN, user_id="x", tier=1)), INV, "unknown field"),
    Case("enroll 10 MiB shard", "Enroll", enroll(shard="s" * (10 << 20)), BIG, "exceeds the limit"),
    Case("enroll 2 KiB unknown", "Enroll", lambda s: _with_unknown(pb.EnrollRequest(user_id="x"), b"\xfa\x07\x80\x10" + b"z" * 2048), BIG, "exceeds the limit"),
    Case("enroll 20 MiB unknown", "Enroll", lambda s: b"\xfa\x07\x80\x80\x80\x0a" + b"z" * (20 << 20), BIG, ""),
    Case("enroll long user id", "Enroll", enroll("x" * 600), INV, "(600 chars)"),
    Case("enroll empty user id", "Enroll", enroll(""), INV, "user_id"),
    Case("enroll control char", "Enroll", enroll("a\x00b"), INV, "control characters"),
    Case("enroll wrong run", "Enroll", enroll(run_id="other"), INV, "run_id"),
    Case("enroll tier unspecified", "Enroll", enroll(tier=0), INV, "tier"),
    Case("enroll tier 7", "Enroll", enroll(tier=7), INV, "tier"),
    Case("enroll public tier", "Enroll", enroll(tier=pb.TIER_PUBLIC), INV, "no public tier"),
    Case("enroll long shard", "Enroll", enroll(shard="s" * 100), INV, "shard"),
    Case("enroll in serve", "Enroll", enroll(), PRE, "phase"),
    Case("enroll unsigned", "Enroll", enroll(), UNAUTH, "signed", signed=False),
    Case("enroll tier and phase", "Enroll", enroll("u1", tier=pb.TIER_PUBLIC), INV, "no public tier", node="evil"),
    # ---------------------------------------------------------------- GetRunConfig
    Case("config undecodable", "GetRunConfig", lambda s: b"\xff", INV, "GetRunConfigRequest"),
    Case("config unknown field", "GetRunConfig", lambda s: _with_unknown(pb.GetRunConfigRequest()), INV, "unknown field"),
    Case("config wrong run", "GetRunConfig", lambda s: _ser(pb.GetRunConfigRequest(run_id="x")), INV, "run_id"),
    Case("config too large", "GetRunConfig", lambda s: _ser(pb.GetRunConfigRequest(run_id="x" * 2000)), BIG, "exceeds"),
    # ---------------------------------------------------------------- Submit
    Case("submit undecodable", "Submit", lambda s: b"\xff\xff", INV, "cannot be decoded"),
    Case("submit nested unknown", "Submit", nested_unknown, INV, "unknown field"),
    Case("submit wrong run", "Submit", lambda s: _ser(_rel(s, run_id="x")), INV, "run_id"),
    Case("submit ghost", "Submit", lambda s: _ser(_rel(s, user_id="ghost")), PRE, "not enrolled"),
    Case("submit as another node's user", "Submit", lambda s: _ser(_rel(s)), PRE, "not enrolled by this node", node="evil"),
    Case("submit wrong token", "Submit", lambda s: _ser(_rel(s, token="forged")), UNAUTH, "token"),
    Case("submit non-ascii token", "Submit", lambda s: _ser(_rel(s, token="tökén")), UNAUTH, "token"),
    Case("submit purpose query", "Submit", lambda s: _ser(_rel(s, purpose=pb.PURPOSE_QUERY)), INV, "purpose"),
    Case("submit purpose 9", "Submit", lambda s: _ser(_rel(s, purpose=9)), INV, "purpose"),
    Case("submit query nonce", "Submit", lambda s: _ser(_rel(s, nonce="query-3")), INV, "nonce"),
    Case("submit long nonce", "Submit", lambda s: _ser(_rel(s, nonce="n" * 500)), INV, "(500 chars)"),
    Case("submit no payload", "Submit", no_payload, INV, "payload"),
    Case("submit wrong payload", "Submit", wrong_kind, INV, "payload"),
    Case("submit index out of range", "Submit", bad_index, INV, "rpt.indices"),
    Case("submit nan", "Submit", nan_value, INV, "finite"),
    Case("submit too large", "Submit", lambda s: _ser(_rel(s, token="x" * 5000)), BIG, "max_release_bytes"),
    Case("submit in serve", "Submit", lambda s: _ser(_rel(s)), PRE, "phase"),
    Case("submit unsigned", "Submit", lambda s: _ser(_rel(s)), UNAUTH, "signed", signed=False),
    # ---------------------------------------------------------------- SubmitStream
    Case("stream undecodable", "SubmitStream", lambda s: [b"\xff\xff"], INV, "ReleaseBatch"),
    Case("stream truncated", "SubmitStream", lambda s: [b"\x0a\x05ab"], INV, "truncated", signed=False),
    Case("stream unknown field", "SubmitStream", lambda s: [b"\x1a\x00"], INV, "unknown field"),
    Case("stream auth twice", "SubmitStream", signed_twice, INV, "auth"),
    Case("stream unsigned", "SubmitStream", lambda s: batch(_ser(_rel(s))), UNAUTH, "signature", signed=False),
    Case("stream one bad release", "SubmitStream", lambda s: batch(_ser(_rel(s)), bad_index(s)), INV, "releases[1].rpt.indices"),
    Case("stream another node's user", "SubmitStream", lambda s: batch(_ser(_rel(s))), PRE, "not enrolled by this node", node="evil"),
    Case("stream in serve", "SubmitStream", lambda s: batch(_ser(_rel(s)), _ser(release("u2", s.tokens["u2"], 2))), PRE, "phase"),
    Case("stream 17 MiB batch", "SubmitStream", lambda s: [b"\x0a\x80\x80\x80\x08" + b"\x00" * (17 << 20)], BIG, ""),
    # ---------------------------------------------------------------- GetModel
    Case("model undecodable", "GetModel", lambda s: b"\xff", INV, "GetModelRequest"),
    Case("model unknown field", "GetModel", lambda s: _with_unknown(pb.GetModelRequest(run_id=RUN)), INV, "unknown field"),
    Case("model wrong run", "GetModel", lambda s: _ser(pb.GetModelRequest(run_id="x")), INV, "run_id"),
    Case("model round in one tier", "GetModel", lambda s: _ser(pb.GetModelRequest(run_id=RUN, round=3)), INV, "round"),
    Case("model wrong name", "GetModel", lambda s: _ser(pb.GetModelRequest(run_id=RUN, name="pmf")), INV, "name"),
    Case("model too large", "GetModel", lambda s: _ser(pb.GetModelRequest(run_id=RUN, name="n" * 2000)), BIG, "exceeds"),
    # ---------------------------------------------------------------- Predict
    Case("predict undecodable", "Predict", lambda s: b"\xff\xff", INV, "PredictRequest"),
    Case("predict unknown field", "Predict", lambda s: _with_unknown(s.query), INV, "unknown field"),
    Case("predict unknown in query", "Predict", lambda s: _ser(pb.PredictRequest(items=[1])) + b"\x0a\x03\xf8\x07\x01", INV, "PredictRequest.query"),
    Case("predict 20 MiB unknown", "Predict", lambda s: _ser(s.query) + b"\xfa\x07\x80\x80\x80\x0a" + b"z" * (20 << 20), BIG, ""),
    Case("predict 1 MiB unknown", "Predict", lambda s: _ser(s.query) + b"\xfa\x07\x80\x80\x40" + b"z" * (1 << 20), BIG, "exceeds the limit"),
    Case("predict no query", "Predict", lambda s: _ser(pb.PredictRequest(items=[1])), INV, "query"),
    Case("predict no items", "Predict", lambda s: _ser(_query(s, items=[])), INV, "items"),
    Case("predict item out of range", "Predict", lambda s: _ser(_query(s, items=[N_ITEMS])), INV, "out of range"),
    Case("predict 10001 items", "Predict", lambda s: _ser(_query(s, items=[1] * 10_001)), INV, "items"),
    Case("predict profile nonce", "Predict", lambda s: _ser(_query(s, nonce="profile")), INV, "profile"),
    Case("predict purpose profile", "Predict", lambda s: _ser(_query(s, purpose=pb.PURPOSE_PROFILE)), INV, "purpose"),
    Case("predict reused nonce", "Predict", lambda s: _ser(_query(s, items=[4, 5])), EXISTS, "different content"),
    Case("predict as another node's user", "Predict", lambda s: _ser(s.query), PRE, "not enrolled by this node", node="evil"),
    Case("predict non-ascii token", "Predict", lambda s: _ser(_query(s, token="ŧøķëñ")), UNAUTH, "token"),
    Case("predict unsigned", "Predict", lambda s: _ser(s.query), UNAUTH, "signed", signed=False),
    # ---------------------------------------------------------------- Recommend
    Case("recommend undecodable", "Recommend", lambda s: b"\xff", INV, "RecommendRequest"),
    Case("recommend n 0", "Recommend", lambda s: _ser(pb.RecommendRequest(query=s.query.query, n=0)), INV, "n"),
    Case("recommend n 5000", "Recommend", lambda s: _ser(pb.RecommendRequest(query=s.query.query, n=5000)), INV, "n"),
    Case("recommend no query", "Recommend", lambda s: _ser(pb.RecommendRequest(n=3)), INV, "query"),
    Case("recommend reused nonce", "Recommend", lambda s: _ser(pb.RecommendRequest(query=s.query.query, n=3)), EXISTS, "different content"),
    # ---------------------------------------------------------------- Admin
    Case("setphase undecodable", "SetPhase", lambda s: b"\xff\xff", INV, "SetPhaseRequest"),
    Case("setphase unknown field", "SetPhase", lambda s: _with_unknown(pb.SetPhaseRequest(run_id=RUN, admin_token=ADMIN, phase="serve")), INV, "unknown field"),
    Case("setphase wrong token", "SetPhase", admin_req(pb.SetPhaseRequest, admin_token="guess", phase="attack"), UNAUTH, "admin_token"),
    Case("setphase non-ascii token", "SetPhase", admin_req(pb.SetPhaseRequest, admin_token="ädmïn", phase="attack"), UNAUTH, "admin_token"),
    Case("setphase unknown phase", "SetPhase", admin_req(pb.SetPhaseRequest, phase="x" * 300), INV, "(300 chars)"),
    Case("setphase backwards", "SetPhase", admin_req(pb.SetPhaseRequest, phase="collect"), PRE, "cannot go back"),
    Case("setphase round one tier", "SetPhase", admin_req(pb.SetPhaseRequest, phase="serve", round=2), INV, "round"),
    Case("setphase wrong run", "SetPhase", admin_req(pb.SetPhaseRequest, run_id="x", phase="attack"), INV, "run_id"),
    Case("setphase too large", "SetPhase", admin_req(pb.SetPhaseRequest, phase="p" * 2000), BIG, "exceeds"),
    Case("status undecodable", "GetStatus", lambda s: b"\xff", INV, "GetStatusRequest"),
    Case("status unknown field", "GetStatus", lambda s: _with_unknown(pb.GetStatusRequest(run_id=RUN, admin_token=ADMIN)), INV, "unknown field"),
    Case("status wrong token", "GetStatus", admin_req(pb.GetStatusRequest, admin_token="guess"), UNAUTH, "admin_token"),
    Case("status non-ascii token", "GetStatus", admin_req(pb.GetStatusRequest, admin_token="ünïcode"), UNAUTH, "admin_token"),
]  # fmt: skip


async def _call(s: Served, case: Case, raw: Any) -> None:
    w = s.world
    if case.signed:
        fn = w.raw(case.node, case.method)
    else:  # a TLS channel with the node's certificate that signs nothing
        ch = make_channel(w.target, tls_dir=w.tls_dir, node=case.node)
        service = "Admin" if case.method in ("SetPhase", "GetStatus") else "Aggregator"
        path = f"/privrec.v1.{service}/{case.method}"
        fn = ch.stream_unary(path) if case.method == "SubmitStream" else ch.unary_unary(path)
    try:
        if case.method == "SubmitStream":
            await fn(iter(raw), timeout=60)
        elif case.method == "GetModel":
            [c async for c in fn(raw, timeout=60)]
        else:
            await fn(raw, timeout=60)
    finally:
        if not case.signed:
            await ch.close()


async def test_the_matrix_has_sixty_kinds_over_every_rpc() -> None:
    """At least 60 kinds, each RPC of both services covered."""
    assert len(CASES) >= 60 and len({c.name for c in CASES}) == len(CASES)
    methods = {"Enroll", "GetRunConfig", "Submit", "SubmitStream", "GetModel", "Predict"}
    assert {c.method for c in CASES} >= methods | {"Recommend", "SetPhase", "GetStatus"}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_bad_input_gets_its_status_and_changes_nothing(served: Served, case: Case) -> None:
    """Regression: #12 (4) undecodable bytes and unexpected exceptions came back UNKNOWN with a
    Python class name; (5) no byte limits, echoes of 1 MiB ids; (9) a reused query nonce was
    answered and the profile nonce accepted as a query's."""
    path = served.world.core.store.path
    before = store_digest(path)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await _call(served, case, case.make(served))
    details = info.value.details() or ""
    assert info.value.code() == case.code, details
    assert case.needle in details, details
    assert len(details) < 400  # echoes are cut short
    for internal in ("Traceback", "DecodeError", "Exception", "TypeError", ".py"):
        assert internal not in details
    assert store_digest(path) == before
    assert await served.world.healthy()


async def test_an_unexpected_failure_is_internal_without_python_internals(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any exception the core did not mean becomes INTERNAL "internal error (ref …)"; the class
    and text stay in the server's log."""

    def boom(_req: object) -> None:
        raise RuntimeError("secret internals /srv/x.py line 3")

    monkeypatch.setattr(served.world.core, "run_config", boom)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await served.world.raw("shard-0", "GetRunConfig")(b"", timeout=10)
    assert info.value.code() == INTERNAL
    details = info.value.details() or ""
    assert details.startswith("internal error (ref ")
    assert "RuntimeError" not in details and "secret" not in details
    assert await served.world.healthy()


async def test_a_retried_query_is_answered_again_and_stored_once(served: Served) -> None:
    """The same query bytes again: the same answer, no new record (a retry, not a new query)."""
    path = served.world.core.store.path
    before = store_digest(path)
    agg = served.world.stub("shard-0")
    a = await agg.Predict(served.query)
    b = await agg.Predict(served.query)
    assert list(a.scores) == list(b.scores)
    assert store_digest(path) == before


async def test_every_answered_query_is_a_recorded_release(served: Served) -> None:
    """Regression: #12 (9) fifty query vectors under one reused nonce were all answered and
    none stored. Now each answered query is in the transcript and the ledger's count."""
    agg = served.world.stub("shard-0")
    store = served.world.core.store
    n_before = store.count_purpose(pb.PURPOSE_QUERY)
    answered = 0
    for i in range(5):
        q = release("u3", served.tokens["u3"], 200 + i, nonce="query-0", purpose=pb.PURPOSE_QUERY)
        try:
            await agg.Predict(pb.PredictRequest(query=q, items=[1, 2]))
            answered += 1
        except grpc.aio.AioRpcError as exc:
            assert exc.code() == EXISTS
    assert answered == 1
    assert store.count_purpose(pb.PURPOSE_QUERY) == n_before + 1
    counts = {(u, p): n for u, p, n in store.release_counts()}
    assert counts[("u3", pb.PURPOSE_QUERY)] == 1
    stored = [r for r in store.transcript() if r.method == "Predict"]
    assert any(pb.PredictRequest.FromString(r.request).query.user_id == "u3" for r in stored)


async def test_unsigned_metadata_key_is_binary() -> None:
    """The signature travels as binary metadata (gRPC requires the -bin suffix for bytes)."""
    assert AUTH_METADATA_KEY.endswith("-bin")
