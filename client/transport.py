"""How a client shard talks to the aggregator.

`Transport` is the aggregator's client-side API; `GrpcTransport` is its gRPC implementation,
through the generated `AggregatorStub`, with retries. The in-process implementation that
`--launcher inprocess` uses lives with the launcher (`sim.inprocess`), so that the client never
imports the server. Both raise the same `shared.errors` exceptions (`shared.rpc`), so the user
agents and the shard runner are transport-free, and both launchers give the same numbers for
the same seed.

Security (`privrec.shared.identity`, `privrec.shared.tls`): with a `NodeIdentity` every user
request is signed by the node (a channel interceptor for unary calls, one signature per
`ReleaseBatch`), and with a certificate directory the channel is mutual TLS. Without either the
transport speaks plaintext and, at most, names its node unsigned (`--insecure`).

Retries: a transient failure (UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED, "busy"
RESOURCE_EXHAUSTED) is retried with exponential backoff and full jitter, capped at
`max_backoff_s`, until `retry_deadline_s` has passed since the first attempt (default 180 s:
longer than a server restart under load), so a server killed and restarted, or one shedding
load, loses no request. While the channel is down, a retry goes out as soon as it connects
again, never later than its backoff, and the channel tries to connect every
`RECONNECT_BACKOFF_MS` at most (gRPC's default backoff grows to 120 s): a shard started before
its server calls within a quarter of a second of the server listening.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import random
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol, Self, TypeVar

import grpc

from privrec.shared.errors import ProtocolError
from privrec.shared.identity import NodeIdentity, signing_interceptors
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.proto.privrec.v1 import aggregator_pb2_grpc as pb_grpc
from privrec.shared.rpc import raise_from_rpc, retryable

logger = logging.getLogger(__name__)
T = TypeVar("T")

MAX_MESSAGE_BYTES = 64 << 20
"""Largest message either way (a batch of releases, a model chunk)."""

RECONNECT_BACKOFF_MS = (100, 250)
"""gRPC's first and longest wait between two connection attempts to a server that is down
(its defaults, 1 s and 120 s, would keep a shard started before its server waiting up to two
minutes after the server listens; one TCP connection attempt per 250 ms costs nothing)."""


class Transport(Protocol):
    """The aggregator's client-side API."""

    async def run_config(self) -> pb.RunConfig:
        """The run's public configuration (GetRunConfig)."""

    async def enroll(self, req: pb.EnrollRequest) -> pb.EnrollResponse:
        """Enroll one user."""

    async def enroll_batch(self, reqs: list[pb.EnrollRequest]) -> list[pb.EnrollResponse]:
        """Enroll a batch of users; one response each, in order."""

    async def submit_batch(self, releases: list[pb.Release]) -> tuple[int, int]:
        """Submit releases; (accepted, duplicates)."""

    async def predict(self, req: pb.PredictRequest) -> pb.PredictResponse:
        """Ask one prediction query."""

    async def predict_batch(self, reqs: list[pb.PredictRequest]) -> list[pb.PredictResponse]:
        """Ask a batch of prediction queries; one response each, in order."""

    async def model_archive(self, round_: int | None = None) -> bytes:
        """The fitted model's archive (of `round_`, or the final one)."""

    async def list_users(self, after: str = "") -> list[pb.UserState]:
        """The enrolled users after `after`, one page."""

    async def transcript_after(self, seq: int) -> list[pb.TranscriptRecord]:
        """The transcript records after `seq`, one page."""

    async def close(self) -> None:
        """Close the connection."""


async def all_users(transport: Transport) -> dict[str, pb.UserState]:
    """Every user this node enrolled, as the server holds them (`ListUsers`, page by page):
    what a restarted client node continues from."""
    out: dict[str, pb.UserState] = {}
    after = ""
    while True:
        page = await transport.list_users(after)
        out |= {u.user_id: u for u in page}
        if not page:
            return out
        after = page[-1].user_id


def verified_archive(chunks: list[pb.ModelChunk]) -> bytes:
    """Join GetModel chunks, checking order, count and the sha256 the server announced."""
    if not chunks or [c.index for c in chunks] != list(range(chunks[0].total)):
        raise ProtocolError("GetModel: chunks missing or out of order")
    data = b"".join(c.data for c in chunks)
    if hashlib.sha256(data).hexdigest() != chunks[0].sha256:
        raise ProtocolError("GetModel: archive does not match its sha256")
    return data


def make_channel(
    target: str,
    *,
    identity: NodeIdentity | None = None,
    tls_dir: str | Path | None = None,
    node: str = "",
) -> grpc.aio.Channel:
    """A channel to the aggregator: mutual TLS with ``tls_dir/NODE.pem`` when `tls_dir` is
    given (NODE = the identity's name, else `node`), every user request signed by `identity`
    when given, else named `node` unsigned."""
    first_ms, longest_ms = RECONNECT_BACKOFF_MS
    options: list[tuple[str, Any]] = [
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.initial_reconnect_backoff_ms", first_ms),
        ("grpc.min_reconnect_backoff_ms", first_ms),
        ("grpc.max_reconnect_backoff_ms", longest_ms),
    ]
    name = identity.node_id if identity is not None else node
    interceptors = signing_interceptors(identity, name) if (identity is not None or name) else None
    if tls_dir is not None:
        from privrec.shared.tls import CHANNEL_OPTIONS, channel_credentials

        if not name:
            raise ProtocolError("TLS needs a node name (its certificate is NODE.pem)")
        return grpc.aio.secure_channel(
            target,
            channel_credentials(tls_dir, name),
            options=[*options, *CHANNEL_OPTIONS],
            interceptors=interceptors,
        )
    return grpc.aio.insecure_channel(target, options=options, interceptors=interceptors)


class GrpcTransport:
    """gRPC client with retries (see the module docstring; safe because every release carries
    an idempotency nonce); other errors are final.

    An async context manager (``async with GrpcTransport(target, run_id) as t: ...`` closes
    the channel on exit); `close` does the same by hand.

    Args:
        target: "host:port" of the aggregator.
        run_id: the run (sent with every request).
        deadline_s: per-call deadline.
        retries: most retries after the first attempt (the deadline usually ends them first).
        backoff_s: first backoff; doubles each retry up to `max_backoff_s`, each wait drawn
            uniformly below it (full jitter) unless `jitter` is given (a factor per wait).
        identity: the node's key: signs every user request (node authentication).
        tls_dir: a `privrec certs` directory: mutual TLS with ``NODE.pem``.
        node: the node's name when there is no identity (TLS certificate, insecure claim).
        retry_deadline_s: no retry starts later than this after the first attempt.
        max_backoff_s: the longest wait between two attempts.
    """

    def __init__(
        self,
        target: str,
        run_id: str,
        *,
        deadline_s: float = 30.0,
        retries: int = 1000,
        backoff_s: float = 0.2,
        jitter: Callable[[], float] | None = None,
        identity: NodeIdentity | None = None,
        tls_dir: str | Path | None = None,
        node: str = "",
        retry_deadline_s: float = 180.0,
        max_backoff_s: float = 5.0,
    ) -> None:
        self.target, self.run_id = target, run_id
        self.deadline_s, self.retries, self.backoff_s = deadline_s, retries, backoff_s
        self.retry_deadline_s, self.max_backoff_s = retry_deadline_s, max_backoff_s
        self._jitter = jitter or random.random
        self.identity = identity
        self.channel = make_channel(target, identity=identity, tls_dir=tls_dir, node=node)
        self.stub = pb_grpc.AggregatorStub(self.channel)
        # SubmitStream carries bytes (serialized once; the interceptor signs them per batch)
        self._submit_stream: grpc.aio.StreamUnaryMultiCallable[bytes, pb.SubmitStreamResponse]
        self._submit_stream = self.channel.stream_unary(
            "/privrec.v1.Aggregator/SubmitStream",
            request_serializer=None,
            response_deserializer=pb.SubmitStreamResponse.FromString,
        )
        self._enroll_batch: grpc.aio.UnaryUnaryMultiCallable[bytes, pb.EnrollBatchResponse]
        self._enroll_batch = self.channel.unary_unary(
            "/privrec.v1.Aggregator/EnrollBatch",
            request_serializer=None,
            response_deserializer=pb.EnrollBatchResponse.FromString,
        )
        self.retried = 0

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _call(self, what: str, attempt: Callable[[], Awaitable[T]]) -> T:
        delay = self.backoff_s
        give_up = time.monotonic() + self.retry_deadline_s
        for i in range(self.retries + 1):
            try:
                return await attempt()
            except grpc.aio.AioRpcError as exc:
                code, details = exc.code(), exc.details() or ""
                wait = min(delay, self.max_backoff_s) * self._jitter()
                if (
                    not retryable(code, details)
                    or i == self.retries
                    or time.monotonic() + wait > give_up
                ):
                    raise raise_from_rpc(exc) from exc
                self.retried += 1
                log = logger.debug if code == grpc.StatusCode.RESOURCE_EXHAUSTED else logger.info
                log("%s: %s, retry %d in %.2fs", what, code.name, i + 1, wait)
                await self._pause(wait)
                delay *= 2
        raise AssertionError("unreachable")

    async def _pause(self, wait: float) -> None:
        """Wait `wait` s before a retry, cut short when a channel that is down connects again
        (a server that answers stays backed off: it is busy or failing, not absent)."""
        if self.channel.get_state() == grpc.ChannelConnectivity.READY:
            await asyncio.sleep(wait)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.channel.channel_ready(), wait)

    def _batch_bytes(self, releases: list[pb.Release]) -> bytes:
        # the channel's NodeSigner appends the batch's signature on its way out
        return pb.ReleaseBatch(releases=releases).SerializeToString()

    async def run_config(self) -> pb.RunConfig:
        """The run's public configuration (GetRunConfig, retried like every call)."""
        req = pb.GetRunConfigRequest(run_id=self.run_id)
        return await self._call(
            "GetRunConfig", lambda: self.stub.GetRunConfig(req, timeout=self.deadline_s)
        )

    async def enroll(self, req: pb.EnrollRequest) -> pb.EnrollResponse:
        """Enroll one user (Enroll)."""
        return await self._call("Enroll", lambda: self.stub.Enroll(req, timeout=self.deadline_s))

    async def enroll_batch(self, reqs: list[pb.EnrollRequest]) -> list[pb.EnrollResponse]:
        """Enroll many users in one EnrollBatch call (one signature), idempotent like
        `enroll`, so retried; returns one response per request, in order."""
        body = pb.EnrollRequestBatch(requests=reqs).SerializeToString()

        async def attempt() -> list[pb.EnrollResponse]:
            # signed afresh on every attempt (a new nonce: the server refuses a replay)
            raw = self.identity.sign_batch(body, "EnrollBatch") if self.identity else body
            resp = await self._enroll_batch(raw, timeout=self.deadline_s)
            return list(resp.responses)

        return await self._call("EnrollBatch", attempt)

    async def submit_batch(self, releases: list[pb.Release]) -> tuple[int, int]:
        """Send a batch as one SubmitStream; returns (accepted, duplicates)."""

        async def attempt() -> tuple[int, int]:
            # signed afresh on every attempt (a new nonce: the server refuses a replay)
            batch = self._batch_bytes(releases)
            resp = await self._submit_stream(iter([batch]), timeout=self.deadline_s)
            return int(resp.accepted), int(resp.duplicates)

        return await self._call("SubmitStream", attempt)

    async def submit_stream(self, batches: list[list[pb.Release]]) -> tuple[int, int]:
        """Many batches on ONE stream (the ingest benchmark's path); no retry."""
        try:
            resp = await self._submit_stream(
                iter([self._batch_bytes(b) for b in batches]),
                timeout=self.deadline_s * 10,
            )
        except grpc.aio.AioRpcError as exc:
            raise raise_from_rpc(exc) from exc
        return int(resp.accepted), int(resp.duplicates)

    async def predict(self, req: pb.PredictRequest) -> pb.PredictResponse:
        """Ask one prediction query (Predict)."""
        return await self._call("Predict", lambda: self.stub.Predict(req, timeout=self.deadline_s))

    async def predict_batch(self, reqs: list[pb.PredictRequest]) -> list[pb.PredictResponse]:
        """Several users' queries in one PredictBatch call; answers in the same order."""
        req = pb.PredictBatchRequest(requests=reqs)
        resp = await self._call(
            "PredictBatch", lambda: self.stub.PredictBatch(req, timeout=self.deadline_s)
        )
        if len(resp.responses) != len(reqs):
            raise ProtocolError(
                f"PredictBatch: {len(reqs)} queries sent but {len(resp.responses)} answers came"
            )
        return list(resp.responses)

    async def recommend(self, req: pb.RecommendRequest) -> pb.RecommendResponse:
        """Ask one recommendation query (Recommend)."""
        return await self._call(
            "Recommend", lambda: self.stub.Recommend(req, timeout=self.deadline_s)
        )

    async def model_archive(self, round_: int | None = None) -> bytes:
        """The published model (.npz bytes), verified; `round_`: that collect round's."""
        req = pb.GetModelRequest(run_id=self.run_id, round=round_)

        async def attempt() -> bytes:
            return verified_archive(
                [c async for c in self.stub.GetModel(req, timeout=self.deadline_s)]
            )

        return await self._call("GetModel", attempt)

    async def list_users(self, after: str = "") -> list[pb.UserState]:
        """One page of this node's users after `after` (`all_users` reads them all)."""
        req = pb.ListUsersRequest(run_id=self.run_id, after=after)
        resp = await self._call(
            "ListUsers", lambda: self.stub.ListUsers(req, timeout=self.deadline_s)
        )
        return list(resp.users)

    async def transcript_after(self, seq: int) -> list[pb.TranscriptRecord]:
        """One page of the stored records after `seq` (only for a node that may read the
        observation feed)."""
        req = pb.GetTranscriptRequest(run_id=self.run_id, after_seq=seq)
        resp = await self._call(
            "GetTranscript", lambda: self.stub.GetTranscript(req, timeout=self.deadline_s)
        )
        return list(resp.records)

    async def close(self) -> None:
        """Close the gRPC channel."""
        await self.channel.close()


__all__ = [
    "MAX_MESSAGE_BYTES",
    "GrpcTransport",
    "Transport",
    "all_users",
    "make_channel",
    "verified_archive",
]
